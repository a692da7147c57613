"""API hardening: body size limits, security headers, CSRF on session writes, throttling, login lockout."""

from __future__ import annotations

from typing import Any

import pytest
from axes.models import AccessAttempt
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver
from rest_framework.test import APIClient
from rest_framework.views import APIView

from tests.conftest import Personas


def test_oversized_bodies_answer_413_before_any_view(personas: Personas, settings: Any) -> None:
    settings.API_MAX_BODY_BYTES = 1024 * 1024
    client = personas.client(personas.requester)
    big = "x" * (1024 * 1024 + 1)
    response = client.post("/api/v1/licenses/evaluate", data=big, content_type="application/json")
    assert response.status_code == 413
    assert "too large" in response.json()["message"]
    gate = APIClient().post("/api/v1/gate/check", data="x" * (64 * 1024 + 1), content_type="application/json")
    assert gate.status_code == 413  # the gate's own, smaller limit


def test_security_headers_on_api_and_pages(client: Client) -> None:
    for path in ("/api/v1/me", "/accounts/login/"):
        response = client.get(path)
        csp = response.headers["Content-Security-Policy"]
        assert "default-src 'self'" in csp
        assert "frame-ancestors 'none'" in csp
        assert "'unsafe-inline'" not in csp
        assert response.headers["X-Content-Type-Options"] == "nosniff"
        assert response.headers["X-Frame-Options"] == "DENY"
        assert "camera=()" in response.headers["Permissions-Policy"]
    assert client.get("/api/v1/me").headers["Cache-Control"] == "no-store"


def _write_routes() -> list[tuple[str, str]]:
    """Every DRF view with a write method, with its path made concrete."""
    routes: list[tuple[str, str]] = []

    def walk(patterns: list[Any], prefix: str) -> None:
        for pattern in patterns:
            route = prefix + str(pattern.pattern)
            if isinstance(pattern, URLResolver):
                walk(pattern.url_patterns, route)
            elif isinstance(pattern, URLPattern):
                view = getattr(pattern.callback, "view_class", None)
                if view is None or not issubclass(view, APIView):
                    continue
                path = "/" + route.replace("<uuid:code>", "0" * 8 + "-0000-4000-8000-" + "0" * 12).replace(
                    "<uuid:item>", "0" * 8 + "-0000-4000-8000-" + "0" * 12
                ).replace("<uuid:waiver>", "0" * 8 + "-0000-4000-8000-" + "0" * 12).replace("<str:key>", "mit").replace(
                    "^", ""
                ).replace("$", "")
                for method in ("post", "put", "patch", "delete"):
                    if hasattr(view, method):
                        routes.append((method, path))

    walk(get_resolver().url_patterns, "")
    return routes


# The gate's check and its adapters (Argo Rollouts, Flagger, GitHub) take a CI token, never a session.
BEARER_ONLY = (
    "/api/v1/gate/check",
    "/api/v1/gate/argo",
    "/api/v1/gate/flagger/confirm-promotion",
    "/api/v1/gate/github/protection-rule",
)


def test_every_session_write_needs_the_csrf_token(personas: Personas) -> None:
    routes = _write_routes()
    assert len(routes) > 15
    client = APIClient(enforce_csrf_checks=True)
    client.force_login(personas.admin)
    for method, path in routes:
        response = getattr(client, method)(path, {}, format="json")
        if path in BEARER_ONLY:
            assert response.status_code == 401, path  # bearer tokens only: a session is not credentials here
            continue
        assert response.status_code == 403, (method, path, response.status_code)
        assert "CSRF" in response.json()["message"], (method, path)


def test_the_gate_is_throttled_per_token(monkeypatch: pytest.MonkeyPatch, personas: Personas) -> None:
    from governance.core.tokens import TokenScope, api_token_issue
    from governance.gate.api import TokenRateThrottle

    monkeypatch.setattr(TokenRateThrottle, "THROTTLE_RATES", {"gate": "2/minute"})
    token = api_token_issue(user=personas.admin, name="ci", scopes=[TokenScope.GATE_CHECK], team=personas.team)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token.clear_text}")
    statuses = [client.post("/api/v1/gate/check", {}, format="json").status_code for _ in range(3)]
    assert statuses == [400, 400, 429]


def test_login_locks_out_after_repeated_failures(personas: Personas) -> None:
    client = Client(REMOTE_ADDR="10.0.0.7")
    for _ in range(4):
        failed = client.post("/accounts/login/", {"username": "req", "password": "wrong"})
        assert failed.status_code == 200  # the form again, with its error
    assert client.post("/accounts/login/", {"username": "req", "password": "wrong"}).status_code == 429  # the 5th
    locked = client.post("/accounts/login/", {"username": "req", "password": "pw-req"})
    assert locked.status_code == 429  # the right password no longer helps
    assert AccessAttempt.objects.filter(username="req").exists()
    other = Client(REMOTE_ADDR="10.0.0.8").post("/accounts/login/", {"username": "req", "password": "pw-req"})
    assert other.status_code == 302  # the lockout is per username and address
