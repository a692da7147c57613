"""A real OpenID Connect provider (scripts/oidc-provider, pyop) on loopback, started once per session,
and the service configured as its client. The browser's side of the flow is a requests session at
the provider and Django's test client at the service."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pytest
import requests
from django.test import Client

from tests.approvals.conftest import SignFlow, artifacts, catalog, flow, sign_flow  # noqa: F401
from tests.conftest import ROOT

CLIENT_ID = "governance"
CLIENT_SECRET = "client-secret-for-tests-0123456789"
OTHER_CLIENT_ID = "other-app"
CALLBACK = "http://testserver/oidc/callback/"
AFTER_LOGOUT = "http://testserver/accounts/login/"
ROLE_GROUPS = {"gov-legal": "legal_reviewer", "gov-eng": "engineering_reviewer", "gov-requesters": "requester"}
TEAM_GROUPS = {"team-platform": "platform"}

__all__ = ["artifacts", "catalog", "flow", "sign_flow"]


@dataclass
class Provider:
    issuer: str
    certificate: Path
    users_path: Path
    process: subprocess.Popen[bytes]
    browsers: dict[str, requests.Session] = field(default_factory=dict)

    def set_user(self, username: str, groups: list[str], **claims: Any) -> None:
        users = json.loads(self.users_path.read_text()) if self.users_path.exists() else {}
        users[username] = {
            "password": f"idp-{username}",
            "claims": {
                "email": f"{username}@example.org",
                "name": f"{username.title()} Example",
                "groups": groups,
                **claims,
            },
        }
        self.users_path.write_text(json.dumps(users))

    def browser(self, username: str) -> requests.Session:
        """The user's browser at the provider (its session cookie)."""
        return self.browsers.setdefault(username, requests.Session())

    def get(self, username: str, url: str) -> requests.Response:
        # verify= on each call: REQUESTS_CA_BUNDLE in the environment overrides a session's setting.
        return self.browser(username).get(url, verify=str(self.certificate), allow_redirects=False, timeout=10)

    def status(self) -> dict[str, Any]:
        return requests.get(f"{self.issuer}/_status", verify=str(self.certificate), timeout=10).json()

    def code_flow_id_token(self, username: str, client_id: str = CLIENT_ID, nonce: str = "n-1") -> str:
        """An ID token straight from the provider for `client_id` (what the service's callback would receive)."""
        from urllib.parse import parse_qs, urlencode

        query = urlencode(
            {
                "response_type": "code",
                "scope": "openid email profile",
                "client_id": client_id,
                "redirect_uri": CALLBACK,
                "state": "s",
                "nonce": nonce,
                "prompt": "login",
            }
        )
        login = self.browser(username).post(
            f"{self.issuer}/login",
            data={"query": query, "username": username, "password": f"idp-{username}"},
            verify=str(self.certificate),
            allow_redirects=False,
            timeout=10,
        )
        code = parse_qs(urlparse(login.headers["Location"]).query)["code"][0]
        token = requests.post(
            f"{self.issuer}/token",
            data={
                "grant_type": "authorization_code",
                "code": code,
                "redirect_uri": CALLBACK,
                "client_id": client_id,
                "client_secret": CLIENT_SECRET,
            },
            verify=str(self.certificate),
            timeout=10,
        )
        return str(token.json()["id_token"])


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def start_provider(folder: Path, *extra: str, service: str = "http://testserver") -> Provider:
    """The provider, with this service (at `service`: the test client's, or gunicorn's URL) as its client."""
    folder.mkdir(parents=True, exist_ok=True)
    callback = CALLBACK.replace("http://testserver", service)
    clients = [
        {
            "client_id": CLIENT_ID,
            "client_secret": CLIENT_SECRET,
            "redirect_uris": [callback],
            "post_logout_redirect_uris": [AFTER_LOGOUT.replace("http://testserver", service)],
        },
        {"client_id": OTHER_CLIENT_ID, "client_secret": CLIENT_SECRET, "redirect_uris": [callback]},
    ]
    (folder / "clients.json").write_text(json.dumps(clients))
    users = folder / "users.json"
    users.write_text("{}")
    port = _free_port()
    certificate = folder / "provider.pem"
    log = (folder / "provider.log").open("ab")
    process = subprocess.Popen(
        [
            sys.executable,
            str(ROOT / "scripts" / "oidc-provider"),
            "--port",
            str(port),
            "--users",
            str(users),
            "--clients",
            str(folder / "clients.json"),
            "--certificate",
            str(certificate),
            *extra,
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    issuer = f"https://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        if process.poll() is not None:
            raise RuntimeError("oidc-provider exited:\n" + (folder / "provider.log").read_text())
        try:
            if certificate.exists():
                requests.get(f"{issuer}/.well-known/openid-configuration", verify=str(certificate), timeout=2)
                break
        except requests.RequestException:
            pass
        if time.monotonic() > deadline:
            process.kill()
            raise RuntimeError("oidc-provider did not answer:\n" + (folder / "provider.log").read_text())
        time.sleep(0.2)
    return Provider(issuer, certificate, users, process)


def stop_provider(provider: Provider) -> None:
    provider.process.terminate()
    try:
        provider.process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        provider.process.kill()


@pytest.fixture(scope="session")
def provider(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Provider]:
    started = start_provider(tmp_path_factory.mktemp("oidc-provider"))
    yield started
    stop_provider(started)


@pytest.fixture(scope="session")
def careless_provider(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Provider]:
    """A provider that keeps its session when asked for prompt=login / max_age=0."""
    started = start_provider(tmp_path_factory.mktemp("oidc-careless"), "--ignore-prompt")
    yield started
    stop_provider(started)


@pytest.fixture(scope="session")
def kidless_provider(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Provider]:
    """A provider with one signing key and no key id (`kid`) in its JWKS or its ID tokens."""
    started = start_provider(tmp_path_factory.mktemp("oidc-kidless"), "--no-kid")
    yield started
    stop_provider(started)


def configure(settings: Any, provider: Provider) -> None:
    settings.SSO_ENABLED = True
    settings.OIDC_ISSUER = provider.issuer
    settings.OIDC_RP_CLIENT_ID = CLIENT_ID
    settings.OIDC_RP_CLIENT_SECRET = CLIENT_SECRET
    settings.OIDC_OP_AUTHORIZATION_ENDPOINT = f"{provider.issuer}/authorize"
    settings.OIDC_OP_TOKEN_ENDPOINT = f"{provider.issuer}/token"
    settings.OIDC_OP_JWKS_ENDPOINT = f"{provider.issuer}/jwks"
    settings.OIDC_OP_LOGOUT_ENDPOINT = f"{provider.issuer}/logout"
    settings.OIDC_VERIFY_SSL = str(provider.certificate)
    settings.OIDC_ROLE_GROUPS = ROLE_GROUPS
    settings.OIDC_TEAM_GROUPS = TEAM_GROUPS
    backends = [b for b in settings.AUTHENTICATION_BACKENDS if not b.endswith("OidcBackend")]
    settings.AUTHENTICATION_BACKENDS = [*backends, "governance.sso.backends.OidcBackend"]


@pytest.fixture
def sso(settings: Any, provider: Provider) -> Provider:
    configure(settings, provider)
    return provider


def sign_in(client: Client, provider: Provider, username: str, *, step_up: bool = False) -> Any:
    """The whole browser round trip: the service sends to the provider, the user signs in there
    (or its session answers), the provider sends back to the service's callback."""
    start = client.get("/oidc/authenticate/" + ("?step_up=1" if step_up else ""))
    assert start.status_code == 302, start
    authorize = start["Location"]
    assert authorize.startswith(provider.issuer)
    answer = provider.get(username, authorize)
    if answer.status_code == 200:  # the sign-in form
        answer = provider.browser(username).post(
            f"{provider.issuer}/login",
            data={"query": urlparse(authorize).query, "username": username, "password": f"idp-{username}"},
            verify=str(provider.certificate),
            allow_redirects=False,
            timeout=10,
        )
    assert answer.status_code == 302, answer.text
    callback = urlparse(answer.headers["Location"])
    assert f"{callback.scheme}://{callback.netloc}{callback.path}" == CALLBACK
    return client.get(f"{callback.path}?{callback.query}")
