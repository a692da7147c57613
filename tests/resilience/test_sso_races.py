"""Issue 43 through gunicorn, under single sign-on at the project's own OpenID provider
(scripts/oidc-provider): the reviewer signs in over HTTP as a browser does (the service's redirect,
the provider's sign-in form, the callback, the session cookie), and the service's workers are
separate processes, so requests sent at once really run at once.

- One step-up, three sign-offs for three requests sent at the same moment: exactly one is recorded
  (`auth_method: oidc_step_up`), the others answer 403 `step_up.used`. Before the fix all three
  were recorded: each worker read the step-up from the session before any consumed it.
- ID tokens of every shape an attacker can make without the provider's key, put in place of the
  provider's at the token endpoint, answer 4xx at the real callback naming the check, never 500
  (a token without `kid` was a KeyError in the OIDC library: 500), and sign nobody in.

The service reaches the provider's token endpoint through a relay in the test process
(`TokenRelay`): it passes the provider's answer through unchanged, unless a test gave it a forgery
to put in place of the ID token (what an attacker between the two, or a provider gone hostile, sends).
"""

from __future__ import annotations

import functools
import json
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlparse

import pytest
import requests

from governance.approvals.models import PacketSignature
from governance.approvals.services import pki_init
from governance.audit.actions import AuditAction
from governance.audit.models import AuditEvent
from governance.deployments.models import SignOff
from governance.sso.models import StepUp
from tests.deployments.conftest import ensure_passed_eval
from tests.resilience.conftest import Stack, wait_until
from tests.resilience.flows import to_review, wait_plans_done
from tests.resilience.helpers import Seed, seed
from tests.sso.conftest import CLIENT_ID, CLIENT_SECRET, ROLE_GROUPS, Provider, start_provider, stop_provider
from tests.sso.forged import forged_id_tokens

pytestmark = [pytest.mark.fault, pytest.mark.postgres]

ROUNDS = 2  # each round: one fresh step-up, three sign-offs at once (four requests in all)


class TokenRelay:
    """An HTTPS endpoint (the provider's certificate, another port) that the service takes for the
    provider's token endpoint. It forwards each exchange to the provider; when a test set
    `substitute`, the next answer's `id_token` is replaced by what it returns for the genuine one."""

    def __init__(self, provider: Provider) -> None:
        self.provider = provider
        self.lock = threading.Lock()
        self.substitute: Callable[[str], Any] | None = None
        self.replaced = 0
        relay = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                forwarded = {
                    name: self.headers[name] for name in ("Content-Type", "Authorization") if name in self.headers
                }
                answer = requests.post(
                    f"{provider.issuer}/token",
                    data=body,
                    headers=forwarded,
                    verify=str(provider.certificate),
                    timeout=10,
                )
                content = answer.content
                with relay.lock:
                    substitute, relay.substitute = relay.substitute, None
                if substitute is not None and answer.status_code == 200:
                    token_answer = answer.json()
                    token_answer["id_token"] = substitute(token_answer["id_token"])
                    content = json.dumps(token_answer).encode()
                    with relay.lock:
                        relay.replaced += 1
                self.send_response(answer.status_code)
                self.send_header("Content-Type", answer.headers.get("Content-Type", "application/json"))
                self.send_header("Content-Length", str(len(content)))
                self.end_headers()
                self.wfile.write(content)

        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(provider.certificate, provider.certificate.with_suffix(".key"))
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        self.url = f"https://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@dataclass(frozen=True)
class Sso:
    provider: Provider
    relay: TokenRelay


@pytest.fixture(scope="module")
def sso(tmp_path_factory: pytest.TempPathFactory, stack_web_port: int) -> Iterator[Sso]:
    provider = start_provider(tmp_path_factory.mktemp("oidc-provider"), service=f"http://127.0.0.1:{stack_web_port}")
    relay = TokenRelay(provider)
    try:
        yield Sso(provider, relay)
    finally:
        relay.close()
        stop_provider(provider)


@pytest.fixture(scope="module")
def stack_env(sso: Sso) -> dict[str, str]:
    """The stack configured as the provider's client (docs/access.md, "Single sign-on")."""
    issuer = sso.provider.issuer
    return {
        "OIDC_ISSUER": issuer,
        "OIDC_CLIENT_ID": CLIENT_ID,
        "OIDC_CLIENT_SECRET": CLIENT_SECRET,
        "OIDC_AUTHORIZATION_ENDPOINT": f"{issuer}/authorize",
        "OIDC_TOKEN_ENDPOINT": f"{sso.relay.url}/token",
        "OIDC_JWKS_ENDPOINT": f"{issuer}/jwks",
        "OIDC_END_SESSION_ENDPOINT": f"{issuer}/logout",
        "OIDC_CA_BUNDLE": str(sso.provider.certificate),
        "OIDC_ROLE_GROUPS": json.dumps(ROLE_GROUPS),
        # The stack speaks plain HTTP on loopback (a deployment terminates TLS in front of gunicorn):
        # a Secure cookie would never be sent back to it.
        "SESSION_COOKIE_SECURE": "false",
        "CSRF_COOKIE_SECURE": "false",
    }


class Browser:
    """One browser at the service: its cookies (the session) in a requests session."""

    def __init__(self, stack: Stack) -> None:
        self.base = stack.base_url
        self.session = requests.Session()

    def get(self, path: str) -> requests.Response:
        return self.session.get(self.base + path, allow_redirects=False, timeout=30)

    def start_sign_in(self, provider: Provider, username: str, path: str = "/oidc/authenticate/") -> str:
        """From the service's redirect through the provider (its form, when it asks): the callback
        URL the provider sends the browser back to."""
        start = self.get(path)
        assert start.status_code == 302, start.text
        if start.headers["Location"].startswith("/oidc/authenticate/"):  # /oidc/step-up/ sends there first
            start = self.get(start.headers["Location"])
            assert start.status_code == 302, start.text
        authorize = start.headers["Location"]
        assert authorize.startswith(f"{provider.issuer}/authorize"), authorize
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
        callback = answer.headers["Location"]
        assert callback.startswith(f"{self.base}/oidc/callback/?"), callback
        return callback

    def sign_in(self, provider: Provider, username: str, path: str = "/oidc/authenticate/") -> None:
        callback = self.session.get(self.start_sign_in(provider, username, path), allow_redirects=False, timeout=30)
        assert callback.status_code == 302, (callback.status_code, callback.text)
        assert not urlparse(callback.headers["Location"]).path.startswith("/accounts/login"), "sign-in refused"

    def username(self) -> str | None:
        answer = self.get("/api/v1/me")
        return str(answer.json()["username"]) if answer.status_code == 200 else None

    def cookie_header(self) -> dict[str, str]:
        """What this browser sends with a POST: its cookies and the CSRF token (a tab of it)."""
        cookies = self.session.cookies.get_dict()
        return {
            "Cookie": "; ".join(f"{name}={value}" for name, value in cookies.items()),
            "X-CSRFToken": str(cookies["csrftoken"]),
            "Content-Type": "application/json",
        }


def _ready(stack: Stack, data: Seed, names: list[str]) -> dict[str, str]:
    """Requests in review with their capacity computed (by the stack's worker), a passed eval and
    their obligations accepted: a legal approval of each would be recorded. Code -> evidence digest."""
    codes = [to_review(stack, data, name) for name in names]
    wait_plans_done(codes, 120)
    digests = {}
    for code in codes:
        ensure_passed_eval(code)
        requester, legal = data.tokens[0], data.legal_token
        obligations = stack.call("GET", f"/api/v1/deployments/{code}", requester).body["obligations"]
        for item in obligations:
            path = f"/api/v1/deployments/{code}/obligations/{item['code']}"
            answer = stack.call("POST", f"{path}/acknowledge", requester, {"how_met": "footer of every page"})
            assert answer.status == 200, answer.body
            answer = stack.call("POST", f"{path}/review", legal, {"accept": True})
            assert answer.status == 200, answer.body
        digests[code] = str(stack.call("GET", f"/api/v1/deployments/{code}", legal).body["evidence_digest"])
    return digests


@dataclass(frozen=True)
class Sent:
    code: str
    sent_at: float
    status: int
    body: Any


def _sign_offs_at_once(stack: Stack, reviewer: Browser, digests: dict[str, str]) -> list[Sent]:
    """A legal approval of each request, sent from one thread per request, all released together:
    gunicorn's workers (separate processes) take one each."""
    headers = reviewer.cookie_header()
    start = threading.Barrier(len(digests), timeout=30)
    sent: list[Sent] = []
    lock = threading.Lock()

    def sign(code: str, digest: str) -> None:
        body = {"role": "legal", "decision": "approve", "evidence_digest": digest}
        start.wait()
        sent_at = time.monotonic()
        answer = requests.post(
            f"{stack.base_url}/api/v1/approvals/deployments/{code}/signoffs", json=body, headers=headers, timeout=60
        )
        try:
            parsed = answer.json()
        except ValueError:
            parsed = answer.text[:500]
        with lock:
            sent.append(Sent(code, sent_at, answer.status_code, parsed))

    threads = [threading.Thread(target=sign, args=item) for item in digests.items()]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=90)
    assert len(sent) == len(digests), sent
    return sent


@pytest.mark.django_db(transaction=True)
def test_one_step_up_signs_one_of_three_sign_offs_sent_at_once_through_gunicorn(stack: Stack, sso: Sso) -> None:
    """Each round: a fresh step-up, then legal approvals of three requests released together from
    three threads (each with the reviewer's session cookie, as three tabs of one browser): one is
    recorded with the step-up, the others answer 403 `step_up.used`, and one packet is signed."""
    data = seed(1)
    pki_init(actor="system:test")
    unsigned = _ready(stack, data, [f"step-up target {n}" for n in range(ROUNDS + 2)])
    sso.provider.set_user("rhea", ["gov-legal"])
    reviewer = Browser(stack)
    reviewer.sign_in(sso.provider, "rhea")
    assert reviewer.username() == "rhea"
    signed: list[str] = []
    for round_ in range(ROUNDS):
        # One fresh sign-in at the provider (prompt=login: it shows its form again).
        reviewer.sign_in(sso.provider, "rhea", f"/oidc/step-up/?next=/requests/{next(iter(unsigned))}")
        step_up = StepUp.objects.filter(user__username="rhea").latest("created_at")
        assert step_up.used_at is None
        targets = dict(list(unsigned.items())[:3])
        last_seq = AuditEvent.objects.order_by("-seq").values_list("seq", flat=True).first() or 0
        sent = _sign_offs_at_once(stack, reviewer, targets)
        answers = [(s.status, s.body) for s in sent]
        assert not [a for a in answers if a[0] >= 500], answers
        assert sorted(s.status for s in sent) == [202, 403, 403], answers
        (won,) = [s for s in sent if s.status == 202]
        assert won.body["auth_method"] == "oidc_step_up", won.body
        for refused in (s for s in sent if s.status == 403):
            assert refused.body["extra"]["code"] == "step_up.used", refused.body
            assert "/oidc/step-up/" in refused.body["message"], refused.body
        recorded = SignOff.objects.filter(deployment__code__in=targets)
        assert [(str(s.deployment.code), s.auth_method) for s in recorded] == [(won.code, "oidc_step_up")]
        refusals = AuditEvent.objects.filter(
            action=AuditAction.SIGNOFF_REFUSED, object_id__in=targets, data__code="step_up.used", seq__gt=last_seq
        )
        assert refusals.count() == 2
        step_up.refresh_from_db()
        assert step_up.used_at is not None
        spread = max(s.sent_at for s in sent) - min(s.sent_at for s in sent)
        print(f"round {round_}: sent within {spread * 1000:.1f} ms: {sorted(s.status for s in sent)}")
        del unsigned[won.code]
        signed.append(won.code)
    # The one signature of each round reaches its packet (the heavy worker signs it); nothing else does.
    wait_until(
        lambda: (
            PacketSignature.objects.filter(signoff__deployment__code__in=signed, status="signed").count() == len(signed)
        ),
        120,
        "the worker to sign the packets",
    )
    assert PacketSignature.objects.count() == len(signed)


def _forgery(shape: str, genuine: str) -> Any:
    """The forgery `shape`, made from this sign-in's own genuine token (its nonce), as an attacker
    between the service and the provider would."""
    return forged_id_tokens(genuine)[shape][0]


@pytest.mark.django_db(transaction=True)
def test_id_tokens_of_every_shape_answer_4xx_at_the_callback_through_gunicorn(stack: Stack, sso: Sso) -> None:
    """A real sign-in to the callback, the provider's ID token replaced on its way (tests/sso/forged.py):
    403 naming the check for each shape, and the browser is not signed in."""
    sso.provider.set_user("ivo", ["gov-legal"])
    genuine = Browser(stack)
    genuine.sign_in(sso.provider, "ivo")  # through the relay, unchanged: the provider's token signs in
    assert genuine.username() == "ivo"
    captured: list[str] = []

    def capture(token: str) -> str:
        captured.append(token)
        return token

    sso.relay.substitute = capture
    Browser(stack).sign_in(sso.provider, "ivo")
    shapes = forged_id_tokens(captured[0])
    answers: dict[str, tuple[int, str]] = {}
    for shape in shapes:
        browser = Browser(stack)
        callback = browser.start_sign_in(sso.provider, "ivo")
        before = sso.relay.replaced
        sso.relay.substitute = functools.partial(_forgery, shape)
        response = browser.session.get(callback, allow_redirects=False, timeout=30)
        assert sso.relay.replaced == before + 1, shape
        answers[shape] = (response.status_code, response.text)
        assert browser.username() is None, shape
    wrong = {
        shape: answer
        for shape, answer in answers.items()
        if not 400 <= answer[0] < 500 or shapes[shape][1] not in answer[1]
    }
    assert not wrong, wrong
    print(f"{len(answers)} shapes: " + ", ".join(f"{status}" for status, _ in answers.values()))
