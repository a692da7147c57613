"""Single sign-on against a real OpenID Connect provider (scripts/oidc-provider on loopback, TLS):
users and roles from the group claim, step-up for signing, refused ID tokens, provider logout."""

from __future__ import annotations

import base64
import copy
import re
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from typing import Any
from urllib.parse import parse_qs, urlparse

import jwt
import pytest
import requests
import time_machine
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from django.contrib.auth.models import User
from django.core.exceptions import SuspiciousOperation
from django.db import connection
from django.test import Client
from django.utils import timezone

from governance.approvals import services as approval_services
from governance.audit.actions import AuditAction
from governance.audit.models import AuditEvent
from governance.core.models import Team
from governance.core.roles import user_roles
from governance.deployments.models import SignOff
from governance.sso.backends import AuthorizationCodeRefused, IdTokenRefused, OidcBackend, signing_jwk
from governance.sso.models import ExternalIdentity
from tests.approvals.conftest import SignFlow
from tests.sso.conftest import CALLBACK, CLIENT_ID, CLIENT_SECRET, OTHER_CLIENT_ID, Provider, configure, sign_in
from tests.sso.forged import forger_pem, kidless_id_tokens

pytestmark = pytest.mark.django_db


def signed_in_user(client: Client) -> User | None:
    response = client.get("/api/v1/me")
    if response.status_code != 200:
        return None
    return User.objects.get(username=response.json()["username"])


# --- first sign-in, and roles following the group claim ----------------------------------------


def test_first_login_creates_the_user_with_mapped_roles_and_team(sso: Provider) -> None:
    Team.objects.create(name="platform")
    sso.set_user("lena", ["gov-legal", "team-platform", "all-staff"])
    client = Client()
    response = sign_in(client, sso, "lena")
    assert response.status_code == 302, response.content
    user = signed_in_user(client)
    assert user is not None
    assert user.username == "lena"
    assert user_roles(user) == {"legal_reviewer"}
    assert list(user.teams.values_list("name", flat=True)) == ["platform"]
    assert not user.has_usable_password()  # under SSO there is no local password to steal
    assert user.email == "lena@example.org"
    assert ExternalIdentity.objects.get(user=user).issuer == sso.issuer
    mapping = AuditEvent.objects.filter(action=AuditAction.USER_CHANGED, object_id="lena").last()
    assert mapping is not None
    assert mapping.actor_name == "system:sso"
    assert mapping.data["created"] is True
    assert mapping.data["groups"] == ["all-staff", "gov-legal", "team-platform"]
    assert mapping.data["roles"] == {"before": [], "after": ["legal_reviewer"]}
    assert AuditEvent.objects.filter(action=AuditAction.USER_ROLES_CHANGED, object_id="lena").exists()


def test_a_changed_group_claim_changes_the_roles_at_next_login(sso: Provider) -> None:
    Team.objects.create(name="platform")
    sso.set_user("omar", ["gov-legal", "team-platform"])
    sign_in(Client(), sso, "omar")
    user = User.objects.get(username="omar")
    assert user_roles(user) == {"legal_reviewer"}

    sso.set_user("omar", ["gov-eng"])  # moved at the provider: engineering, off the platform team
    before = AuditEvent.objects.count()
    client = Client()
    sign_in(client, sso, "omar")
    user = User.objects.get(username="omar")
    assert signed_in_user(client) == user  # the same account, found by issuer + subject
    assert user_roles(user) == {"engineering_reviewer"}
    assert not user.teams.exists()
    new = AuditEvent.objects.filter(seq__gt=before)
    changed = new.filter(action=AuditAction.USER_CHANGED).get()
    assert changed.data["roles"] == {"before": ["legal_reviewer"], "after": ["engineering_reviewer"]}
    assert changed.data["teams"] == {"before": ["platform"], "after": []}
    assert new.filter(action=AuditAction.USER_ROLES_CHANGED).exists()
    assert new.filter(action=AuditAction.TEAM_MEMBERS_CHANGED).exists()


def test_an_unchanged_claim_writes_no_mapping_event(sso: Provider) -> None:
    sso.set_user("una", ["gov-legal"])
    sign_in(Client(), sso, "una")
    before = AuditEvent.objects.filter(action=AuditAction.USER_CHANGED).count()
    sign_in(Client(), sso, "una")
    assert AuditEvent.objects.filter(action=AuditAction.USER_CHANGED).count() == before


def test_a_provider_account_never_takes_over_a_local_account_of_the_same_name(sso: Provider) -> None:
    local = User.objects.create_user("root-admin", email="root-admin@example.org", password="x" * 20)
    sso.set_user("root-admin", ["gov-legal"])
    client = Client()
    sign_in(client, sso, "root-admin")
    user = signed_in_user(client)
    assert user is not None
    assert user != local
    assert user.username.startswith("root-admin-")


# --- ID tokens the service refuses ---------------------------------------------------------------


def _backend(settings: Any) -> OidcBackend:
    return OidcBackend()


def test_an_id_token_with_a_bad_signature_is_refused(sso: Provider, settings: Any) -> None:
    sso.set_user("bob", ["gov-legal"])
    token = sso.code_flow_id_token("bob")
    assert _backend(settings).verify_token(token, nonce="n-1")["sub"]  # the genuine token passes
    header, payload, signature = token.split(".")
    flipped = base64.urlsafe_b64encode(bytes(b ^ 1 for b in base64.urlsafe_b64decode(signature + "=="))).rstrip(b"=")
    with pytest.raises(SuspiciousOperation):
        _backend(settings).verify_token(f"{header}.{payload}.{flipped.decode()}", nonce="n-1")
    # Signed by another key under the provider's key id: a forgery.
    claims = jwt.decode(token, options={"verify_signature": False})
    forger = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = forger.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    forged = jwt.encode(claims, pem, algorithm="RS256", headers={"kid": jwt.get_unverified_header(token)["kid"]})
    with pytest.raises(SuspiciousOperation):
        _backend(settings).verify_token(forged, nonce="n-1")


def test_an_id_token_for_another_client_is_refused(sso: Provider, settings: Any) -> None:
    sso.set_user("carl", ["gov-legal"])
    token = sso.code_flow_id_token("carl", client_id=OTHER_CLIENT_ID)
    assert jwt.decode(token, options={"verify_signature": False})["aud"] == [OTHER_CLIENT_ID]
    with pytest.raises(IdTokenRefused, match=r"[Aa]udience"):
        _backend(settings).verify_token(token, nonce="n-1")


def test_an_expired_id_token_is_refused_at_the_callback(sso: Provider) -> None:
    sso.set_user("dora", ["gov-legal"])
    client = Client()
    with time_machine.travel(timezone.now() + timedelta(hours=2)):  # the provider's tokens live 5 minutes
        response = sign_in(client, sso, "dora")
    assert response.status_code == 403
    assert b"expired" in response.content
    assert signed_in_user(client) is None
    assert not User.objects.filter(username="dora").exists()


def test_an_id_token_from_another_issuer_is_refused(sso: Provider, settings: Any) -> None:
    sso.set_user("eve", ["gov-legal"])
    token = sso.code_flow_id_token("eve")
    settings.OIDC_ISSUER = "https://idp.example.org"
    with pytest.raises(IdTokenRefused, match=r"[Ii]ssuer"):
        _backend(settings).verify_token(token, nonce="n-1")


RSA_KEY = {"kty": "RSA", "n": "x", "e": "AQAB"}


@pytest.mark.parametrize(
    ("header", "keys", "picked", "check"),
    [
        ({"alg": "RS256", "kid": "b"}, [{**RSA_KEY, "kid": "a"}, {**RSA_KEY, "kid": "b"}], 1, ""),
        ({"alg": "RS256"}, [RSA_KEY], 0, ""),  # one key, no kid anywhere
        ({"alg": "RS256"}, [{**RSA_KEY, "kid": "a"}], 0, ""),  # one key: the token need not name it
        ({"alg": "RS256"}, [RSA_KEY, {**RSA_KEY, "use": "enc"}], 0, ""),  # an encryption key signs nothing
        ({"alg": "RS256"}, [{**RSA_KEY, "kid": "a"}, {**RSA_KEY, "kid": "b"}], None, "no key id (kid)"),
        ({"alg": "RS256", "kid": "c"}, [{**RSA_KEY, "kid": "a"}], None, "names 0"),
        ({"alg": "RS256", "kid": "a"}, [RSA_KEY], None, "names 0"),
        ({"alg": "none"}, [RSA_KEY], None, "algorithm 'none' is not RS256"),
        ({"alg": "HS256"}, [RSA_KEY], None, "algorithm 'HS256'"),
        ({"alg": "RS256"}, [{**RSA_KEY, "alg": "ES256"}], None, "publishes 0"),
    ],
)
def test_the_signing_key_a_token_header_picks(
    header: dict[str, Any], keys: list[dict[str, Any]], picked: int | None, check: str
) -> None:
    if picked is not None:
        assert signing_jwk(header, {"keys": keys}, "RS256") is keys[picked]
    else:
        with pytest.raises(IdTokenRefused, match=re.escape(check)):
            signing_jwk(header, {"keys": keys}, "RS256")


def test_id_tokens_without_a_usable_kid_answer_403_naming_the_check(
    sso: Provider, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found by an attacker's pass: a token without `kid` raised KeyError in the OIDC library (500)."""
    sso.set_user("kim", ["gov-legal"])
    claims = jwt.decode(sso.code_flow_id_token("kim"), options={"verify_signature": False})
    for shape, (token, check) in kidless_id_tokens(claims).items():
        monkeypatch.setattr(OidcBackend, "get_token", lambda self, payload, t=token: {"id_token": t})
        client = Client()
        start = client.get("/oidc/authenticate/")
        state = parse_qs(urlparse(start["Location"]).query)["state"][0]
        response = client.get("/oidc/callback/", {"state": state, "code": "c"})
        assert response.status_code == 403, shape
        assert check in response.content.decode(), (shape, response.content)
        assert signed_in_user(client) is None


def test_a_provider_with_one_key_and_no_kid_signs_people_in(
    settings: Any, kidless_provider: Provider, monkeypatch: pytest.MonkeyPatch
) -> None:
    configure(settings, kidless_provider)
    kidless_provider.set_user("kai", ["gov-legal"])
    token = kidless_provider.code_flow_id_token("kai")
    assert "kid" not in jwt.get_unverified_header(token)
    client = Client()
    assert sign_in(client, kidless_provider, "kai").status_code == 302
    assert signed_in_user(client) is not None
    # The one key still has to verify the token: one signed by another key, also without kid, is refused.
    claims = jwt.decode(token, options={"verify_signature": False})
    forged = jwt.encode(claims, forger_pem(), algorithm="RS256")
    with pytest.raises(IdTokenRefused, match=r"[Ss]ignature"):
        _backend(settings).verify_token(forged, nonce=claims["nonce"])


# --- step-up for signing -------------------------------------------------------------------------


def _sso_legal(client: Client, provider: Provider, username: str = "lisa") -> User:
    provider.set_user(username, ["gov-legal"])
    sign_in(client, provider, username)
    user = signed_in_user(client)
    assert user is not None
    return user


def _sign(client: Client, sign_flow: SignFlow, code: str, **extra: Any) -> Any:
    body = {"role": "legal", "decision": "approve", "evidence_digest": sign_flow.digest(code), **extra}
    return client.post(f"/api/v1/approvals/deployments/{code}/signoffs", body, content_type="application/json")


def test_sign_off_under_sso_needs_a_step_up_and_records_it(sso: Provider, sign_flow: SignFlow, artifacts: Any) -> None:
    code = sign_flow.ready(artifacts["apache"])
    client = Client()
    user = _sso_legal(client, sso)

    without = _sign(client, sign_flow, code)
    assert without.status_code == 400
    assert "password" in without.json()["extra"]["fields"]
    assert "/oidc/step-up/" in str(without.json())

    step = client.get(f"/oidc/step-up/?next=/requests/{code}")
    assert step.status_code == 302
    stepped = sign_in(client, sso, "lisa", step_up=True)  # prompt=login: the provider asks again
    assert stepped.status_code == 302
    assert signed_in_user(client) == user

    signed = _sign(client, sign_flow, code)
    assert signed.status_code == 202, signed.json()
    assert signed.json()["auth_method"] == "oidc_step_up"
    assert SignOff.objects.get(deployment__code=code).auth_method == "oidc_step_up"
    event = AuditEvent.objects.filter(action=AuditAction.SIGNOFF_RECORDED).last()
    assert event is not None
    assert event.data["auth_method"] == "oidc_step_up"
    assert event.actor_name == user.username


def test_a_step_up_is_used_once(sso: Provider, sign_flow: SignFlow, artifacts: Any) -> None:
    code = sign_flow.ready(artifacts["apache"])
    client = Client()
    _sso_legal(client, sso, "lars")
    sign_in(client, sso, "lars", step_up=True)
    assert _sign(client, sign_flow, code).status_code == 202
    again = _sign(client, sign_flow, code, decision="reject", comment="changed my mind")
    assert again.status_code == 403  # no step-up left for a second signature
    assert again.json()["extra"]["code"] == "step_up.used"


def test_one_step_up_signs_one_request_when_two_sign_offs_interleave(
    sso: Provider, sign_flow: SignFlow, artifacts: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two tabs of one browser send sign-offs for two requests at the same moment: the second
    arrives after the first read the session and before it wrote anything (issue 43). Exactly
    one is signed with the step-up; the other is refused as `step_up.used`."""
    first, second = sign_flow.ready(artifacts["apache"]), sign_flow.ready(artifacts["apache"])
    client = Client()
    _sso_legal(client, sso, "lara")
    sign_in(client, sso, "lara", step_up=True)
    tab = Client()
    tab.cookies = copy.deepcopy(client.cookies)  # the same session, another request in flight
    real_sign_off = approval_services.sign_off
    interleaved: list[Any] = []

    def sign_off_while_another_arrives(**kwargs: Any) -> Any:
        if not interleaved:
            interleaved.append(None)
            interleaved.append(_sign(tab, sign_flow, second))
        return real_sign_off(**kwargs)

    monkeypatch.setattr(approval_services, "sign_off", sign_off_while_another_arrives)
    answers = [_sign(client, sign_flow, first), interleaved[1]]
    assert sorted(a.status_code for a in answers) == [202, 403], [a.json() for a in answers]
    refused = next(a for a in answers if a.status_code == 403)
    assert refused.json()["extra"]["code"] == "step_up.used"
    assert "/oidc/step-up/" in refused.json()["message"]
    assert SignOff.objects.filter(deployment__code__in=[first, second]).count() == 1
    event = AuditEvent.objects.filter(action=AuditAction.SIGNOFF_REFUSED).last()
    assert event is not None
    assert event.data["code"] == "step_up.used"


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_three_concurrent_sign_offs_on_one_step_up_sign_once(
    sso: Provider, sign_flow: SignFlow, artifacts: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The attack of issue 43 with real concurrency: three sign-offs for three requests, each in a
    thread of its own (its own PostgreSQL connection), all past reading the session before any
    signs. One 202; the others wait on the step-up's row and answer `step_up.used`."""
    codes = [sign_flow.ready(artifacts["apache"]) for _ in range(3)]
    client = Client()
    _sso_legal(client, sso, "lior")
    sign_in(client, sso, "lior", step_up=True)
    all_read = threading.Barrier(len(codes), timeout=30)
    real_sign_off = approval_services.sign_off

    def sign_off_once_all_read(**kwargs: Any) -> Any:
        all_read.wait()  # every request read the session (the sign-off's arguments) before any signs
        return real_sign_off(**kwargs)

    monkeypatch.setattr(approval_services, "sign_off", sign_off_once_all_read)

    def sign(code: str) -> tuple[int, dict[str, Any]]:
        tab = Client()
        tab.cookies = copy.deepcopy(client.cookies)
        try:
            answer = _sign(tab, sign_flow, code)
            return answer.status_code, answer.json()
        finally:
            connection.close()  # this thread's connection, before the test database is flushed

    with ThreadPoolExecutor(max_workers=len(codes)) as pool:
        answers = list(pool.map(sign, codes))
    assert sorted(status for status, _ in answers) == [202, 403, 403], answers
    assert {body["extra"]["code"] for status, body in answers if status == 403} == {"step_up.used"}
    assert SignOff.objects.filter(deployment__code__in=codes).count() == 1


def test_a_step_up_used_through_the_api_does_not_sign_in_the_web_form(
    sso: Provider, sign_flow: SignFlow, artifacts: Any
) -> None:
    first, second = sign_flow.ready(artifacts["apache"]), sign_flow.ready(artifacts["apache"])
    client = Client()
    _sso_legal(client, sso, "lena")
    sign_in(client, sso, "lena", step_up=True)
    assert _sign(client, sign_flow, first).status_code == 202
    form = {"role": "legal", "verdict": "approve", "evidence_digest": sign_flow.digest(second), "comment": ""}
    client.post(f"/requests/{second}/review", form)
    assert not SignOff.objects.filter(deployment__code=second).exists()
    sign_in(client, sso, "lena", step_up=True)  # a new step-up signs the next one
    assert _sign(client, sign_flow, second).status_code == 202


def test_a_sign_off_without_a_fresh_auth_time_is_refused(sso: Provider, sign_flow: SignFlow, artifacts: Any) -> None:
    code = sign_flow.ready(artifacts["apache"])
    client = Client()
    _sso_legal(client, sso, "lucy")
    sign_in(client, sso, "lucy", step_up=True)
    with time_machine.travel(timezone.now() + timedelta(minutes=10)):  # SSO_STEP_UP_MAX_AGE_S is 5 minutes
        refused = _sign(client, sign_flow, code)
    assert refused.status_code == 403
    assert refused.json()["extra"]["code"] == "step_up.stale"
    assert not SignOff.objects.filter(deployment__code=code).exists()
    event = AuditEvent.objects.filter(action=AuditAction.SIGNOFF_REFUSED).last()
    assert event is not None
    assert event.data["code"] == "step_up.stale"


def test_a_provider_that_ignores_prompt_login_gives_no_step_up(
    settings: Any, careless_provider: Provider, sign_flow: SignFlow, artifacts: Any
) -> None:
    """The provider answers the step-up from its old session: the ID token's auth_time is older
    than the step-up request, so the service records no step-up and the signature is refused."""
    configure(settings, careless_provider)
    code = sign_flow.ready(artifacts["apache"])
    client = Client()
    _sso_legal(client, careless_provider, "leon")
    with time_machine.travel(time.time() + 120):
        stepped = sign_in(client, careless_provider, "leon", step_up=True)
        assert stepped.status_code == 302
        refused = _sign(client, sign_flow, code)
    assert refused.status_code == 400
    assert not SignOff.objects.filter(deployment__code=code).exists()


def test_local_passwords_switched_off(sso: Provider, settings: Any, sign_flow: SignFlow, artifacts: Any) -> None:
    settings.LOCAL_LOGIN_ENABLED = False
    settings.AUTHENTICATION_BACKENDS = [
        "governance.sso.backends.SessionOnlyBackend" if b.endswith("RoleModelBackend") else b
        for b in settings.AUTHENTICATION_BACKENDS
    ]
    code = sign_flow.ready(artifacts["apache"])
    legal = sign_flow.p.legal
    client = Client()
    response = client.post("/accounts/login/", {"username": legal.username, "password": f"pw-{legal.username}"})
    assert response.status_code == 200  # the form again: not signed in
    assert signed_in_user(client) is None
    client.force_login(legal, backend="governance.sso.backends.SessionOnlyBackend")
    refused = _sign(client, sign_flow, code, password=f"pw-{legal.username}")
    assert refused.status_code == 403
    assert refused.json()["extra"]["code"] == "password.disabled"


# --- sign-out ends the provider's session ----------------------------------------------------------


def test_logout_ends_the_provider_session(sso: Provider) -> None:
    sso.set_user("nina", ["gov-legal"])
    client = Client()
    sign_in(client, sso, "nina")
    assert signed_in_user(client) is not None
    response = client.post("/accounts/logout/")
    assert response.status_code == 302
    assert response["Location"].startswith(f"{sso.issuer}/logout?")
    assert "id_token_hint=" in response["Location"]
    assert signed_in_user(client) is None
    at_provider = sso.get("nina", response["Location"])
    assert at_provider.status_code == 302
    assert at_provider.headers["Location"].startswith("http://testserver/accounts/login/")
    assert "nina" in sso.status()["logouts"]
    # The provider asks for the password again: its session is gone.
    start = client.get("/oidc/authenticate/")
    assert sso.get("nina", start["Location"]).status_code == 200


def test_sso_pages_are_absent_without_sso(settings: Any) -> None:
    settings.SSO_ENABLED = False
    assert Client().get("/oidc/authenticate/").status_code == 404


def test_the_web_sign_off_form_takes_a_step_up_instead_of_a_password(
    sso: Provider, sign_flow: SignFlow, artifacts: Any
) -> None:
    code = sign_flow.ready(artifacts["apache"])
    client = Client()
    _sso_legal(client, sso, "lotte")
    form = {"role": "legal", "verdict": "approve", "evidence_digest": sign_flow.digest(code), "comment": ""}
    client.post(f"/requests/{code}/review", form)
    assert not SignOff.objects.filter(deployment__code=code).exists()  # no password, no step-up: refused
    sign_in(client, sso, "lotte", step_up=True)
    response = client.post(f"/requests/{code}/review", form)
    assert response.status_code == 302
    assert SignOff.objects.get(deployment__code=code).auth_method == "oidc_step_up"


# --- found by an attacker's pass -------------------------------------------------------------------


def _callback_with_code(client: Client, code: str) -> Any:
    start = client.get("/oidc/authenticate/")
    assert start.status_code == 302
    state = parse_qs(urlparse(start["Location"]).query)["state"][0]
    return client.get("/oidc/callback/", {"state": state, "code": code})


def test_a_callback_with_a_forged_code_is_the_clients_error_not_the_providers(sso: Provider) -> None:
    """The provider's token endpoint answers 400 invalid_grant: a bad request, not a bad gateway."""
    client = Client()
    response = _callback_with_code(client, "forged-code")
    assert response.status_code == 400
    assert b"code" in response.content
    assert b"start again" in response.content
    assert signed_in_user(client) is None


def _code_at_provider(client: Client, provider: Provider, username: str) -> tuple[str, str]:
    """Start a sign-in and sign in at the provider: (state, code) the callback would receive."""
    authorize = client.get("/oidc/authenticate/")["Location"]
    login = provider.browser(username).post(
        f"{provider.issuer}/login",
        data={"query": urlparse(authorize).query, "username": username, "password": f"idp-{username}"},
        verify=str(provider.certificate),
        allow_redirects=False,
        timeout=10,
    )
    query = parse_qs(urlparse(login.headers["Location"]).query)
    return query["state"][0], query["code"][0]


def test_a_callback_with_a_spent_code_is_the_clients_error(sso: Provider) -> None:
    """The code was exchanged already (by whoever intercepted it, with this session's PKCE
    verifier): the provider answers invalid_grant."""
    sso.set_user("sven", ["gov-legal"])
    client = Client()
    state, code = _code_at_provider(client, sso, "sven")
    spent = requests.post(
        f"{sso.issuer}/token",
        data={
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": CALLBACK,
            "client_id": CLIENT_ID,
            "client_secret": CLIENT_SECRET,
            "code_verifier": client.session["oidc_states"][state]["code_verifier"],
        },
        verify=str(sso.certificate),
        timeout=10,
    )
    assert spent.status_code == 200
    response = client.get("/oidc/callback/", {"state": state, "code": code})
    assert response.status_code == 400
    assert b"start again" in response.content
    assert signed_in_user(client) is None


def test_a_code_replayed_into_another_session_is_the_clients_error(sso: Provider) -> None:
    """Another browser's code, sent with this session's state: its PKCE verifier does not match
    (the provider answers 400 invalid_request)."""
    sso.set_user("sina", ["gov-legal"])
    _, code = _code_at_provider(Client(), sso, "sina")
    other = Client()
    state = parse_qs(urlparse(other.get("/oidc/authenticate/")["Location"]).query)["state"][0]
    assert other.get("/oidc/callback/", {"state": state, "code": code}).status_code == 400
    assert signed_in_user(other) is None


def _token_answer(status: int, body: bytes) -> requests.Response:
    answer = requests.Response()
    answer.status_code, answer._content, answer.url = status, body, "https://idp.example.org/token"
    return answer


@pytest.mark.parametrize(
    ("status", "body", "refused_code"),
    [
        (400, b'{"error": "invalid_grant"}', True),
        (400, b'{"error": "invalid_request"}', True),  # pyop: a PKCE verifier of another session
        (401, b'{"error": "invalid_client"}', False),  # the service's own credentials: the provider's side
        (400, b'{"error": "unsupported_grant_type"}', False),
        (400, b"<html>bad request</html>", False),
        (500, b'{"error": "server_error"}', False),
        (503, b"", False),
    ],
)
def test_which_token_endpoint_answers_are_the_clients_code(status: int, body: bytes, refused_code: bool) -> None:
    backend = OidcBackend()
    expected: type[Exception] = AuthorizationCodeRefused if refused_code else requests.HTTPError
    with pytest.raises(expected):
        backend.raise_token_response_error(_token_answer(status, body))


def test_a_provider_that_does_not_answer_is_a_bad_gateway(sso: Provider, settings: Any) -> None:
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    settings.OIDC_OP_TOKEN_ENDPOINT = f"https://127.0.0.1:{port}/token"  # nothing listens there
    response = _callback_with_code(Client(), "any-code")
    assert response.status_code == 502
    assert b"did not answer" in response.content  # as it should, or at all


def test_an_sso_session_is_bounded_so_removal_at_the_provider_takes_effect(sso: Provider, settings: Any) -> None:
    settings.SSO_SESSION_MAX_AGE_S = 3600
    sso.set_user("gina", ["gov-legal"])
    client = Client()
    sign_in(client, sso, "gina")
    assert signed_in_user(client) is not None
    assert client.session.get_expiry_age() <= 3600


def test_a_provider_account_cannot_take_a_ci_service_account_name(sso: Provider) -> None:
    sso.set_user("ci-0123456789ab", [])
    sign_in(Client(), sso, "ci-0123456789ab")
    assert User.objects.filter(username="sso-ci-0123456789ab").exists()  # created, under another name
    assert not User.objects.filter(username__startswith="ci-").exists()


@pytest.mark.parametrize("name", ["CI-0123456789AB", "Ci-0123456789ab", "cI-0123456789ab"])
def test_a_ci_service_account_name_is_refused_in_any_case(sso: Provider, name: str) -> None:
    sso.set_user(name, [])
    sign_in(Client(), sso, name)
    assert User.objects.filter(username=f"sso-{name}").exists()  # created, under another name
    assert not User.objects.filter(username__istartswith="ci-").exists()


def test_a_renamed_account_name_is_not_taken_again_in_another_case(sso: Provider) -> None:
    """`ci-…` signs in as `sso-ci-…`; a provider account `SSO-CI-…` must not become a second
    account whose name differs from it only in case."""
    sso.set_user("ci-0123456789ab", [])
    sign_in(Client(), sso, "ci-0123456789ab")
    sso.set_user("SSO-CI-0123456789ab", [])
    sign_in(Client(), sso, "SSO-CI-0123456789ab")
    assert User.objects.filter(username__startswith="SSO-CI-0123456789ab-").exists()  # made unique
    assert User.objects.filter(username__iexact="sso-ci-0123456789ab").count() == 1


def test_the_login_page_offers_single_sign_on_and_hides_switched_off_passwords(sso: Provider, settings: Any) -> None:
    page = Client().get("/accounts/login/?next=/audit/").content.decode()
    assert 'id="sso-sign-in"' in page
    assert "/oidc/authenticate/?next=/audit/" in page
    assert 'name="password"' in page
    settings.LOCAL_LOGIN_ENABLED = False
    page = Client().get("/accounts/login/").content.decode()
    assert 'id="sso-sign-in"' in page
    assert 'name="password"' not in page
