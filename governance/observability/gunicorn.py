"""gunicorn hooks for Prometheus' multiprocess mode (`gunicorn -c python:governance.observability.gunicorn`).

Each worker writes its values to files under PROMETHEUS_MULTIPROC_DIR; the master removes this
host's files of a previous run on start, and a dead worker's live-gauge files when it exits."""

from __future__ import annotations

import os
from typing import Any

from governance.core.prometheus import MULTIPROC_ENV, multiprocess_files_clean, process_identifier


def on_starting(server: Any) -> None:
    multiprocess_files_clean()


def child_exit(server: Any, worker: Any) -> None:
    if os.environ.get(MULTIPROC_ENV):
        from prometheus_client import multiprocess

        # The files of a worker are named by host and pid (metrics.process_identifier).
        multiprocess.mark_process_dead(process_identifier().rsplit("-", 1)[0] + f"-{worker.pid}")
