"""A Celery worker killed mid-poll and restarted resumes the same Slurm job: one job, never two."""

from __future__ import annotations

import signal
import subprocess
import time
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.utils import timezone

from governance.evaluations.models import Cluster, JobKind, JobRun
from governance.evaluations.services import jobrun_create
from tests.conftest import start_worker, stop_worker, wait_for_worker
from tests.evaluations.conftest import RESULT_WRITER

pytestmark = pytest.mark.cluster


def _wait(run: JobRun, states: set[str], timeout_s: float) -> JobRun:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        run.refresh_from_db()
        if run.state in states:
            return run
        time.sleep(0.3)
    raise AssertionError(f"run is {run.state}, wanted {states}: {run.reason}")


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_killed_worker_resumes_polling_the_same_job(testcluster: dict[str, Any], tmp_path: Path) -> None:
    from governance.celery import app

    queue = f"restart-{uuid.uuid4().hex[:10]}"
    log_path = tmp_path / "worker.log"
    previous_queue = app.conf.task_default_queue
    app.conf.task_default_queue = queue
    worker = start_worker(queue, log_path)
    try:
        wait_for_worker(worker, queue, log_path)
        cluster = Cluster.objects.create(
            name="restart",
            host=testcluster["host"],
            port=testcluster["port"],
            user=testcluster["user"],
            host_keys=testcluster["known_hosts_text"],
            key_path=testcluster["key_path"],
            remote_root=testcluster["remote_root"],
            partition="debug",
        )
        run = jobrun_create(
            cluster=cluster,
            kind=JobKind.COMMAND,
            command=["bash", "-c", f'sleep 8; python3 -c "{RESULT_WRITER}"'],
            time_limit_s=120,
        )
        run = _wait(run, {"pending", "running"}, 60)
        job_id = run.job_id
        assert job_id
        worker.send_signal(signal.SIGKILL)  # mid-poll: no goodbye, nothing acknowledged
        worker.wait(timeout=10)
        # Killed while polling, the worker still holds its claim on the run (next_poll_at moved a
        # lease ahead) and its scheduled next poll is gone with it: a restart must not wait that out.
        JobRun.objects.filter(pk=run.pk).update(next_poll_at=timezone.now() + timedelta(seconds=120))
        worker = start_worker(queue, log_path)  # worker_ready -> jobs.resume -> poll
        run = _wait(run, {"succeeded", "failed", "lost", "cancelled", "timeout"}, 90)
        assert run.state == "succeeded", run.reason + log_path.read_text(errors="replace")[-2000:]
        assert run.job_id == job_id
        assert run.attempt == 1
        out = subprocess.run(["scontrol", "-o", "show", "job"], capture_output=True, text=True, check=False).stdout
        assert sum(f"JobName=gov-{run.code.hex[:20]}" in line for line in out.splitlines()) == 1
    finally:
        app.conf.task_default_queue = previous_queue
        stop_worker(worker)
