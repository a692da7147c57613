"""The gate's hot path in few round trips (issue 12's speed): one statement reads the request, its
sign-offs, the latest usage report and the stored packet verification; one statement writes the
decision and its audit event. The folded read must say what approvals' own selector says."""

from __future__ import annotations

from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from governance.approvals.models import ApprovalPacket, PacketVerification
from governance.approvals.selectors import approval_state, approval_state_from_row
from governance.core.models import ApiToken
from governance.core.tokens import api_token_resolve
from governance.deployments.models import DeploymentRequest
from governance.gate.selectors import gate_deployment_for_token
from tests.gate.conftest import Gate


def _both(gate: Gate) -> tuple[object, object]:
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


def test_a_check_is_three_statements_after_authentication(gate: Gate) -> None:
    from tests.gate.conftest import bearer

    gate.check()  # warm: the chain head exists, the token's last use is recorded
    body, client = gate.body(), bearer(gate.token)
    with CaptureQueriesContext(connection) as queries:
        response = client.post("/api/v1/gate/check", body, format="json")
    assert response.status_code == 200
    assert response.json()["decision"] == "allow"
    statements = [q["sql"] for q in queries.captured_queries]
    # token lookup, the one read, and the one write (inside the test's transaction: a savepoint
    # around the write so that a refused write leaves the transaction usable)
    writes = [s for s in statements if "INSERT INTO" in s]
    assert len(writes) == 1
    assert "gate_gatedecision" in writes[0]
    assert "audit_auditevent" in writes[0]
    reads = [s for s in statements if s.lstrip().startswith("SELECT")]
    assert len(reads) == 2, reads
