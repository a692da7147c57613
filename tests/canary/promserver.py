"""Debian's Prometheus on loopback for the canary tests, started by the repository's own
scripts/prometheus-loopback, scraping test exporters (tests/canary/exporter.py) every second."""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import pytest

from governance.canary.prometheus import PromClient, PrometheusError

ROOT = Path(__file__).resolve().parents[2]
needs_prometheus = pytest.mark.skipif(
    shutil.which("prometheus") is None, reason="no prometheus binary (scripts/system-deps)"
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def loopback_prometheus(directory: Path, targets: Mapping[str, str], interval: str = "1s") -> Iterator[PromClient]:
    """Prometheus scraping `targets` ({"deployment=canary": "127.0.0.1:PORT"}); stopped on exit."""
    port = free_port()
    process = subprocess.Popen(
        [
            sys.executable,
            str(ROOT / "scripts" / "prometheus-loopback"),
            f"--port={port}",
            f"--dir={directory}",
            *(f"--target={label}@{address}" for label, address in targets.items()),
            f"--interval={interval}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        yield PromClient(f"http://127.0.0.1:{port}", timeout_s=5)
    finally:
        process.terminate()
        process.wait(timeout=20)


def wait_for_samples(client: PromClient, query: str, at_least: int, timeout_s: float = 40, step: float = 1) -> None:
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        now = time.time()
        try:
            if len(client.samples(query, start=now - 60, end=now, step=step)) >= at_least:
                return
        except PrometheusError:
            pass  # not listening yet
        time.sleep(0.5)
    raise AssertionError(f"no {at_least} samples of {query} within {timeout_s} s")
