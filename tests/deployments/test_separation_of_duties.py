"""Separation of duties: each sign-off of a request by a distinct person, the acknowledger of an
obligation never accepts it; and a usage report that changes no finding leaves sign-offs alone."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import Group

from governance.audit.actions import AuditAction
from governance.audit.models import AuditEvent
from governance.core.roles import Role
from governance.deployments.models import DeploymentRequest, SignOff
from tests.approvals.conftest import run_packet_jobs
from tests.conftest import Personas, make_user
from tests.deployments.conftest import FACTS, SERVING, Flow, ensure_passed_eval


def test_one_person_with_both_reviewer_roles_cannot_sign_both(
    flow: Flow, artifacts: dict[str, Any], personas: Personas
) -> None:
    both = make_user("both", Role.LEGAL_REVIEWER, Role.ENGINEERING_REVIEWER)
    flow.ensure_pki()  # the first sign-off is recorded
    code = flow.to_review(artifacts["apache"])
    flow.compute_capacity(code)
    ensure_passed_eval(code)
    flow.meet_obligations(code)
    digest = flow.get(both, code)["evidence_digest"]
    first = flow.post(
        both, code, "review", {"verdict": "approve", "evidence_digest": digest, "role": "legal", "password": "pw-both"}
    )
    assert first.status_code == 202, first.json()
    second = flow.post(
        both,
        code,
        "review",
        {"verdict": "approve", "evidence_digest": digest, "role": "engineering", "password": "pw-both"},
    )
    assert second.status_code == 403
    assert "distinct" in second.json()["message"]
    deployment = DeploymentRequest.objects.get(code=code)
    assert deployment.status == "in_review"
    assert list(SignOff.objects.filter(deployment=deployment).values_list("role", flat=True)) == ["legal"]
    # Another engineer completes it.
    done = flow.post(
        personas.engineer,
        code,
        "review",
        {"verdict": "approve", "evidence_digest": digest, "password": f"pw-{personas.engineer.username}"},
    )
    assert done.status_code == 202
    run_packet_jobs(code)  # the heavy worker renders and signs the packet
    assert flow.get(personas.legal, code)["status"] == "approved"


def test_the_acknowledger_never_accepts_the_same_obligation(
    flow: Flow, artifacts: dict[str, Any], personas: Personas
) -> None:
    dual = make_user("dual", Role.REQUESTER, Role.LEGAL_REVIEWER, team=personas.team)
    code = flow.to_review(artifacts["llama"])
    item = flow.get(dual, code)["obligations"][0]["code"]
    acknowledged = flow.post(dual, code, f"obligations/{item}/acknowledge", {"how_met": "NOTICE file shipped"})
    assert acknowledged.status_code == 200, acknowledged.json()
    accepted = flow.post(dual, code, f"obligations/{item}/review", {"accept": True})
    assert accepted.status_code == 403
    assert "acknowledged" in accepted.json()["message"]
    assert flow.post(personas.legal, code, f"obligations/{item}/review", {"accept": True}).status_code == 200


def test_usage_report_that_changes_no_finding_keeps_the_approval(
    flow: Flow, artifacts: dict[str, Any], personas: Personas
) -> None:
    code = flow.to_review(artifacts["qwen"], {**FACTS, "monthly_active_users": 2_000_000})
    approved = flow.approve(code)
    assert approved["status"] == "approved"
    quiet = flow.post(personas.requester, code, "usage", {"month": "2026-10", "monthly_active_users": 3_000_000})
    assert quiet.status_code == 201, quiet.json()
    body = flow.get(personas.legal, code)
    assert body["status"] == "approved"
    assert body["evidence_digest"] == approved["evidence_digest"]
    assert not AuditEvent.objects.filter(action=AuditAction.SIGNOFF_VOIDED).exists()
    assert DeploymentRequest.objects.get(code=code).facts["monthly_active_users"] == 3_000_000  # still recorded
    crossing = flow.post(personas.requester, code, "usage", {"month": "2026-11", "monthly_active_users": 100_000_001})
    assert crossing.status_code == 201
    assert flow.get(personas.legal, code)["status"] == "in_review"
    assert AuditEvent.objects.filter(action=AuditAction.SIGNOFF_VOIDED).count() == 2


def test_artifacts_stay_within_their_team_unless_shared(
    flow: Flow, artifacts: dict[str, Any], personas: Personas
) -> None:
    # A requester of the other team who is also a reviewer sees every artifact, but may not build on it.
    personas.other_requester.groups.add(*Group.objects.filter(name=Role.LEGAL_REVIEWER))
    personas.other_requester._governance_roles = None  # type: ignore[attr-defined]  # role cache
    foreign = str(artifacts["apache"].code)
    client = flow.client(personas.other_requester)
    assert client.get(f"/api/v1/artifacts/{foreign}").status_code == 200
    body = {
        "artifact": foreign,
        "product_name": "Borrowed",
        "environments": ["production"],
        "facts": FACTS,
        "serving_plan": SERVING,
    }
    refused = client.post("/api/v1/deployments/", body, format="json")
    assert refused.status_code == 400
    assert "artifact" in refused.json()["extra"]["fields"]
    assert not DeploymentRequest.objects.filter(product_name="Borrowed").exists()
    # Only the owning team's requester shares it; then the other team may use it.
    denied = client.post(f"/api/v1/artifacts/{foreign}/share", {"team": personas.other_team.name}, format="json")
    assert denied.status_code == 403
    shared = flow.client(personas.requester).post(
        f"/api/v1/artifacts/{foreign}/share", {"team": personas.other_team.name}, format="json"
    )
    assert shared.status_code == 200, shared.json()
    assert AuditEvent.objects.filter(action=AuditAction.ARTIFACT_SHARED, object_id=foreign).count() == 1
    created = client.post("/api/v1/deployments/", body, format="json")
    assert created.status_code == 201, created.json()
