"""The reviewer's "to review" queue: a request waits for a role until a live (not voided) decision
of that role is recorded; a decision of another role, or a voided one, does not take it out."""

from __future__ import annotations

from typing import Any

from django.utils import timezone

from governance.core.roles import ROLES_CACHE
from governance.deployments.choices import ReviewRole
from governance.deployments.models import DeploymentRequest, SignOff
from governance.web.selectors import dashboard
from tests.conftest import Personas
from tests.deployments.conftest import Flow


def _queue(user: Any) -> set[str]:
    user.__dict__.pop(ROLES_CACHE, None)
    board = dashboard(user)
    assert board.to_review is not None
    return {str(row["code"]) for row in board.to_review}


def _decide(request: DeploymentRequest, role: str, reviewer: Any, voided: bool) -> None:
    SignOff.objects.create(
        deployment=request,
        role=role,
        decision="approve",
        signer=reviewer,
        signed_at=timezone.now(),
        evidence_digest=request.evidence_digest,
        voided_at=timezone.now() if voided else None,
    )


def test_a_request_leaves_the_queue_only_with_a_live_decision_of_the_role(
    personas: Personas, flow: Flow, artifacts: Any
) -> None:
    code = flow.to_review(artifacts["kimi"])
    request = DeploymentRequest.objects.get(code=code)
    assert code in _queue(personas.legal)
    # a voided legal decision and a live engineering one: legal's decision is still owed
    _decide(request, ReviewRole.LEGAL, personas.legal, voided=True)
    _decide(request, ReviewRole.ENGINEERING, personas.engineer, voided=False)
    assert code in _queue(personas.legal)
    assert code not in _queue(personas.engineer)
    _decide(request, ReviewRole.LEGAL, personas.legal, voided=False)
    assert code not in _queue(personas.legal)


def test_the_dashboard_lists_a_failed_eval_run_with_its_request(
    personas: Personas, flow: Flow, artifacts: Any, tmp_path: Any
) -> None:
    from django.urls import reverse

    from governance.evaluations.models import Cluster, EvalRun, EvalStatus, ExecutorKind
    from tests.web.test_pages import browser

    code = flow.to_review(artifacts["kimi"])
    request = DeploymentRequest.objects.get(code=code)
    cluster = Cluster.objects.create(name="lab", executor=ExecutorKind.LOCAL, remote_root=str(tmp_path / "runs"))
    EvalRun.objects.create(
        request=request, cluster=cluster, scheme="w4a8", status=EvalStatus.FAILED, eval_set_sha256="e" * 64
    )
    html = browser(personas.requester).get("/").content.decode()
    section = html[html.index('id="evals-h"') :]
    link = f'<a href="{reverse("web:deployment", args=[code])}#evals">{request.product_name}</a>: w4a8 — '
    assert link in section
    assert browser(personas.outsider).get("/").status_code == 403  # no role, no dashboard
