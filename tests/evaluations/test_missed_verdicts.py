"""An eval run whose job ended but whose verdict was never written (the verdict follows the job's
commit, on_job_finished; a worker killed between the two loses it) is finished by beat's jobs.resume:
before, it stayed `running` for good, readiness said eval.pending and the request page polled on."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone

from governance.evaluations.evals import evals_reconcile
from governance.evaluations.models import Cluster, EvalRun, EvalStatus, JobRun, JobRunState
from governance.evaluations.tasks import jobs_resume_task


def _run(cluster: Cluster, state: str, finished_ago: timedelta | None) -> EvalRun:
    job = JobRun.objects.create(
        cluster=cluster,
        kind="eval",
        command=["true"],
        time_limit_s=60,
        state=state,
        reason="exit code 1 (the engine died)",
        finished_at=None if finished_ago is None else timezone.now() - finished_ago,
    )
    return EvalRun.objects.create(cluster=cluster, scheme="w4a16", status=EvalStatus.RUNNING, job=job)


def test_a_missed_verdict_is_written_once_the_job_has_been_over_for_a_while(db: None) -> None:
    cluster = Cluster.objects.create(name="local", executor="local", remote_root="/tmp/evals")
    missed = _run(cluster, JobRunState.FAILED, timedelta(minutes=5))
    just_ended = _run(cluster, JobRunState.FAILED, timedelta(seconds=5))  # its verdict is on its way
    running = _run(cluster, JobRunState.RUNNING, None)
    assert missed.in_flight  # what the page polls on, until the verdict is written

    assert evals_reconcile() == [missed.pk]
    missed.refresh_from_db()
    assert missed.status == EvalStatus.ERROR
    assert "the engine died" in (missed.summary or {})["error"]
    assert not missed.in_flight
    assert EvalRun.objects.get(pk=just_ended.pk).status == EvalStatus.RUNNING
    assert EvalRun.objects.get(pk=running.pk).status == EvalStatus.RUNNING
    assert evals_reconcile() == []  # written once


def test_beats_resume_task_writes_missed_verdicts(db: None) -> None:
    cluster = Cluster.objects.create(name="local", executor="local", remote_root="/tmp/evals")
    missed = _run(cluster, JobRunState.FAILED, timedelta(minutes=5))
    assert jobs_resume_task()["verdicts"] == [missed.pk]
    assert EvalRun.objects.get(pk=missed.pk).status == EvalStatus.ERROR
