"""Prometheus' multiprocess mode, apart from the metrics themselves: the gunicorn master imports
this (to clean up) without creating any metric. Importing it first, governance.core.metrics keeps
its values in files named by host and pid when PROMETHEUS_MULTIPROC_DIR is set."""

from __future__ import annotations

import os
import socket
from pathlib import Path

from prometheus_client import values

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"  # the variable prometheus_client itself reads


def process_identifier() -> str:
    return f"{socket.gethostname().replace('_', '-')}-{os.getpid()}"


if os.environ.get(MULTIPROC_ENV):
    Path(os.environ[MULTIPROC_ENV]).mkdir(parents=True, exist_ok=True)
    # Metric children made from here on (all of ours) keep their values in files named by this.
    values.ValueClass = values.MultiProcessValue(process_identifier)


def multiprocess_files_clean() -> None:
    """Remove the value files this host's earlier processes left: they would be summed in as if
    they were this run's. Another container's files (another host name) are left alone."""
    folder = os.environ.get(MULTIPROC_ENV)
    if not folder:
        return
    path = Path(folder)
    path.mkdir(parents=True, exist_ok=True)
    host = socket.gethostname().replace("_", "-")
    for child in path.glob(f"*_{host}-*.db"):
        child.unlink(missing_ok=True)


__all__ = ["MULTIPROC_ENV", "multiprocess_files_clean", "process_identifier"]
