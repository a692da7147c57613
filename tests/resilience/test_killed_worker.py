"""A worker SIGKILLed during each task type and started again by its supervisor: each piece of work
completes exactly once (issue 18; before: a capacity plan whose worker died stayed pending for good,
its `computed_at` set before computing made the redelivery return early).

The worker is stopped at a chosen point by tests.resilience.hooks (loaded into the worker only):
capacity plans after the worker claimed the plan, the other tasks as they start."""

from __future__ import annotations

from pathlib import Path

import pytest

from governance.audit.actions import AuditAction
from governance.audit.models import AuditEvent
from governance.core.models import OutboxMessage
from governance.core.outbox import outbox_enqueue
from governance.deployments.models import DeploymentRequest
from tests.resilience.conftest import Stack, wait_until
from tests.resilience.flows import (
    job_of,
    local_cluster,
    plans_of,
    request_eval,
    to_review,
    wait_eval_finished,
    wait_outbox_acked,
    wait_plans_done,
)
from tests.resilience.helpers import seed

pytestmark = [pytest.mark.fault, pytest.mark.postgres]


def _kill_when_held(stack: Stack, task: str) -> None:
    wait_until(lambda: stack.holding(task), 90, f"the worker to hold {task}")
    stack.kill_worker()
    # The task comes back only once its lease lapses (OUTBOX_LEASE_S 20 s, CAPACITY_PLAN_LEASE_S 15 s
    # in the stack) and beat sends it again to the restarted worker: 30 s was too short for that on
    # a loaded CI machine (failed once at 30 s); this is a bound on waiting, not a timing claim.
    wait_until(lambda: stack.worker_pid() is not None and stack.holding(task), 120, "the supervisor's restart")
    (stack.dir / "hold" / f"{task}.held").unlink()


@pytest.mark.django_db(transaction=True)
def test_capacity_plan_killed_after_its_claim_is_computed_once(stack: Stack) -> None:
    data = seed(1)
    stack.hold("capacity.compute_plan")
    code = to_review(stack, data, "plan killed mid-compute")
    _kill_when_held(stack, "capacity.compute_plan")
    assert [plan.status for plan in plans_of(code)] == ["pending"]
    wait_plans_done([code], 120)  # the claim lapses (CAPACITY_PLAN_LEASE_S) and beat sends it again
    assert AuditEvent.objects.filter(action=AuditAction.CAPACITY_PLAN_COMPUTED, object_id=code).count() == 1


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("task", ["jobs.submit", "jobs.poll"])
def test_eval_job_task_killed_runs_the_job_once(stack: Stack, tiny_model: Path, tmp_path: Path, task: str) -> None:
    data = seed(1)
    local_cluster(tmp_path, tiny_model)
    code = to_review(stack, data, f"{task} killed")
    stack.hold(task)
    evaluation = request_eval(stack, data, code, tiny_model)
    _kill_when_held(stack, task)
    finished = wait_eval_finished(evaluation, 300)
    job = job_of(evaluation)
    assert job.state == "succeeded", job.reason
    assert job.attempt == 1  # submitted once: the redelivered submission found it claimed or done
    job_dirs = [path for path in (tmp_path / "jobs").iterdir() if path.is_dir()]
    assert len(job_dirs) == 1, job_dirs
    assert finished.status in {"passed", "failed"}
    wait_outbox_acked(60)


@pytest.mark.django_db(transaction=True)
def test_license_reevaluation_killed_is_done_once(stack: Stack) -> None:
    data = seed(1)
    code = to_review(stack, data, "re-evaluated")
    wait_plans_done([code], 60)  # and the plan's own evidence refresh, which would put the digest right
    # Stored evidence that no longer matches the license: the re-evaluation has one change to record.
    DeploymentRequest.objects.filter(code=code).update(evidence_digest="0" * 64)
    before = AuditEvent.objects.filter(action=AuditAction.DEPLOYMENT_REEVALUATED, object_id=code).count()
    stack.hold("deployments.reevaluate_license")
    outbox_enqueue("deployments.reevaluate_license", "apache-2.0")  # as a new license version does
    _kill_when_held(stack, "deployments.reevaluate_license")
    wait_outbox_acked(90)  # sent again by the restarted worker and acknowledged
    after = AuditEvent.objects.filter(action=AuditAction.DEPLOYMENT_REEVALUATED, object_id=code).count()
    assert after - before == 1
    assert OutboxMessage.objects.get(task="deployments.reevaluate_license").acked_at is not None
