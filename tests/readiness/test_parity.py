"""The readiness rule reads the same state through both loaders: the ORM one the sign-off service,
the page and the API use (deployments.selectors) and the gate's single hand-written statement
(gate.selectors), on the same data; so does the packet's stored verification (approvals.selectors).
The gate keeps its statement because bench/gate.py --variants shows it wins over the ORM selectors
by more than issue 27's 20% (throughput and p50); this test is the condition of keeping it."""

from __future__ import annotations

from typing import Any

import pytest

from governance.approvals.models import ApprovalPacket, PacketVerification
from governance.approvals.selectors import approval_state, approval_state_from_row
from governance.core.models import ApiToken
from governance.core.tokens import PREFIX_LENGTH
from governance.deployments.models import DeploymentRequest, SignOff
from governance.deployments.selectors import deployment_readiness_state
from governance.gate.selectors import gate_deployment_for_token, gate_state
from tests.gate.conftest import Gate, gate  # noqa: F401

pytestmark = pytest.mark.django_db


def _both(gate: Gate) -> tuple[Any, Any]:  # noqa: F811
    token = ApiToken.objects.get(prefix=gate.token[:PREFIX_LENGTH])
    deployment = DeploymentRequest.objects.get(code=gate.code)
    orm = deployment_readiness_state(deployment)
    read = gate_deployment_for_token(token, gate.code, "production")
    state, approval = gate_state(read)
    verified = approval_state(deployment)
    assert approval_state_from_row(read) == verified
    assert approval == {
        "pdf_url": verified.pdf_url if verified else None,
        "sha256": verified.pdf_sha256 if verified else None,
    }
    return orm, state.readiness


def test_both_loaders_read_the_same_state_approved_then_voided_then_flagged_then_packet_changes(gate: Gate) -> None:  # noqa: F811
    orm, sql = _both(gate)
    assert orm == sql
    assert set(orm.signatures) == {"legal", "engineering"}
    SignOff.objects.filter(deployment__code=gate.code, role="legal").update(voided_at="2026-12-01T00:00:00Z")
    DeploymentRequest.objects.filter(code=gate.code).update(flagged=True, flag_reason="usage 2026-11 crossed")
    orm, sql = _both(gate)
    assert orm == sql
    assert orm.signatures["legal"].voided
    assert orm.flagged
    PacketVerification.objects.update(engineering_valid=False)
    orm, sql = _both(gate)
    assert orm == sql
    ApprovalPacket.objects.update(voided_at="2026-12-01T00:00:00Z")  # no live packet: no approval
    orm, sql = _both(gate)
    assert orm == sql
