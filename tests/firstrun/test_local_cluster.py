"""The embedded default runs an eval end to end: bootstrap's `local` cluster runs jobs with this
project's interpreter (a bare `python3` could not import planner), the tiny test model completes
the default eval set on CPU with progress in the log, and a cancelled run ends `cancelled`
(not `lost`), stops counting, and is superseded by the next run."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command

from governance.audit.models import AuditEvent
from governance.deployments.models import DeploymentRequest
from governance.evaluations.evals import eval_run_request
from governance.evaluations.local import CHECKOUT, local_cluster_ensure
from governance.evaluations.models import Cluster, ExecutorKind, JobRun
from governance.evaluations.services import jobrun_cancel, jobrun_poll, jobrun_submit
from tests.evaluations.conftest import drive, locate

# A smoke run: 0 failures of 5 per category bound the rate at 0.45 <= 0.5; short answers keep it quick.
SMOKE = {"max_cases_per_category": 5, "threshold": 0.5, "max_new_tokens": 8}


def _local_cluster(tiny_model: Path) -> Cluster:
    """Bootstrap's `local` cluster, also allowed to read the session's tiny checkpoint (bootstrap's own
    model root is var/models, which each test gets fresh)."""
    cluster, _ = local_cluster_ensure()
    cluster.model_roots = [*cluster.model_roots, str(tiny_model.parent)]
    cluster.save(update_fields=["model_roots"])
    return cluster


@pytest.fixture
def fast_polling(settings: Any, tmp_path: Path) -> None:
    settings.JOB_POLL_INITIAL_S = 0.5
    settings.JOB_POLL_MAX_S = 1.0
    settings.VAR_DIR = tmp_path / "var"


def test_bootstrap_makes_the_local_cluster_with_this_interpreter(db: None, fast_polling: None, settings: Any) -> None:
    settings.DEBUG = True
    call_command("local_cluster")
    cluster = Cluster.objects.get(name="local")
    assert cluster.executor == ExecutorKind.LOCAL
    assert cluster.python == sys.executable  # not a bare python3 from PATH
    assert cluster.setup_lines == f"export PYTHONPATH={CHECKOUT} OMP_NUM_THREADS=1"
    assert cluster.remote_root == str(settings.VAR_DIR.resolve() / "jobs")
    events = AuditEvent.objects.filter(object_type="evaluations.cluster").count()
    local_cluster_ensure()  # every start: unchanged, so nothing is written
    assert AuditEvent.objects.filter(object_type="evaluations.cluster").count() == events == 1
    Cluster.objects.filter(pk=cluster.pk).update(python="/usr/bin/python3")  # a venv rebuilt elsewhere
    local_cluster_ensure()
    cluster.refresh_from_db()
    assert cluster.python == sys.executable
    assert AuditEvent.objects.filter(object_type="evaluations.cluster").count() == 2


@pytest.mark.slow
def test_eval_of_the_tiny_model_completes_on_the_local_default(
    flow, artifacts, personas, fast_polling, tiny_model, django_capture_on_commit_callbacks
) -> None:
    _local_cluster(tiny_model)
    code = flow.to_review(artifacts["apache"])
    locate(code, "local", str(tiny_model))
    response = flow.post(
        personas.engineer, code, "evals", {"cluster": "local", "kind": "screening", "scheme": "w8a8", **SMOKE}
    )
    assert response.status_code == 202, response.json()
    run = JobRun.objects.get(code=response.json()["job"]["code"])
    assert run.command[0] == sys.executable
    with django_capture_on_commit_callbacks(execute=True):
        run = drive(run, timeout_s=300)
    assert run.state == "succeeded", run.reason + run.log_tail
    assert "progress 20/20" in run.log_tail
    evaluation = flow.client(personas.engineer).get(f"/api/v1/evals/{response.json()['code']}").json()
    assert evaluation["status"] == "passed", evaluation["summary"]
    assert evaluation["summary"]["overall"]["n"] == 20
    # A passed screening run is a what-if: it never satisfies readiness (the served eval does).
    body = flow.get(personas.engineer, code)
    assert [b["code"] for b in body["blockers"] if b["code"].startswith("eval.")] == ["eval.missing"]


def _wait_running(run: JobRun, timeout_s: float = 120) -> JobRun:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        run.refresh_from_db()
        if run.state == "queued":
            jobrun_submit(run_id=run.pk)
        elif run.state in ("pending", "running"):
            jobrun_poll(run_id=run.pk, force=True)
            run.refresh_from_db()
            if "progress" in run.log_tail:
                return run
        time.sleep(0.5)
    raise AssertionError(f"never showed progress: {run.state} {run.log_tail}")


def test_cancelled_eval_ends_cancelled_and_is_superseded(
    flow, artifacts, personas, fast_polling, tiny_model, django_capture_on_commit_callbacks, settings
) -> None:
    settings.JOB_LOST_GRACE_S = 0  # the old code called a killed job `lost` as soon as it vanished
    cluster = _local_cluster(tiny_model)
    code = flow.to_review(artifacts["apache"])
    request = DeploymentRequest.objects.get(code=code)
    with django_capture_on_commit_callbacks(execute=True):
        evaluation = eval_run_request(
            cluster=cluster, scheme="w4a8", model={"path": str(tiny_model)}, actor=personas.engineer, deployment=request
        )  # the whole set: many minutes
    # A run has no verdict until it ends (and a screening run never counts): still no eval.
    assert "eval.missing" in [b["code"] for b in flow.get(personas.engineer, code)["blockers"]]
    assert evaluation.job is not None
    run = _wait_running(evaluation.job)
    response = flow.client(personas.engineer).post(f"/api/v1/jobs/{run.code}/cancel")
    assert response.status_code == 200, response.json()
    with django_capture_on_commit_callbacks(execute=True):
        run = drive(run, timeout_s=60)
    assert run.state == "cancelled", (run.state, run.reason)
    evaluation.refresh_from_db()
    assert evaluation.status == "cancelled"
    body = flow.get(personas.engineer, code)
    assert [b["code"] for b in body["blockers"] if b["code"].startswith("eval.")] == ["eval.missing"]
    assert flow.client(personas.engineer).post(f"/api/v1/jobs/{run.code}/cancel").status_code == 409
    # A new run supersedes it: pending now, then its verdict.
    locate(code, "local", str(tiny_model))
    again = flow.post(
        personas.engineer, code, "evals", {"cluster": "local", "kind": "screening", "scheme": "w4a8", **SMOKE}
    )
    assert again.status_code == 202
    assert "eval.missing" in [b["code"] for b in flow.get(personas.engineer, code)["blockers"]]
    with django_capture_on_commit_callbacks(execute=True):
        drive(JobRun.objects.get(code=again.json()["job"]["code"]), timeout_s=300)
    request.refresh_from_db()
    assert request.evidence is not None
    assert [e["status"] for e in request.evidence["eval_results"]] in (["passed"], ["failed"])


def test_cancel_before_submission_never_starts_the_job(db, personas, fast_polling, tmp_path) -> None:
    cluster, _ = local_cluster_ensure()
    missing = str(Path(cluster.model_roots[0]) / "nonexistent")  # inside the model root, never written
    run = eval_run_request(cluster=cluster, scheme="w8a8", model={"path": missing}, actor=personas.engineer).job
    assert run is not None
    jobrun_cancel(run=run, actor=personas.engineer)
    jobrun_submit(run_id=run.pk)  # a late delivery of the submit task
    run.refresh_from_db()
    assert run.state == "cancelled"
    assert run.job_id == ""
