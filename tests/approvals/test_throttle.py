"""Signing re-enters the password, so sign-off attempts are limited per user: a stolen session cannot
guess a reviewer's password through the API's sign-off endpoints or the web form."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.cache import cache
from django.test import Client

from governance.deployments.models import SignOff
from tests.approvals.conftest import SignFlow


@pytest.fixture(autouse=True)
def _fresh_counters() -> Any:
    cache.clear()
    yield
    cache.clear()


def test_wrong_passwords_on_the_api_are_throttled(sign_flow: SignFlow, artifacts: Any, settings: Any) -> None:
    settings.SIGNOFF_RATE = "3/minute"
    code = sign_flow.kimi(artifacts)
    body = {"role": "legal", "decision": "approve", "evidence_digest": sign_flow.digest(code), "password": "guess"}
    client = sign_flow.client(sign_flow.p.legal)
    url = f"/api/v1/approvals/deployments/{code}/signoffs"
    statuses = [client.post(url, body, format="json").status_code for _ in range(4)]
    assert statuses == [403, 403, 403, 429]
    # The review URL shares the same per-user budget.
    review = {"verdict": "approve", "evidence_digest": sign_flow.digest(code), "password": "pw-legal"}
    assert client.post(f"/api/v1/deployments/{code}/review", review, format="json").status_code == 429
    assert not SignOff.objects.filter(deployment__code=code).exists()


def test_wrong_passwords_on_the_web_form_are_throttled(sign_flow: SignFlow, artifacts: Any, settings: Any) -> None:
    settings.SIGNOFF_RATE = "2/m"
    code = sign_flow.kimi(artifacts)
    browser = Client()
    browser.force_login(sign_flow.p.legal)
    form = {"role": "legal", "verdict": "approve", "evidence_digest": sign_flow.digest(code), "password": "guess"}
    statuses = [browser.post(f"/requests/{code}/review", form).status_code for _ in range(3)]
    assert statuses[:2] != [429, 429]
    assert statuses[2] == 429
    assert not SignOff.objects.filter(deployment__code=code).exists()


def test_the_api_and_the_web_form_share_one_budget(sign_flow: SignFlow, artifacts: Any, settings: Any) -> None:
    """Finding 5 of issue 29: one attempt budget per reviewer, whichever way the password comes."""
    settings.SIGNOFF_RATE = "3/m"
    code = sign_flow.ready(artifacts["apache"])
    browser = Client()
    browser.force_login(sign_flow.p.legal)
    form = {"role": "legal", "verdict": "approve", "evidence_digest": sign_flow.digest(code), "password": "guess"}
    assert sign_flow.sign(sign_flow.p.legal, code, "legal", password="guess").status_code == 403
    assert sign_flow.sign(sign_flow.p.legal, code, "legal", password="guess").status_code == 403
    assert browser.post(f"/requests/{code}/review", form).status_code != 429
    assert browser.post(f"/requests/{code}/review", form).status_code == 429
    assert sign_flow.sign(sign_flow.p.legal, code, "legal", password="guess").status_code == 429


def test_wrong_signoff_passwords_lock_the_account_out_like_logins(
    sign_flow: SignFlow, artifacts: Any, settings: Any
) -> None:
    """Finding 5 of issue 29: failed sign-off passwords count towards django-axes' lockout, audited."""
    from governance.audit.actions import AuditAction
    from governance.audit.models import AuditEvent

    settings.AXES_FAILURE_LIMIT = 3
    code = sign_flow.ready(artifacts["apache"])
    legal = sign_flow.p.legal
    for _ in range(3):
        assert sign_flow.sign(legal, code, "legal", password="guess").status_code in (403, 429)
    # Locked out: the right password no longer signs, nor logs in.
    locked = sign_flow.sign(legal, code, "legal")
    assert locked.status_code in (403, 429), locked.content
    assert not SignOff.objects.filter(deployment__code=code).exists()
    login = Client().post("/accounts/login/", {"username": legal.username, "password": f"pw-{legal.username}"})
    assert login.status_code in (403, 429)
    codes = [
        e["code"]
        for e in AuditEvent.objects.filter(action=AuditAction.SIGNOFF_REFUSED, object_id=code).values_list(
            "data", flat=True
        )
    ]
    assert codes.count("password.wrong") == 3
    assert codes[-1] == "account.locked_out"
