"""The transactional outbox (issue 18): a broker that refuses the task after the change committed
costs the request nothing (the change is saved, the answer is the usual 2xx) and the task is sent
when the broker is back; the worker's acknowledgement ends the re-sends."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any
from unittest import mock

import pytest
from django.utils import timezone
from kombu.exceptions import OperationalError

from governance.core.models import OutboxMessage
from governance.core.outbox import HEADER, on_task_postrun, outbox_due, outbox_enqueue, outbox_flush
from governance.evaluations.models import Cluster, ExecutorKind, JobRun
from tests.deployments.conftest import Flow
from tests.evaluations.conftest import locate


def _broker_down() -> Any:
    from governance.celery import app

    return mock.patch.object(app, "send_task", side_effect=OperationalError("Error 111 connecting to redis"))


def _sent() -> Any:
    from governance.celery import app

    return mock.patch.object(app, "send_task")


def test_an_eval_request_during_a_broker_outage_is_saved_and_sent_later(
    flow: Flow, artifacts, personas, tmp_path: Path, django_capture_on_commit_callbacks
) -> None:
    Cluster.objects.create(name="c2", executor=ExecutorKind.LOCAL, remote_root=str(tmp_path), model_roots=["/models"])
    code = flow.to_review(artifacts["apache"])
    locate(code, "c2", "/models/x")
    client = flow.client(personas.engineer)
    body = {"cluster": "c2", "kind": "screening", "scheme": "w8a8"}
    # Before the outbox, the submission task was sent by an after-commit `.delay()`: the broker's
    # error escaped after the commit and the API answered 500 for a saved eval run.
    with _broker_down(), django_capture_on_commit_callbacks(execute=True):
        response = client.post(f"/api/v1/deployments/{code}/evals", body, format="json")
    assert response.status_code == 202, response.content
    run = JobRun.objects.get()
    message = OutboxMessage.objects.get(task="jobs.submit")
    assert message.args == [run.pk]
    assert (message.sent_at, message.attempts, message.last_error[:5]) == (None, 1, "send:")

    # Beat leaves it alone during the after-commit grace, then sends it once the broker answers.
    assert outbox_due() == []
    OutboxMessage.objects.filter(pk=message.pk).update(created_at=timezone.now() - timedelta(minutes=1))
    with _sent() as send_task:
        assert outbox_flush() == {"due": 1, "sent": 1}
    send_task.assert_called_once_with("jobs.submit", args=[run.pk], kwargs={}, headers={HEADER: message.pk})
    message.refresh_from_db()
    assert message.sent_at is not None
    assert (message.acked_at, message.attempts) == (None, 2)


@pytest.mark.django_db
def test_rows_exist_only_with_the_change_that_wanted_them(django_capture_on_commit_callbacks: Any) -> None:
    from django.db import transaction

    def change_that_rolls_back() -> None:
        with transaction.atomic():
            outbox_enqueue("jobs.submit", 1)
            raise RuntimeError("the change rolls back")

    with _sent() as send_task, django_capture_on_commit_callbacks(execute=True), pytest.raises(RuntimeError):
        change_that_rolls_back()
    assert not OutboxMessage.objects.exists()
    send_task.assert_not_called()


@pytest.mark.django_db
def test_acknowledged_rows_are_never_sent_again_unacknowledged_ones_are_after_the_lease(
    settings: Any, django_capture_on_commit_callbacks: Any
) -> None:
    with _sent(), django_capture_on_commit_callbacks(execute=True):
        done = outbox_enqueue("jobs.submit", 1)
        lost = outbox_enqueue("jobs.submit", 2)
        failed = outbox_enqueue("jobs.submit", 3)
    task = SimpleNamespace(request=SimpleNamespace(**{HEADER: done.pk}, headers=None))
    on_task_postrun(task=task, state="SUCCESS", retval=None)
    task = SimpleNamespace(request=SimpleNamespace(headers={HEADER: failed.pk}))
    on_task_postrun(task=task, state="FAILURE", retval=ValueError("boom"))
    on_task_postrun(task=SimpleNamespace(request=SimpleNamespace(headers=None)), state="SUCCESS")  # not from the outbox

    assert outbox_due() == []  # every row sent within the lease
    later = timezone.now() + timedelta(seconds=settings.OUTBOX_LEASE_S + 1)
    assert outbox_due(now=later) == [lost.pk, failed.pk]
    assert outbox_due(on_start=True) == [lost.pk, failed.pk]  # a starting worker does not wait the lease out
    assert OutboxMessage.objects.get(pk=failed.pk).last_error == "task: ValueError"
    settings.OUTBOX_MAX_ATTEMPTS = 1  # a row that keeps failing stops being sent (and stays visible)
    assert outbox_due(now=later) == []


@pytest.mark.django_db
def test_a_new_license_version_queues_the_reevaluation_through_the_outbox(
    django_capture_on_commit_callbacks: Any,
) -> None:
    from governance.deployments.services.evidence import on_license_version_published

    with _broker_down():
        on_license_version_published(license_key="apache-2.0")  # before: the broker error escaped
    message = OutboxMessage.objects.get()
    assert (message.task, message.args, message.sent_at) == ("deployments.reevaluate_license", ["apache-2.0"], None)
