"""The gate's hot path in two round trips (issue 12's speed): one statement reads the token, the
request, its sign-offs, the latest usage report and the stored packet verification; one statement
writes the decision and its audit event. The folded read must say what approvals' own selector
says, and the token read with it must obey every rule the ordinary token check does."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from governance.approvals.models import ApprovalPacket, PacketVerification
from governance.approvals.selectors import ApprovalState, approval_state, approval_state_from_row
from governance.core.models import ApiToken
from governance.core.tokens import PREFIX_LENGTH, api_token_resolve
from governance.deployments.models import DeploymentRequest
from governance.gate.selectors import gate_deployment_for_token
from tests.gate.conftest import Gate


def _both(gate: Gate) -> tuple[ApprovalState | None, ApprovalState | None]:
    token = api_token_resolve(gate.token)
    assert isinstance(token, ApiToken)
    row = gate_deployment_for_token(token, gate.code, "production")
    return approval_state(DeploymentRequest.objects.get(code=gate.code)), approval_state_from_row(row)


def test_the_folded_read_matches_the_approvals_selector(gate: Gate) -> None:
    selector, folded = _both(gate)
    assert selector is not None
    assert folded == selector  # verified packet: same bytes, digest, validity, time
    PacketVerification.objects.update(legal_valid=False)
    selector, folded = _both(gate)
    assert folded == selector
    assert folded is not None
    assert not folded.legal_valid
    PacketVerification.objects.all().delete()  # a packet never verified counts as none
    assert _both(gate) == (None, None)
    ApprovalPacket.objects.update(voided_at=timezone.now())  # no live packet at all
    assert _both(gate) == (None, None)


@pytest.mark.postgres  # the combined token-and-state read is PostgreSQL's (LATERAL); SQLite reads twice
def test_a_check_is_two_statements(gate: Gate) -> None:
    from tests.gate.conftest import bearer

    gate.check()  # warm: the chain head exists, the token's last use is recorded
    body, client = gate.body(), bearer(gate.token)
    with CaptureQueriesContext(connection) as queries:
        response = client.post("/api/v1/gate/check", body, format="json")
    assert response.status_code == 200
    assert response.json()["decision"] == "allow"
    statements = [q["sql"] for q in queries.captured_queries]
    # the one read (token and state), and the one write (inside the test's transaction: a
    # savepoint around the write so that a refused write leaves the transaction usable)
    writes = [s for s in statements if "INSERT INTO" in s]
    assert len(writes) == 1
    assert "gate_gatedecision" in writes[0]
    assert "audit_auditevent" in writes[0]
    reads = [s for s in statements if s.lstrip().startswith("SELECT")]
    assert len(reads) == 1, reads
    assert "core_apitoken" in reads[0]
    assert "deployments_deploymentrequest" in reads[0]


def _same_prefix(gate: Gate, secret: str, **fields: object) -> str:
    """Another token row with the gate token's prefix (a collision the lookup must survive)."""
    import hashlib

    original = ApiToken.objects.get(prefix=gate.token[:PREFIX_LENGTH])
    clear = gate.token[:PREFIX_LENGTH] + secret
    ApiToken.objects.create(
        user=original.user,
        name="twin",
        prefix=original.prefix,
        digest=hashlib.sha256(clear.encode()).hexdigest(),
        scopes=original.scopes,
        team=original.team,
        expires_at=original.expires_at,
        **fields,
    )
    return clear


def test_the_combined_read_applies_every_token_rule(gate: Gate) -> None:
    assert gate.check().json()["decision"] == "allow"
    twin = _same_prefix(gate, "x" * 30)
    assert gate.check().json()["decision"] == "allow"  # two rows share the prefix: the digest picks
    assert gate.check(token=twin).json()["decision"] == "allow"
    assert gate.check(token=gate.token[:PREFIX_LENGTH] + "y" * 30).status_code == 401  # wrong secret
    ApiToken.objects.filter(name="twin").update(revoked_at=timezone.now())
    assert gate.check(token=twin).status_code == 401
    assert gate.check().json()["decision"] == "allow"  # the other row is untouched
    ApiToken.objects.filter(name="twin").update(revoked_at=None, expires_at=timezone.now())
    assert gate.check(token=twin).status_code == 401
    original = ApiToken.objects.exclude(name="twin").get(prefix=gate.token[:PREFIX_LENGTH])
    User.objects.filter(pk=original.user_id).update(is_active=False)
    assert gate.check().status_code == 401


def test_the_combined_read_checks_scope_and_coverage(unsigned_gate: Gate) -> None:
    gate = unsigned_gate  # refused before any approval is read
    import uuid

    # a request that does not exist: 403, as one of another team (the token learns nothing)
    missing = gate.check(deployment=str(uuid.uuid4()))
    assert missing.status_code == 403
    ApiToken.objects.filter(prefix=gate.token[:PREFIX_LENGTH]).update(environments=["staging"])
    assert gate.check().status_code == 403
    ApiToken.objects.filter(prefix=gate.token[:PREFIX_LENGTH]).update(environments=[], scopes=["usage:write"])
    assert gate.check().status_code == 403  # the scope does not reach the gate


def test_a_body_without_a_readable_request_takes_the_ordinary_path(unsigned_gate: Gate) -> None:
    gate = unsigned_gate  # refused before any approval is read
    from tests.gate.conftest import bearer

    client = bearer(gate.token)
    broken = client.post("/api/v1/gate/check", "{not json", content_type="application/json")
    assert broken.status_code == 400
    assert "JSON" in broken.json()["message"]
    body = gate.body()
    del body["deployment"]
    assert "deployment" in str(client.post("/api/v1/gate/check", body, format="json").json())
    assert client.post("/api/v1/gate/check", gate.body(deployment="nope"), format="json").status_code == 400
    assert (
        bearer("gov_unknown").post("/api/v1/gate/check", "{not json", content_type="application/json").status_code
        == 401
    )
