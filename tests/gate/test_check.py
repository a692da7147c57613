"""POST /api/v1/gate/check through the API and services: a request signed through the API is allowed
with the contract's answer; it is denied once its evidence changes, or its packet's bytes lose their
verification. Tokens out of scope answer 401/403 and bad input 400, on a request not yet approved
(the gate checks the token and the body before it reads any approval). The deny reason of each
condition is tests/gate/test_conditions.py's, over built states (no PKI, no signing)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import time_machine
from django.utils import timezone
from rest_framework.test import APIClient

from governance.audit.actions import AuditAction
from governance.audit.models import AuditEvent
from governance.core.tokens import TokenScope, api_token_issue
from governance.deployments.models import DeploymentRequest
from governance.evaluations.models import EvalStatus
from governance.gate.choices import ReasonCode
from governance.gate.models import GateDecision
from governance.gate.services import ci_token_issue, ci_token_revoke
from tests.conftest import make_user
from tests.gate.conftest import Gate, bearer, record_eval


def test_an_approved_request_is_allowed_and_the_answer_is_the_contract(gate: Gate, settings: Any) -> None:
    response = gate.check()
    assert response.status_code == 200, response.json()
    body = response.json()
    assert set(body) == {"decision", "decision_id", "reasons", "evidence_digest", "approval"}
    assert body["decision"] == "allow", body["reasons"]
    assert body["reasons"] == []
    assert set(body["approval"]) == {"pdf_url", "sha256"}
    deployment = DeploymentRequest.objects.get(code=gate.code)
    assert body["evidence_digest"] == deployment.evidence_digest
    logged = GateDecision.objects.get(code=body["decision_id"])
    assert (logged.decision, logged.environment, logged.token_name) == ("allow", "production", "deploy")
    event = AuditEvent.objects.get(action=AuditAction.GATE_DECISION, object_id=gate.code)
    assert event.data["decision_id"] == body["decision_id"]
    assert event.data["decision"] == "allow"
    # Issue 43, a contract change: the approved eval served (and recorded) engine 0.11.0, so a check
    # that leaves out serving.engine_version is denied, and logged as such;
    # GATE_REQUIRE_ENGINE_VERSION=false restores the optional field (test_conditions: the reason).
    body = gate.check(serving={"engine_version": None}).json()
    assert [r["code"] for r in body["reasons"]] == ["serving.engine_version_missing"], body
    assert GateDecision.objects.get(code=body["decision_id"]).decision == "deny"
    settings.GATE_REQUIRE_ENGINE_VERSION = False
    assert gate.codes(serving={"engine_version": None}) == []


def test_evidence_changes_after_approval_are_denied(gate: Gate, tmp_path) -> None:
    # a failed eval run for the served precision arrives after approval
    record_eval(gate.code, "fp8", EvalStatus.FAILED, tmp_path)
    codes = gate.codes()
    assert ReasonCode.EVAL_FAILED in codes
    assert ReasonCode.NOT_APPROVED in codes
    assert ReasonCode.SIGNATURE_STALE in codes


def test_tokens_out_of_scope_answer_403_and_bad_tokens_401(unsigned_gate: Gate) -> None:
    gate = unsigned_gate
    p = gate.p
    p.other_team.leads.add(p.other_requester)
    _, other_team = ci_token_issue(
        actor=p.other_requester, team=p.other_team, name="theirs", expires_at=timezone.now() + timedelta(days=1)
    )
    assert gate.check(token=other_team).status_code == 403
    _, staging_only = ci_token_issue(
        actor=p.requester,
        team=p.team,
        name="staging",
        environments=["staging"],
        expires_at=timezone.now() + timedelta(days=1),
    )
    assert gate.check(token=staging_only).status_code == 403
    other_code = gate.flow.create(DeploymentRequest.objects.get(code=gate.code).artifact)["code"]
    _, one_request = ci_token_issue(
        actor=p.requester,
        team=p.team,
        name="one",
        deployment_codes=[other_code],
        expires_at=timezone.now() + timedelta(days=1),
    )
    assert gate.check(token=one_request).status_code == 403
    usage_only = api_token_issue(
        user=make_user("bot"), name="usage", scopes=[TokenScope.USAGE_WRITE], team=p.team
    ).clear_text
    assert gate.check(token=usage_only).status_code == 403
    personal = api_token_issue(user=p.admin, name="admin's own").clear_text  # unscoped: not a gate token
    assert gate.check(token=personal).status_code == 403
    unknown = bearer("gov_" + "x" * 43).post("/api/v1/gate/check", gate.body(), format="json")
    assert unknown.status_code == 401
    assert gate.flow.client(None).post("/api/v1/gate/check", gate.body(), format="json").status_code == 401
    session = APIClient()
    session.force_login(p.admin)
    assert session.post("/api/v1/gate/check", gate.body(), format="json").status_code == 401  # bearer only
    assert GateDecision.objects.count() == 0  # nothing out of scope became a decision


def test_expired_and_revoked_tokens_answer_401(unsigned_gate: Gate) -> None:
    gate = unsigned_gate
    token = gate.p.team.api_tokens.get(name="deploy")
    assert token.expires_at is not None
    with time_machine.travel(token.expires_at + timedelta(seconds=1)):
        assert gate.check().status_code == 401
    ci_token_revoke(actor=gate.p.requester, token=token)
    assert gate.check().status_code == 401


def test_bad_input_answers_400_naming_the_field(unsigned_gate: Gate) -> None:
    gate = unsigned_gate
    for changes, field in (
        ({"deployment": "not-a-uuid"}, "deployment"),
        ({"environment": "Prod!"}, "environment"),
        ({"artifact_digest": "md5:abc"}, "artifact_digest"),
        ({"serving": {"precision": "int3"}}, "serving.precision"),
        ({"serving": {"tp": 0}}, "serving.tp"),
        ({"serving": {"gpu_memory_utilization": 2}}, "serving.gpu_memory_utilization"),
        ({"surprise": 1}, "surprise"),
    ):
        response = gate.check(**changes)
        assert response.status_code == 400, (changes, response.json())
        assert field in response.json()["extra"]["fields"], response.json()
    missing = bearer(gate.token).post("/api/v1/gate/check", {"environment": "production"}, format="json")
    assert missing.status_code == 400
    assert {"deployment", "artifact_digest", "serving"} <= set(missing.json()["extra"]["fields"])


def test_signatures_come_from_the_verified_packet_and_a_tampered_one_is_denied(gate: Gate) -> None:
    """The gate reads the stored verification of the completed PDF packet: without one, the sign-off
    rows are not signatures. Replacing the packet's
    bytes in the database (a forged PDF) leaves no verification for them: signature.invalid. Once
    the forged bytes are verified, the stored result says the signatures fail: still denied."""
    import hashlib

    from governance.approvals.choices import PacketStatus
    from governance.approvals.models import ApprovalPacket, PacketVerification
    from governance.approvals.services import packet_verify

    allowed = gate.check().json()
    assert allowed["decision"] == "allow"
    # A database writer who inserts approving sign-off rows (and a packet) cannot make the gate
    # allow: the stored verification of the completed packet's exact bytes makes them count.
    PacketVerification.objects.all().delete()
    unverified = gate.check().json()
    assert unverified["decision"] == "deny"
    assert {r["code"] for r in unverified["reasons"]} == {ReasonCode.SIGNATURE_INVALID}
    assert unverified["approval"] == {"pdf_url": None, "sha256": None}

    packet = ApprovalPacket.objects.get(deployment__code=gate.code, status=PacketStatus.COMPLETE, voided_at=None)
    assert allowed["approval"]["sha256"] == packet.pdf_sha256
    assert allowed["approval"]["pdf_url"]

    forged = bytearray(bytes(packet.pdf))
    # A byte inside the first page's content, covered by both signatures' byte ranges.
    offset = forged.index(b"stream") + 40
    forged[offset] ^= 0x01
    packet.pdf = bytes(forged)
    packet.pdf_sha256 = hashlib.sha256(forged).hexdigest()
    packet.save(update_fields=["pdf", "pdf_sha256"])

    body = gate.check().json()
    assert body["decision"] == "deny"
    invalid = [r for r in body["reasons"] if r["code"] == ReasonCode.SIGNATURE_INVALID]
    assert {r["message"].split()[1] for r in invalid} == {"legal", "engineering"}

    _report, verification = packet_verify(data=bytes(forged), actor=gate.p.auditor)
    assert not verification.legal_valid
    assert not verification.engineering_valid
    again = gate.check().json()
    assert again["decision"] == "deny"
    assert ReasonCode.SIGNATURE_INVALID in {r["code"] for r in again["reasons"]}
