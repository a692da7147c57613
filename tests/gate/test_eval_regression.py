"""An engine upgrade's fresh eval against the run the last approval relied on, through the
services: the approval names its eval, the evidence carries it (only once a fresh run on another
engine version or layout exists), and the gate denies a regressed upgrade and allows one that held up."""

from __future__ import annotations

from typing import Any

from governance.audit.actions import AuditAction
from governance.audit.models import AuditEvent
from governance.deployments import services as deployment_services
from governance.deployments.models import DeploymentRequest
from governance.deployments.readiness import ReasonCode
from governance.evaluations.models import EvalRun, EvalStatus
from tests.gate.conftest import Gate, record_eval


def categories(code: float, math: float) -> dict[str, Any]:
    return {"code": {"n": 100, "fail_rate": 1 - code}, "math": {"n": 100, "fail_rate": 1 - math}}


def upgrade_eval(gate: Gate, code: float, math: float) -> EvalRun:
    """A passed eval of the approved weights and layout on vLLM 0.12.0."""
    run = record_eval(gate.code, "fp8", EvalStatus.PASSED)
    run.engine_version = "0.12.0"
    assert run.summary is not None
    run.summary = {**run.summary, "categories": categories(code, math)}
    run.save()
    deployment_services.on_eval_finished(evaluation=run)
    return run


def test_the_gate_denies_a_regressed_engine_upgrade_and_allows_one_that_held_up(gate: Gate) -> None:
    deployment = DeploymentRequest.objects.get(code=gate.code)
    [approved] = EvalRun.objects.filter(request=deployment)
    assert approved.summary is not None
    # the summary's categories are not evidence: the approval stands (update: its time is unchanged)
    EvalRun.objects.filter(pk=approved.pk).update(summary={**approved.summary, "categories": categories(0.90, 0.80)})
    event = AuditEvent.objects.filter(action=AuditAction.DEPLOYMENT_TRANSITIONED, data__to="approved").latest("seq")
    assert event.data["approved_eval"] == str(approved.code)
    assert [a.relied_on_eval for a in deployment.approvals.all()] == [approved]  # stored with the approval
    assert "last_approved_eval" not in str(deployment.evidence)  # nothing to compare: the digest is unchanged

    regressed = upgrade_eval(gate, code=0.80, math=0.80)
    deployment.refresh_from_db()
    assert deployment.evidence is not None
    [item] = [i for i in deployment.evidence["eval_results"] if i["eval"] == str(regressed.code)]
    assert item["last_approved_eval"]["eval"] == str(approved.code)
    assert item["accuracy"] == {"code": 0.8, "math": 0.8}
    assert gate.flow.approve(gate.code)["status"] == "approved"  # approvable on the approved version
    response = gate.check(serving={"engine_version": "0.12.0"})
    [reason] = response.json()["reasons"]
    assert reason["code"] == ReasonCode.SERVING_ENGINE_VERSION
    assert "regressed in code" in reason["message"]
    assert "0.800" in reason["message"]
    assert "0.900" in reason["message"]
    assert gate.codes(serving={"engine_version": "0.11.0"}) == []

    # a rerun on 0.12.0 that held up supersedes the regressed one: once approved again, 0.12.0 is allowed
    upgrade_eval(gate, code=0.88, math=0.79)
    evidence = DeploymentRequest.objects.get(code=gate.code).evidence
    assert evidence is not None
    assert str(regressed.code) not in [r["eval"] for r in evidence["eval_results"]]
    assert gate.flow.approve(gate.code)["status"] == "approved"
    assert gate.codes(serving={"engine_version": "0.12.0"}) == []
    # the version approved before stays a roll-back target (its eval finished before, so is not
    # compared), and rebuilding the evidence after the approval changes nothing
    assert gate.codes(serving={"engine_version": "0.11.0"}) == []
    deployment = DeploymentRequest.objects.get(code=gate.code)
    assert not deployment_services.deployment_evidence_refresh(deployment, "system:test", "no change")
