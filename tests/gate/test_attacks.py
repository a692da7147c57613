"""Attacks on the gate's hot path (issue 12): the prepared token look-up, the combined token and
state read that peeks at the body's `deployment`, the shared input fields, and the session user the
UI loads with its roles. Each attack goes through both token paths where it can: a small JSON body
takes the combined read (gate.selectors.gate_token_and_state), one padded past what the peek reads
the ordinary one (core.tokens.api_token_resolve)."""

from __future__ import annotations

import base64
import hashlib
import json
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from typing import Any

import jsonschema
import pytest
from django.contrib.auth.models import Group, User
from django.test import Client
from django.utils import timezone
from drf_spectacular.generators import SchemaGenerator

from governance.audit.actions import AuditAction
from governance.audit.models import AuditEvent
from governance.core.models import ApiToken
from governance.core.roles import Role
from governance.core.tokens import PREFIX_LENGTH, TokenScope, api_token_issue
from governance.deployments.models import DeploymentRequest
from governance.gate.api import _PEEK_LIMIT, GateCheckInputSerializer, GateCheckOutputSerializer
from governance.gate.models import GateDecision
from governance.gate.services import ci_token_issue
from tests.conftest import Personas, make_user
from tests.gate.conftest import Gate, bearer

CHECK = "/api/v1/gate/check"


def _post(token: str, body: dict[str, Any], *, ordinary: bool = False) -> Any:
    """A check; `ordinary`: padded past what the peek reads, so the token takes the ordinary path."""
    text = json.dumps(body) + (" " * (_PEEK_LIMIT + 1) if ordinary else "")
    return bearer(token).generic("POST", CHECK, text, content_type="application/json")


BOTH_PATHS = pytest.mark.parametrize("ordinary", [False, True], ids=["combined", "ordinary"])


def _twin(of: ApiToken, secret: str, **fields: Any) -> str:
    """A token row with `of`'s prefix (a prefix collision) and its own secret; `fields` override."""
    clear = of.prefix + secret
    values: dict[str, Any] = {
        "user": of.user,
        "name": "twin",
        "scopes": of.scopes,
        "team": of.team,
        "expires_at": of.expires_at,
        **fields,
    }
    ApiToken.objects.create(prefix=of.prefix, digest=hashlib.sha256(clear.encode()).hexdigest(), **values)
    return clear


def _token_row(gate: Gate) -> ApiToken:
    return ApiToken.objects.get(prefix=gate.token[:PREFIX_LENGTH], name="deploy")


# --- the token text ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "credentials",
    [
        "gov_\x00abc",  # a NUL inside the prefix the look-up sends
        "gov_abc\x00" + "x" * 30,
        "gov_' OR '1'='1",
        "gov_%(code)s%(prefix)s",
        "gov_%s%s%s%s",
        "gov_\\x00\\u0000",
        "gov_" + "\xe9" * 20,
        "gov_" + "x" * 200,
    ],
)
@BOTH_PATHS
def test_hostile_token_text_answers_401_never_500(unsigned_gate: Gate, credentials: str, ordinary: bool) -> None:
    gate = unsigned_gate
    assert _post(gate.token, gate.body(), ordinary=ordinary).status_code == 200  # with a good token, a check
    decided = GateDecision.objects.count()
    response = _post(credentials, gate.body(), ordinary=ordinary)
    assert response.status_code == 401, response.content
    # and on an endpoint without a token hook of its own
    assert bearer(credentials).get("/api/v1/gate/decisions").status_code == 401
    assert GateDecision.objects.count() == decided


@BOTH_PATHS
def test_a_prefix_twin_of_another_team_and_user_is_its_own_token(gate: Gate, ordinary: bool) -> None:
    p = gate.p
    own = _token_row(gate)
    twin = _twin(own, "t" * 40, user=make_user("ci-other"), team=p.other_team, name="other-team-twin")
    assert _post(twin, gate.body(), ordinary=ordinary).status_code == 403  # the twin's team is not the request's
    allowed = _post(gate.token, gate.body(), ordinary=ordinary)
    assert allowed.status_code == 200
    assert allowed.json()["decision"] == "allow"
    # a twin without the secret, or with the gate token's secret under another prefix, is nobody
    assert _post(own.prefix + "t" * 39, gate.body(), ordinary=ordinary).status_code == 401
    assert _post("gov_zzzzzzzz" + gate.token[PREFIX_LENGTH:], gate.body(), ordinary=ordinary).status_code == 401
    # a dead twin does not shadow the live token, nor the live token a dead twin
    ApiToken.objects.filter(name="other-team-twin").update(revoked_at=timezone.now())
    assert _post(gate.token, gate.body(), ordinary=ordinary).status_code == 200
    assert _post(twin, gate.body(), ordinary=ordinary).status_code == 401
    [decision] = GateDecision.objects.filter(code__in=[allowed.json()["decision_id"]])
    assert decision.token_id == own.pk


@BOTH_PATHS
def test_dead_and_misscoped_tokens_are_refused_on_both_paths(unsigned_gate: Gate, ordinary: bool) -> None:
    gate = unsigned_gate  # whatever the decision
    own = _token_row(gate)
    p = gate.p
    live = timezone.now() + timedelta(days=1)
    revoked = _twin(own, "r" * 40, name="revoked", revoked_at=timezone.now())
    expired = _twin(own, "e" * 40, name="expired", expires_at=timezone.now() - timedelta(seconds=1))
    inactive_user = make_user("ci-gone")
    inactive_user.is_active = False
    inactive_user.save(update_fields=["is_active"])
    inactive = _twin(own, "i" * 40, name="inactive", user=inactive_user)
    scopeless = api_token_issue(user=p.admin, name="personal", expires_at=live).clear_text
    usage_only = api_token_issue(
        user=make_user("ci-usage"), name="usage", scopes=[TokenScope.USAGE_WRITE], team=p.team, expires_at=live
    ).clear_text
    for token in (revoked, expired, inactive):
        assert _post(token, gate.body(), ordinary=ordinary).status_code == 401, token
    for token in (scopeless, usage_only):
        assert _post(token, gate.body(), ordinary=ordinary).status_code == 403, token
    assert not GateDecision.objects.exists()
    assert not AuditEvent.objects.filter(action=AuditAction.GATE_DECISION).exists()


@BOTH_PATHS
def test_another_teams_request_answers_as_a_missing_one(unsigned_gate: Gate, ordinary: bool) -> None:
    gate = unsigned_gate  # whatever the decision
    p = gate.p
    p.other_team.leads.add(p.other_requester)
    _, theirs = ci_token_issue(
        actor=p.other_requester, team=p.other_team, name="theirs", expires_at=timezone.now() + timedelta(days=1)
    )
    missing = str(uuid.uuid4())

    def answer(code: str) -> tuple[int, str, list[tuple[str, str]]]:
        response = _post(theirs, gate.body(deployment=code), ordinary=ordinary)
        headers = sorted((k, v) for k, v in response.items() if k.lower() not in {"x-request-id", "content-length"})
        return response.status_code, json.dumps(response.json()).replace(code, "CODE"), headers

    assert answer(gate.code) == answer(missing)
    assert answer(gate.code)[0] == 403
    # not even the environment a token is limited to tells them apart
    ApiToken.objects.filter(name="theirs").update(environments=["staging"])
    assert answer(gate.code) == answer(missing)
    assert not GateDecision.objects.exists()


# --- the body the combined read peeks at ---------------------------------------------------------


def _second_request(gate: Gate) -> str:
    """Another request of the gate token's team, not approved (the gate denies it)."""
    artifact = DeploymentRequest.objects.get(code=gate.code).artifact
    return str(gate.flow.create(artifact)["code"])


def _smuggled(gate: Gate, peeked: str, validated: str) -> bytes:
    """A body whose bytes read as JSON name `peeked`, and read as UTF-7 (the charset the request
    declares, which the API's parser honours) also name `validated`, later, so it wins."""
    body = json.dumps(gate.body(deployment=peeked))
    hidden = "+" + base64.b64encode(('","deployment":"' + validated).encode("utf-16-be")).decode().rstrip("=") + "-"
    smuggled = body.replace('"environment": "production"', '"environment": "production' + hidden + '"')
    assert json.loads(smuggled)["deployment"] == peeked
    assert json.loads(smuggled.encode().decode("utf-7"))["deployment"] == validated
    return smuggled.encode()


def _check_raw(token: str, body: bytes | str, content_type: str = "application/json") -> Any:
    # Django's client sends bytes as they are (its stub says str only)
    return bearer(token).generic("POST", CHECK, body, content_type=content_type)  # type: ignore[arg-type]


def test_the_state_peeked_for_one_request_never_decides_another(gate: Gate) -> None:
    draft = _second_request(gate)
    # the peek reads the approved request; the validated body names the draft: the draft decides
    response = _check_raw(gate.token, _smuggled(gate, gate.code, draft), "application/json; charset=utf-7")
    assert response.status_code == 200, response.json()
    assert response.json()["decision"] == "deny"
    assert GateDecision.objects.get(code=response.json()["decision_id"]).deployment.code == uuid.UUID(draft)
    # and the other way round: the approved request is read again and allowed
    response = _check_raw(gate.token, _smuggled(gate, draft, gate.code), "application/json; charset=utf-7")
    assert response.json()["decision"] == "allow"
    assert str(GateDecision.objects.get(code=response.json()["decision_id"]).deployment.code) == gate.code
    # a request of another team smuggled behind one the token covers is still refused
    DeploymentRequest.objects.filter(code=draft).update(team=gate.p.other_team)
    response = _check_raw(gate.token, _smuggled(gate, gate.code, draft), "application/json; charset=utf-7")
    assert response.status_code == 403
    assert GateDecision.objects.count() == 2


def test_duplicate_keys_take_the_last_on_both_readers(gate: Gate) -> None:
    draft = _second_request(gate)
    rest = json.dumps({key: value for key, value in gate.body().items() if key != "deployment"})[1:]
    for first, last, decision in ((draft, gate.code, "allow"), (gate.code, draft, "deny")):
        twice = f'{{"deployment": "{first}", "deployment": "{last}", {rest}'
        response = _check_raw(gate.token, twice)
        assert response.json()["decision"] == decision, twice
        assert str(GateDecision.objects.get(code=response.json()["decision_id"]).deployment.code) == last


@pytest.mark.parametrize(
    "spelling",
    [
        str.upper,
        lambda code: "{" + code + "}",
        lambda code: "urn:uuid:" + code,
        lambda code: code.replace("-", ""),
    ],
    ids=["upper", "braces", "urn", "hex"],
)
def test_other_spellings_of_a_code_name_the_same_request(gate: Gate, spelling: Callable[[str], str]) -> None:
    response = gate.check(deployment=spelling(gate.code))
    assert response.json()["decision"] == "allow"
    assert str(GateDecision.objects.get(code=response.json()["decision_id"]).deployment.code) == gate.code
    escaped = json.dumps(gate.body()).replace(gate.code, "".join(f"\\u{ord(ch):04x}" for ch in gate.code))
    assert _check_raw(gate.token, escaped).json()["decision"] == "allow"


def test_hostile_bodies_answer_4xx_never_500(gate: Gate) -> None:
    body = json.dumps(gate.body())
    hostile: list[tuple[bytes | str, str]] = [
        ("[" * 100_000 + "]" * 100_000, "application/json"),
        ('{"deployment": "' + gate.code + '", "x": ' + "1" * 5000 + "}", "application/json"),
        (body.replace("{", '{"deployment": NaN, ', 1), "application/json"),
        (body.replace(gate.code, gate.code + "\\u0000"), "application/json"),
        (body.replace(gate.code, "\\ud800"), "application/json"),
        (body.replace(f'"{gate.code}"', "12345"), "application/json"),
        (body.replace(f'"{gate.code}"', "null"), "application/json"),
        (body.replace(f'"{gate.code}"', '["' + gate.code + '"]'), "application/json"),
        (body.replace(f'"{gate.code}"', '{"deployment": "' + gate.code + '"}'), "application/json"),
        ("\ufeff" + body, "application/json"),
        (body.encode("utf-16"), "application/json; charset=utf-8"),
        (body.encode("utf-7"), "application/json; charset=utf-7"),
        (body.replace('"serving": {', '"serving": "x", "ignored": {'), "application/json"),
        ('"' + gate.code + '"', "application/json"),
        ("[]", "application/json"),
        ("", "application/json"),
        (body, "application/json-patch+json"),
        (body, "application/jsonx"),
        (body, "text/plain"),
        (body + " " * 20_000, "application/json"),
        ("deployment=" + gate.code + "&deployment=" + str(uuid.uuid4()), "application/x-www-form-urlencoded"),
        ("deployment=%00", "application/x-www-form-urlencoded"),
    ]
    for content, content_type in hostile:
        response = _check_raw(gate.token, content, content_type)
        assert response.status_code in {200, 400, 403, 413, 415}, (content[:80], content_type, response.content)
        if response.status_code == 200:  # the padded body: still a decision on the request it names
            assert response.json()["decision"] == "allow"


# --- what a check leaves behind ------------------------------------------------------------------


@BOTH_PATHS
def test_last_use_is_recorded_on_both_paths(unsigned_gate: Gate, ordinary: bool) -> None:
    gate = unsigned_gate  # whatever the decision
    long_ago = timezone.now() - timedelta(days=3)
    ApiToken.objects.filter(name="deploy").update(last_used_at=long_ago)
    assert _post(gate.token, gate.body(), ordinary=ordinary).status_code == 200
    first = _token_row(gate).last_used_at
    assert first is not None
    assert first > long_ago
    ApiToken.objects.filter(name="deploy").update(last_used_at=None)
    assert _post(gate.token, gate.body(), ordinary=ordinary).status_code == 200
    assert _token_row(gate).last_used_at is not None


def _output_schema() -> dict[str, Any]:
    schema = SchemaGenerator().get_schema(request=None, public=True)
    component = schema["paths"][CHECK]["post"]["responses"]["200"]["content"]["application/json"]["schema"]
    return {**component, "components": schema["components"]}


@BOTH_PATHS
def test_every_answer_is_logged_first_and_has_the_schemas_shape(gate: Gate, ordinary: bool) -> None:
    schema = _output_schema()
    answers = [
        _post(gate.token, gate.body(), ordinary=ordinary),
        _post(gate.token, gate.body(artifact_digest="sha256:" + "0" * 64), ordinary=ordinary),
        _post(gate.token, gate.body(environment="staging"), ordinary=ordinary),
    ]
    for response in answers:
        assert response.status_code == 200
        body = response.json()
        jsonschema.validate(body, schema)
        assert set(body) == set(GateCheckOutputSerializer().fields)
        assert GateCheckOutputSerializer(body).data == body  # what the output serializer would answer
        logged = GateDecision.objects.get(code=body["decision_id"])
        assert (logged.decision, [r["code"] for r in logged.reasons]) == (
            body["decision"],
            [r["code"] for r in body["reasons"]],
        )
        event = AuditEvent.objects.get(action=AuditAction.GATE_DECISION, data__decision_id=body["decision_id"])
        assert event.data["decision"] == body["decision"]
        assert event.data["reasons"] == [r["code"] for r in body["reasons"]]
        assert event.object_id == gate.code
    assert {r.json()["decision"] for r in answers} == {"allow", "deny"}


# --- the shared input fields -----------------------------------------------------------------------


def _input(index: int, valid: bool) -> dict[str, Any]:
    return {
        "deployment": str(uuid.UUID(int=index)),
        "environment": f"env-{index}" if valid else f"Env {index}!",
        "artifact_digest": "sha256:" + f"{index:064x}",
        "serving": {
            "engine": "vllm",
            "precision": "fp8",
            "gpu": "h200",
            "tp": 1 + index % 8,
            "max_model_len": 1000 + index if valid else -index,
        },
    }


def _validate(index: int) -> tuple[int, Any]:
    serializer = GateCheckInputSerializer(data=_input(index, valid=index % 3 != 0))
    if serializer.is_valid():
        return index, dict(serializer.validated_data)
    return index, serializer.errors


def _expected(index: int, result: Any) -> None:
    if index % 3 == 0:
        assert set(result) == {"environment", "serving"}, result
        assert set(result["serving"]) == {"max_model_len"}, result
        return
    assert result["deployment"] == uuid.UUID(int=index)
    assert result["environment"] == f"env-{index}"
    assert result["serving"]["max_model_len"] == 1000 + index
    assert result["serving"]["tp"] == 1 + index % 8


def test_shared_fields_keep_each_validation_its_own_interleaved_and_in_threads() -> None:
    bad, good = GateCheckInputSerializer(data=_input(3, valid=False)), GateCheckInputSerializer(data=_input(4, True))
    assert bad.is_valid() is False
    assert good.is_valid() is True
    assert bad.is_valid() is False  # validated again after the other: its own errors, not the other's
    _expected(3, bad.errors)
    _expected(4, good.validated_data)
    with ThreadPoolExecutor(max_workers=8) as pool:
        for index, result in pool.map(_validate, range(600)):
            _expected(index, result)


# --- the session user --------------------------------------------------------------------------------


@pytest.fixture(params=["db", "cached_db"])
def session_engine(request: pytest.FixtureRequest, settings: Any) -> str:
    settings.SESSION_ENGINE = f"django.contrib.sessions.backends.{request.param}"
    settings.CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": "rt"}}
    return str(request.param)


def _signed_in(user: User) -> Client:
    client = Client()
    client.force_login(user)
    assert client.get("/requests/").status_code == 200
    return client


@pytest.mark.django_db
def test_a_session_ends_with_the_account(personas: Personas, session_engine: str) -> None:
    client = _signed_in(personas.requester)
    personas.requester.is_active = False
    personas.requester.save(update_fields=["is_active"])
    assert client.get("/requests/").status_code == 302  # back to sign-in
    assert client.get("/api/v1/gate/decisions").status_code in {401, 403}


@pytest.mark.django_db
def test_a_session_ends_with_a_password_change_and_roles_follow_the_groups(
    personas: Personas, session_engine: str
) -> None:
    client = _signed_in(personas.requester)
    personas.requester.groups.remove(Group.objects.get(name=Role.REQUESTER))
    assert client.get("/requests/").status_code == 403  # the role is read afresh on each request
    personas.requester.set_password("a-new-password-1")
    personas.requester.save(update_fields=["password"])
    assert client.get("/requests/").status_code == 302
