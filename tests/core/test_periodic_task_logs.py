"""The worker and beat under `make run` wrote a dozen lines every 15 s (each periodic loop received,
succeeded, sent), burying the demo passwords: those routine lines are DEBUG now; other tasks' stay INFO."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from tests.conftest import ROOT, _database_url_for_tests, start_worker, stop_worker, wait_for_worker

PERIODIC = ("core.outbox_flush", "jobs.resume", "capacity.resume", "quantize.reconcile")


@pytest.mark.django_db(transaction=True)
def test_idle_periodic_loops_log_at_debug(tmp_path: Path) -> None:
    from governance.core.tasks import ping

    queue = f"test-{uuid.uuid4().hex[:12]}"
    loop = {"RESUME_INTERVAL_S": "1", "CELERY_TASK_DEFAULT_QUEUE": queue}
    worker_log, beat_log = tmp_path / "worker.log", tmp_path / "beat.log"
    worker = start_worker(queue, worker_log, extra_env=loop)
    env = {
        **os.environ,
        **loop,
        "DJANGO_SETTINGS_MODULE": "governance.settings_tests",
        "DATABASE_URL": _database_url_for_tests(),
    }
    # Beat at DEBUG: its lines are there, demoted; the worker at INFO (as in the Procfile): gone.
    with beat_log.open("ab") as log:
        beat = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "governance.celery", "beat", "--loglevel=DEBUG",
             "-s", str(tmp_path / "schedule")],
            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
    try:
        wait_for_worker(worker, queue, worker_log)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and len(set(re.findall(r"due task \S+ \((\S+)\)", beat_log.read_text()))) < 4:
            time.sleep(1)
        time.sleep(3)  # the worker has run what beat sent
        assert ping.apply_async(args=["after"], queue=queue).get(timeout=30) is not None
    finally:
        beat.terminate()
        beat.wait(timeout=20)
        stop_worker(worker)
    beats, works = beat_log.read_text(), worker_log.read_text()
    sent = re.findall(r"(\w+)/MainProcess\] Scheduler: Sending due task \S+ \((\S+)\)", beats)
    assert {task for _, task in sent} >= set(PERIODIC), beats[-3000:]
    assert {level for level, _ in sent} == {"DEBUG"}, beats[-3000:]
    for task in PERIODIC:
        assert not re.search(rf"INFO/\w+\] Task {re.escape(task)}\[", works), works[-3000:]
    # Not every task: one the periodic schedule does not run still logs its lines at INFO.
    assert re.search(r"INFO/\w+\] Task core\.ping\[\S+\] received", works), works[-3000:]
    assert re.search(r"INFO/\w+\] Task core\.ping\[\S+\] succeeded", works), works[-3000:]
