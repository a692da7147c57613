"""Redis stopped in the middle of a flow and started again (issue 18): every change made during the
outage is saved and answered 2xx (before: submit, capacity plans and evals answered 500 after their
change was saved), the worker survives or its supervisor starts it again (before: kombu's
"Unrecoverable error: AttributeError(\"'NoneType' object has no attribute 'hostname'\")" ended the
worker and, under `make run`, the web server with it), and every plan and eval queued during the
outage completes once the broker is back."""

from __future__ import annotations

import time
import urllib.request
from pathlib import Path

import pytest

from governance.audit.actions import AuditAction
from governance.audit.models import AuditEvent
from governance.core.models import OutboxMessage
from tests.resilience.conftest import Stack, wait_until
from tests.resilience.flows import (
    create,
    job_of,
    local_cluster,
    request_eval,
    to_review,
    wait_eval_finished,
    wait_outbox_acked,
    wait_plans_done,
)
from tests.resilience.helpers import seed

pytestmark = [pytest.mark.fault, pytest.mark.postgres]


def _healthz(stack: Stack) -> int:
    try:
        with urllib.request.urlopen(stack.base_url + "/healthz", timeout=10) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return exc.code


@pytest.mark.django_db(transaction=True)
def test_a_broker_outage_delays_work_and_loses_none(stack: Stack, tiny_model: Path, tmp_path: Path) -> None:
    data = seed(1)
    local_cluster(tmp_path, tiny_model)
    before = to_review(stack, data, "before the outage")
    # The worker holds an ETA message (a job poll) when the broker goes: the case that crashed it.
    running = request_eval(stack, data, before, tiny_model)
    wait_until(lambda: job_of(running).state in {"pending", "running", "succeeded"}, 60, "the first eval's job")

    stack.redis_stop()
    started = time.monotonic()
    assert _healthz(stack) == 503
    during = to_review(stack, data, "during the outage")  # create, submit (plan), start review: all 2xx
    draft = create(stack, data, "draft during the outage")
    edited = stack.call("PATCH", f"/api/v1/deployments/{draft}", data.tokens[0], {"product_name": "edited"})
    assert edited.status == 200, edited.body
    queued = request_eval(stack, data, during, tiny_model)
    assert OutboxMessage.objects.filter(task="jobs.submit", sent_at__isnull=True).count() == 1
    time.sleep(max(0.0, 12 - (time.monotonic() - started)))  # an outage long enough for the worker to notice
    stack.redis_start()

    wait_until(lambda: _healthz(stack) == 200, 60, "/healthz after the broker returned")
    wait_plans_done([before, during], 120)
    for code in (running, queued):
        evaluation = wait_eval_finished(code, 300)
        assert evaluation.job is not None
        assert evaluation.job.state == "succeeded", evaluation.job.reason
        assert evaluation.job.attempt == 1
    wait_outbox_acked(60)
    for code in (before, during):  # each plan computed exactly once
        assert AuditEvent.objects.filter(action=AuditAction.CAPACITY_PLAN_COMPUTED, object_id=code).count() == 1
    log = stack.log("worker")
    restarts = log.count("supervise: ")
    print(
        f"\nfault/outage: worker restarts by the supervisor: {restarts}; "
        f"unrecoverable errors: {log.count('Unrecoverable error')}"
    )
    assert stack.processes["web"].poll() is None  # the web server never went down with the worker
    assert stack.worker_pid() is not None
