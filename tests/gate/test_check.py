"""POST /api/v1/gate/check: approved answers allow; flipping each condition in turn answers deny
with its reason code (or 401/403 for tokens). Everything goes through the API and services."""

from __future__ import annotations

from datetime import timedelta

import time_machine
from django.utils import timezone
from rest_framework.test import APIClient

from governance.audit.actions import AuditAction
from governance.audit.models import AuditEvent
from governance.core.tokens import TokenScope, api_token_issue
from governance.deployments.models import DeploymentRequest, SignOff
from governance.evaluations.models import EvalStatus
from governance.gate.choices import ReasonCode
from governance.gate.models import GateDecision
from governance.gate.services import ci_token_issue, ci_token_revoke
from tests.conftest import make_user
from tests.deployments.conftest import FACTS
from tests.gate.conftest import Gate, approved_request, bearer, compute_capacity, record_eval


def test_an_approved_request_is_allowed_and_the_answer_is_the_contract(gate: Gate) -> None:
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


def test_each_deny_reason_has_a_code_message_and_a_fix_naming_who_acts(gate: Gate) -> None:
    body = gate.check(artifact_digest="sha256:" + "0" * 64).json()
    assert body["decision"] == "deny"
    # other weights than approved (and evaluated): the reason names both digests
    [reason] = body["reasons"]
    assert reason["code"] == ReasonCode.ARTIFACT_DIGEST_MISMATCH
    assert "0000" in reason["message"]
    assert gate.body()["artifact_digest"] in reason["message"]
    assert "requester" in reason["fix"] or "pipeline" in reason["fix"]


def test_serving_config_outside_the_approved_envelope_is_denied(gate: Gate) -> None:
    assert gate.codes(artifact_digest="sha256:" + "a" * 64) == [ReasonCode.ARTIFACT_DIGEST_MISMATCH]
    assert gate.codes(serving={"max_model_len": 65536}) == [ReasonCode.SERVING_MAX_MODEL_LEN]
    assert gate.codes(serving={"max_model_len": 8192}) == []  # below the approved length is inside
    assert gate.codes(serving={"precision": "bf16"}) == [ReasonCode.SERVING_PRECISION]
    # the approved precision's eval is what counts: another precision is a serving mismatch
    assert gate.codes(serving={"precision": "w4a8"}) == [ReasonCode.SERVING_PRECISION]
    assert gate.codes(serving={"engine": "sglang"}) == [ReasonCode.SERVING_ENGINE]
    assert gate.codes(serving={"gpu": "h100-80g"}) == [ReasonCode.SERVING_GPU]
    # a GPU outside the catalog (a request's gpu_spec key) is compared like any other, not refused as input
    assert gate.codes(serving={"gpu": "lab-x2"}) == [ReasonCode.SERVING_GPU]
    assert gate.codes(serving={"gpu_memory_utilization": 0.95}) == [ReasonCode.SERVING_MEMORY_UTILIZATION]
    tp = gate.body()["serving"]["tp"]
    assert gate.codes(serving={"tp": tp * 2}) == [ReasonCode.SERVING_PARALLELISM]
    assert gate.codes(serving={"kv_dtype": "fp8"}) == [ReasonCode.SERVING_KV_DTYPE]
    assert gate.codes(environment="staging") == [ReasonCode.ENVIRONMENT_NOT_APPROVED]


def test_a_check_without_the_engine_version_the_approval_is_bound_to_is_denied(gate: Gate, settings) -> None:
    """Issue 43, a contract change: the approved eval served (and recorded) engine 0.11.0, so a
    check that leaves out serving.engine_version is denied (it was allowed, and an engine upgrade
    went through unevaluated); GATE_REQUIRE_ENGINE_VERSION=false restores the optional field."""
    body = gate.check(serving={"engine_version": None}).json()
    assert body["decision"] == "deny", body
    [reason] = body["reasons"]
    assert reason["code"] == "serving.engine_version_missing"
    assert "0.11.0" in reason["message"]
    assert "serving.engine_version" in reason["fix"]
    assert GateDecision.objects.get(code=body["decision_id"]).decision == "deny"
    assert gate.codes() == []  # sending the evaluated version allows
    settings.GATE_REQUIRE_ENGINE_VERSION = False
    assert gate.codes(serving={"engine_version": None}) == []


def test_expired_approval_is_denied(gate: Gate) -> None:
    later = timezone.now() + timedelta(days=181)
    with time_machine.travel(later, tick=False):
        # the token must outlive the approval for the approval to be what fails
        gate.p.team.leads.add(gate.p.requester)
        _, token = ci_token_issue(
            actor=gate.p.requester, team=gate.p.team, name="late", expires_at=later + timedelta(days=1)
        )
        response = gate.check(token=token)
        assert response.status_code == 200
        assert [r["code"] for r in response.json()["reasons"]] == [ReasonCode.EXPIRED]


def test_revoked_approval_is_denied(gate: Gate) -> None:
    assert gate.flow.post(gate.p.legal, gate.code, "revoke", {"reason": "licensor withdrew"}).status_code == 200
    assert gate.codes() == [ReasonCode.REVOKED]


def test_one_stale_signature_is_denied(gate: Gate) -> None:
    # A stored sign-off that covers other evidence than the current digest (e.g. a row altered
    # in the database): the gate compares digests, it never trusts the status alone.
    SignOff.objects.filter(deployment__code=gate.code, role="legal").update(evidence_digest="f" * 64)
    assert gate.codes() == [ReasonCode.SIGNATURE_STALE]


def test_evidence_changes_after_approval_are_denied(gate: Gate, tmp_path) -> None:
    # a failed eval run for the served precision arrives after approval
    record_eval(gate.code, "fp8", EvalStatus.FAILED, tmp_path)
    codes = gate.codes()
    assert ReasonCode.EVAL_FAILED in codes
    assert ReasonCode.NOT_APPROVED in codes
    assert ReasonCode.SIGNATURE_STALE in codes


def test_a_plan_that_no_longer_fits_is_denied(gate: Gate) -> None:
    # one GPU, fixed, for a context that needs many: the recomputed plan cannot fit
    serving = {
        **DeploymentRequest.objects.get(code=gate.code).serving_plan,
        "max_model_len": 4_000_000,
        "tp": 1,
        "pp": 1,
        "ep": 1,
        "dp": 1,
    }
    response = gate.flow.client(gate.p.requester).patch(
        f"/api/v1/deployments/{gate.code}", {"serving_plan": serving}, format="json"
    )
    assert response.status_code == 200, response.json()
    compute_capacity(gate.flow, gate.code)
    codes = gate.codes(serving={"max_model_len": 4_000_000, "tp": 1, "pp": 1, "ep": 1})
    assert ReasonCode.CAPACITY_DOES_NOT_FIT in codes
    assert ReasonCode.NOT_APPROVED in codes


def test_usage_over_a_threshold_and_unaccepted_obligations_are_denied(flow, artifacts, personas, tmp_path) -> None:
    code = approved_request(flow, artifacts["qwen"], tmp_path)
    personas.team.leads.add(personas.requester)
    _, token = ci_token_issue(
        actor=personas.requester, team=personas.team, name="deploy", expires_at=timezone.now() + timedelta(days=30)
    )
    gate = Gate(flow, personas, code, token)
    assert gate.codes() == []
    billing = api_token_issue(
        user=make_user("billing-bot"), name="billing", scopes=[TokenScope.USAGE_WRITE], team=personas.team
    ).clear_text
    report = bearer(billing).post(
        f"/api/v1/deployments/{code}/usage", {"month": "2026-11", "monthly_active_users": 100_000_001}, format="json"
    )
    assert report.status_code == 201, report.json()
    codes = gate.codes()
    assert ReasonCode.USAGE_THRESHOLD_CROSSED in codes
    assert ReasonCode.LICENSE_APPROVAL_REQUIRED in codes
    # A new derivative name brings a naming obligation nobody has acknowledged yet.
    facts = {**FACTS, "derivative": {"kind": "fine_tune", "distribution": "public", "name": "Qwen-Acme"}}
    response = flow.client(personas.requester).patch(f"/api/v1/deployments/{code}", {"facts": facts}, format="json")
    assert response.status_code == 200, response.json()
    assert ReasonCode.OBLIGATION_NOT_ACCEPTED in gate.codes()


def test_tokens_out_of_scope_answer_403_and_bad_tokens_401(gate: Gate) -> None:
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


def test_expired_and_revoked_tokens_answer_401(gate: Gate) -> None:
    token = gate.p.team.api_tokens.get(name="deploy")
    assert token.expires_at is not None
    with time_machine.travel(token.expires_at + timedelta(seconds=1)):
        assert gate.check().status_code == 401
    ci_token_revoke(actor=gate.p.requester, token=token)
    assert gate.check().status_code == 401


def test_bad_input_answers_400_naming_the_field(gate: Gate) -> None:
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
    """The gate reads the stored verification of the completed PDF packet. Replacing the packet's
    bytes in the database (a forged PDF) leaves no verification for them: signature.invalid. Once
    the forged bytes are verified, the stored result says the signatures fail: still denied."""
    import hashlib

    from governance.approvals.choices import PacketStatus
    from governance.approvals.models import ApprovalPacket
    from governance.approvals.services import packet_verify

    allowed = gate.check().json()
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


def test_sign_off_rows_without_a_verified_packet_are_not_signatures(gate: Gate) -> None:
    """A database writer who inserts approving sign-off rows (and a packet) cannot make the gate
    allow: the stored verification of the completed packet's exact bytes is what makes them count."""
    from governance.approvals.models import PacketVerification

    assert gate.check().json()["decision"] == "allow"
    PacketVerification.objects.all().delete()
    body = gate.check().json()
    assert body["decision"] == "deny"
    assert {r["code"] for r in body["reasons"]} == {ReasonCode.SIGNATURE_INVALID}
    assert body["approval"] == {"pdf_url": None, "sha256": None}
