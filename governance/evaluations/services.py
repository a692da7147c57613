"""Job runs on clusters: create, submit (idempotent), poll (self-rescheduling, backoff), fetch, cancel.

Rules from the cluster reference: the Slurm job id is stored before the submitting task
finishes; a broken SSH answer is reconciled by job name before any resubmission; TIMEOUT is
retried once with twice the time; PREEMPTED/NODE_FAIL after a grace period; attempts capped.
"""

from __future__ import annotations

import contextlib
import logging
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.db import models, transaction
from django.utils import timezone

from governance.audit.actions import AuditAction
from governance.audit.services import audit_record
from governance.core.errors import ApplicationError, ConflictError
from governance.core.outbox import outbox_enqueue
from governance.core.services import write_service
from governance.evaluations.models import ACTIVE_STATES, Cluster, ExecutorKind, JobKind, JobRun, JobRunState
from governance.evaluations.signals import job_finished
from planner.cluster.base import ClusterError, Executor, JobRef, JobSpec, JobState
from planner.cluster.local import LocalExecutor

logger = logging.getLogger(__name__)
SYSTEM = "system:jobs"
LEASE = timedelta(seconds=120)  # a poll in progress owns the run this long


def executor_for(cluster: Cluster) -> Executor:
    if cluster.executor == ExecutorKind.LOCAL:
        return LocalExecutor(cluster.remote_root)
    # Imported here: paramiko costs ~0.2 s at start, and only workers talking to Slurm need it.
    from planner.cluster.slurm import SlurmSSHExecutor, SshTarget

    return SlurmSSHExecutor(
        SshTarget(
            host=cluster.host,
            port=cluster.port,
            user=cluster.user,
            key_path=cluster.key_path,
            known_hosts=cluster.host_keys,
            remote_root=cluster.remote_root,
        )
    )


def job_spec(run: JobRun) -> JobSpec:
    cluster = run.cluster
    gres = cluster.gres_pattern.format(gpus=run.gpus) if run.gpus and cluster.gres_pattern else None
    return JobSpec(
        run_id=run.code.hex[:20],
        attempt=run.attempt,
        command=tuple(run.command),
        files={name: text.encode() for name, text in run.files.items()},
        time_limit_s=run.time_limit_s,
        partition=cluster.partition or None,
        account=cluster.account or None,
        qos=cluster.qos or None,
        gres=gres,
        cpus=run.cpus,
        nodes=run.nodes,
        setup=tuple(line for line in cluster.setup_lines.splitlines() if line.strip()),
    )


def _set_state(run: JobRun, state: str, reason: str = "", **fields: Any) -> None:
    previous = run.state
    run.state = state
    if reason:
        run.reason = reason
    for name, value in fields.items():
        setattr(run, name, value)
    if state not in ACTIVE_STATES and run.finished_at is None:
        run.finished_at = timezone.now()
    run.save()
    if state not in ACTIVE_STATES and previous != state:
        transaction.on_commit(lambda: job_finished.send(sender=JobRun, run=run))
    if previous != state:
        audit_record(
            actor=SYSTEM,
            action=AuditAction.JOB_STATE_CHANGED,
            obj=run,
            data={"from": previous, "to": state, "job_id": run.job_id, "attempt": run.attempt, "reason": reason[:500]},
        )


@write_service
def jobrun_create(
    *,
    cluster: Cluster,
    kind: str,
    command: list[str],
    files: dict[str, str] | None = None,
    time_limit_s: int | None = None,
    cpus: int = 1,
    gpus: int = 0,
    nodes: int = 1,
    subject: models.Model | None = None,
    actor: User | None = None,
) -> JobRun:
    """Validate the whole job spec now (nothing bad reaches a cluster), store it, queue submission."""
    run = JobRun(
        cluster=cluster,
        kind=kind,
        command=list(command),
        files=dict(files or {}),
        time_limit_s=time_limit_s or cluster.default_time_limit_s,
        cpus=cpus,
        gpus=gpus,
        nodes=nodes,
        subject_type=subject._meta.label_lower if subject is not None else "",
        subject_id=str(getattr(subject, "code", "")) if subject is not None else "",
        requested_by=actor,
    )
    try:
        job_spec(run).validate()
    except ClusterError as exc:
        field = exc.message.split(":", 1)[0]
        raise ApplicationError(f"Invalid input. {exc.message}", extra={"fields": {field: [exc.message]}}) from None
    with transaction.atomic():
        run.save()
        audit_record(
            actor=actor or SYSTEM,
            action=AuditAction.JOB_SUBMITTED,
            obj=run,
            data={"cluster": cluster.name, "kind": kind, "stage": "queued"},
        )
        outbox_enqueue("jobs.submit", run.pk)  # sent after commit; a broker outage delays it
    return run


@dataclass(frozen=True, slots=True)
class NextStep:
    """What the task should do next: poll again after `poll_in` seconds, or retry submission."""

    poll_in: float | None = None
    resubmit_in: float | None = None


def jobrun_submit(*, run_id: int) -> NextStep:
    # Claim with a conditional UPDATE: two deliveries of the same task cannot both submit.
    if not JobRun.objects.filter(pk=run_id, state=JobRunState.QUEUED).update(
        state=JobRunState.SUBMITTING, updated_at=timezone.now()
    ):
        return NextStep()
    run = JobRun.objects.select_related("cluster").get(pk=run_id)
    spec = job_spec(run)
    executor = executor_for(run.cluster)
    try:
        ref: JobRef | None = executor.submit(spec)
    except ClusterError as exc:
        if exc.permanent:
            with transaction.atomic():
                _set_state(run, JobRunState.FAILED, f"submission refused: {exc.message}")
            return NextStep()
        ref = _reconcile(executor, spec, run)
        if ref is None:  # the job never reached Slurm: safe to submit again later
            JobRun.objects.filter(pk=run_id).update(state=JobRunState.QUEUED, reason=f"submit retry: {exc.message}")
            return NextStep(resubmit_in=min(5 * run.attempt, 60))
    if ref is None:  # submit() always returns a ref; this keeps the type checker honest
        raise ClusterError("submission returned no job reference", permanent=False)
    _record_submission(run, ref)
    return NextStep(poll_in=settings.JOB_POLL_INITIAL_S)


def _reconcile(executor: Executor, spec: JobSpec, run: JobRun) -> JobRef | None:
    try:
        return executor.find_by_name(spec.name, run.run_dir or "")
    except ClusterError:
        return None


def _record_submission(run: JobRun, ref: JobRef) -> None:
    with transaction.atomic():
        run.cancel_requested_at = JobRun.objects.select_for_update().get(pk=run.pk).cancel_requested_at
        now = timezone.now()
        _set_state(
            run,
            JobRunState.PENDING,
            "",
            job_id=ref.job_id,
            run_dir=ref.run_dir,
            submitted_at=now,
            poll_interval_s=settings.JOB_POLL_INITIAL_S,
            next_poll_at=now + timedelta(seconds=settings.JOB_POLL_INITIAL_S),
        )
        audit_record(
            actor=SYSTEM,
            action=AuditAction.JOB_SUBMITTED,
            obj=run,
            data={"stage": "submitted", "job_id": ref.job_id, "attempt": run.attempt, "run_dir": ref.run_dir},
        )
    if run.cancel_requested_at is not None:  # cancelled while this submission was in flight
        with contextlib.suppress(ClusterError):
            executor_for(run.cluster).cancel(ref)


def _claim_poll(run_id: int) -> bool:
    """Only one poll chain per run: the first to move next_poll_at forward owns this round."""
    now = timezone.now()
    return bool(
        JobRun.objects.filter(pk=run_id, state__in=[JobRunState.PENDING, JobRunState.RUNNING])
        .filter(models.Q(next_poll_at__isnull=True) | models.Q(next_poll_at__lte=now + timedelta(seconds=1)))
        .update(next_poll_at=now + LEASE)
    )


def _schedule(run: JobRun, grow: bool = True) -> NextStep:
    interval = min(run.poll_interval_s * (1.5 if grow else 1.0), settings.JOB_POLL_MAX_S)
    JobRun.objects.filter(pk=run.pk).update(
        poll_interval_s=interval, next_poll_at=timezone.now() + timedelta(seconds=interval)
    )
    return NextStep(poll_in=interval)


def jobrun_poll(*, run_id: int, force: bool = False) -> NextStep:
    if not force and not _claim_poll(run_id):
        return NextStep()
    run = JobRun.objects.select_related("cluster").get(pk=run_id)
    if run.state not in (JobRunState.PENDING, JobRunState.RUNNING):
        return NextStep()
    executor = executor_for(run.cluster)
    ref = JobRef(job_id=run.job_id, run_dir=run.run_dir)
    try:
        status = executor.poll([ref])[ref]
    except ClusterError as exc:
        if exc.permanent:
            with transaction.atomic():
                _set_state(run, JobRunState.FAILED, f"cluster refused: {exc.message}")
            return NextStep()
        JobRun.objects.filter(pk=run.pk).update(reason=f"polling paused: {exc.message}")
        return _schedule(run)  # sshd down, network blip: back off and resume later
    if status.state.active:
        state = JobRunState.RUNNING if status.state == JobState.RUNNING else JobRunState.PENDING
        log_tail = run.log_tail
        if state == JobRunState.RUNNING:
            with contextlib.suppress(ClusterError):
                log_tail = executor.fetch(ref).log_tail
        with transaction.atomic():
            _set_state(run, state, "", slurm_state=status.raw_state, log_tail=log_tail)
        return _schedule(run)
    return _finish(run, executor, ref, status)


def _finish(run: JobRun, executor: Executor, ref: JobRef, status: Any) -> NextStep:
    now = timezone.now()
    if (
        status.state == JobState.LOST
        and run.submitted_at
        and now - run.submitted_at < timedelta(seconds=settings.JOB_LOST_GRACE_S)
    ):
        return _schedule(run)  # not yet visible in the first seconds after submission: still pending
    try:
        output = executor.fetch(ref)
    except ClusterError as exc:
        if not exc.permanent:
            return _schedule(run)
        output = None
    log_tail = output.log_tail if output else run.log_tail
    with transaction.atomic():
        run = JobRun.objects.select_for_update().get(pk=run.pk)
        fields = {"slurm_state": status.raw_state, "log_tail": log_tail}
        succeeded = status.state == JobState.SUCCEEDED and output is not None and output.result_ok
        if run.cancel_requested_at is not None and not succeeded:
            # A killed payload may exit non-zero, lose its sentinel or vanish: the cause is the cancel.
            _set_state(run, JobRunState.CANCELLED, f"cancelled ({status.raw_state or status.state})", **fields)
        elif status.state == JobState.SUCCEEDED:
            if output is not None and output.result_ok:
                _set_state(run, JobRunState.SUCCEEDED, "", result=output.result, **fields)
                _on_success(run)
            else:
                _set_state(
                    run,
                    JobRunState.FAILED,
                    f"completed without a valid result: {output.problem if output else ''}",
                    **fields,
                )
        elif status.state == JobState.FAILED:
            _set_state(run, JobRunState.FAILED, f"exit code {status.exit_code} ({status.reason})", **fields)
        elif status.state == JobState.CANCELLED:
            _set_state(run, JobRunState.CANCELLED, status.raw_state, **fields)
        elif status.state == JobState.TIMEOUT and not run.timeout_retried and run.attempt < run.max_attempts:
            _retry(
                run,
                f"timed out after {run.time_limit_s} s; retrying once with twice the time",
                time_limit_s=run.time_limit_s * 2,
                timeout_retried=True,
            )
            return NextStep(resubmit_in=0)
        elif status.state == JobState.TIMEOUT:
            _set_state(run, JobRunState.TIMEOUT, "time limit reached again", **fields)
        elif status.state == JobState.RETRYABLE and run.attempt < run.max_attempts:
            _retry(run, f"{status.raw_state}: retrying after a grace period")
            return NextStep(resubmit_in=settings.JOB_RETRY_GRACE_S)
        elif status.state == JobState.RETRYABLE:
            _set_state(run, JobRunState.FAILED, f"{status.raw_state} and no attempts left", **fields)
        else:
            _set_state(run, JobRunState.LOST, status.reason or "vanished", **fields)
    return NextStep()


def _retry(run: JobRun, reason: str, **changes: Any) -> None:
    _set_state(
        run,
        JobRunState.QUEUED,
        reason,
        attempt=run.attempt + 1,
        job_id="",
        run_dir="",
        next_poll_at=None,
        finished_at=None,
        **changes,
    )


def _on_success(run: JobRun) -> None:
    if run.kind == JobKind.DISCOVERY and run.result:
        Cluster.objects.filter(pk=run.cluster_id).update(
            inventory={"nodes": run.result.get("nodes", []), "gpus": run.result.get("gpus", [])},
            discovered_at=timezone.now(),
        )


def jobrun_cancel(*, run: JobRun, actor: User) -> JobRun:
    with transaction.atomic():
        run = JobRun.objects.select_for_update(of=("self",)).select_related("cluster").get(pk=run.pk)
        if run.state not in ACTIVE_STATES:
            raise ConflictError(f"a {run.state} run cannot be cancelled")
        audit_record(actor=actor, action=AuditAction.JOB_STATE_CHANGED, obj=run, data={"cancel_requested": True})
        run.cancel_requested_at = timezone.now()
        run.save(update_fields=["cancel_requested_at", "updated_at"])
        if run.state == JobRunState.QUEUED:  # the submitter claims only queued runs: it will never start
            _set_state(run, JobRunState.CANCELLED, f"cancelled by {actor.username} before submission")
            return run
        if not run.job_id:  # submission in flight: the submitter sees the request and cancels what it started
            return run
    try:
        executor_for(run.cluster).cancel(JobRef(job_id=run.job_id, run_dir=run.run_dir))
    except ClusterError as exc:
        raise ApplicationError(f"cancel failed: {exc.message}", status=503 if not exc.permanent else 400) from None
    return run


def cluster_test_connection(*, cluster: Cluster) -> Cluster:
    ok, message = True, "local executor"
    if cluster.executor == ExecutorKind.SLURM:
        from planner.cluster.slurm import SlurmSSHExecutor

        executor = executor_for(cluster)
        if not isinstance(executor, SlurmSSHExecutor):
            raise TypeError(f"cluster {cluster.name}: a Slurm cluster got a {type(executor).__name__}")
        try:
            code, out, err = executor.run(["sinfo", "--version"])
            ok, message = code == 0, (out or err).strip()[:500]
        except ClusterError as exc:
            ok, message = False, exc.message
    Cluster.objects.filter(pk=cluster.pk).update(
        last_test_at=timezone.now(), last_test_ok=ok, last_test_message=message
    )
    cluster.refresh_from_db()
    return cluster


def cluster_discover(*, cluster: Cluster, actor: User | None) -> JobRun:
    source = (Path(__file__).resolve().parents[2] / "planner" / "cluster" / "discover.py").read_text()
    return jobrun_create(
        cluster=cluster,
        kind=JobKind.DISCOVERY,
        command=[cluster.python, "discover.py"],
        files={"discover.py": source},
        time_limit_s=300,
        actor=actor,
    )


def jobs_resume(*, stale_after: timedelta = timedelta(seconds=30), on_start: bool = False) -> dict[str, list[int]]:
    """After a worker restart (and from beat): find runs whose polling or submission stalled.

    On a worker's start every active run is polled again now: the poll a killed worker had
    scheduled (an ETA message it held unacknowledged) or was running (its claim on next_poll_at)
    is gone with it, and waiting for the claim to lapse or the broker to redeliver would stall the
    run. A poll chain that is still alive elsewhere loses the next claim and ends (one chain a run)."""
    now = timezone.now()
    active = JobRun.objects.filter(state__in=[JobRunState.PENDING, JobRunState.RUNNING])
    if on_start:
        polls = list(active.values_list("pk", flat=True))
        active.filter(pk__in=polls).update(next_poll_at=now)
    else:
        polls = list(
            active.filter(models.Q(next_poll_at__isnull=True) | models.Q(next_poll_at__lte=now)).values_list(
                "pk", flat=True
            )
        )
    submits = list(JobRun.objects.filter(state=JobRunState.QUEUED).values_list("pk", flat=True))
    for run in JobRun.objects.filter(state=JobRunState.SUBMITTING, updated_at__lte=now - stale_after).select_related(
        "cluster"
    ):
        spec = job_spec(run)
        ref = _reconcile(executor_for(run.cluster), spec, run)
        if ref is not None:
            _record_submission(run, ref)
            polls.append(run.pk)
        else:
            JobRun.objects.filter(pk=run.pk, state=JobRunState.SUBMITTING).update(state=JobRunState.QUEUED)
            submits.append(run.pk)
    return {"poll": polls, "submit": submits}
