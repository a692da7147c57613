"""Reads of what hangs off a deployment request (capacity plans, eval runs, job runs) are scoped
like the request itself: another team's requester gets 404, the owning team and reviewers get 200."""

from __future__ import annotations

from django.contrib.auth.models import User

from governance.deployments.models import DeploymentRequest
from governance.deployments.selectors import latest_capacity_plan
from governance.evaluations.models import Cluster, EvalRun, ExecutorKind, JobKind, JobRun
from tests.conftest import Personas, make_user
from tests.deployments.conftest import Flow


def _statuses(personas: Personas, url: str) -> dict[str, int]:
    teammate = User.objects.filter(username="teammate").first() or make_user(
        "teammate", "requester", team=personas.team
    )
    users = {
        "requester": personas.requester,
        "teammate": teammate,
        "other_requester": personas.other_requester,
        "engineer": personas.engineer,
        "auditor": personas.auditor,
    }
    return {name: personas.client(user).get(url).status_code for name, user in users.items()}


def test_capacity_plan_of_a_request_is_not_found_for_another_team(flow: Flow, personas: Personas, artifacts) -> None:
    code = flow.to_review(artifacts["apache"])
    stored = latest_capacity_plan(DeploymentRequest.objects.get(code=code))
    assert stored is not None
    assert _statuses(personas, f"/api/v1/capacity/plans/{stored.code}") == {
        "requester": 200,
        "teammate": 200,
        "other_requester": 404,
        "engineer": 200,
        "auditor": 200,
    }


def test_eval_and_job_runs_of_a_request_are_not_found_for_another_team(
    flow: Flow, personas: Personas, artifacts, tmp_path
) -> None:
    code = flow.to_review(artifacts["apache"])
    cluster = Cluster.objects.create(name="local", executor=ExecutorKind.LOCAL, remote_root=str(tmp_path))
    job = JobRun.objects.create(cluster=cluster, kind=JobKind.EVAL, command=["true"], time_limit_s=60)
    evaluation = EvalRun.objects.create(
        request=DeploymentRequest.objects.get(code=code), cluster=cluster, scheme="w4a8", job=job
    )
    expected = {"requester": 200, "teammate": 200, "other_requester": 404, "engineer": 200, "auditor": 200}
    assert _statuses(personas, f"/api/v1/evals/{evaluation.code}") == expected
    assert _statuses(personas, f"/api/v1/jobs/{job.code}") == expected


def test_a_discovery_job_is_not_found_for_a_requester(personas: Personas, tmp_path) -> None:
    cluster = Cluster.objects.create(name="local", executor=ExecutorKind.LOCAL, remote_root=str(tmp_path))
    job = JobRun.objects.create(cluster=cluster, kind=JobKind.DISCOVERY, command=["true"], time_limit_s=60)
    assert personas.client(personas.requester).get(f"/api/v1/jobs/{job.code}").status_code == 404
    assert personas.client(personas.engineer).get(f"/api/v1/jobs/{job.code}").status_code == 200
