import contextlib
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.evaluations.conftest import _fresh_connections, testcluster  # noqa: F401  (shared fixtures)


@pytest.fixture(scope="session")
def tiny_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny random-weight checkpoint (with its chat template), written once per session."""
    from planner.evaljob.tiny import save_tiny_checkpoint

    return save_tiny_checkpoint(tmp_path_factory.mktemp("models") / "tiny-qwen3-moe")


def alive_in_group(pgid: int) -> list[int]:
    """Pids of the processes (not zombies) whose process group is `pgid`, read from /proc."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(") ", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            found.append(int(stat.parent.name))
    return found


def processes_naming(marker: str) -> list[int]:
    """Pids of live processes whose command line contains `marker` (a test's own tmp_path)."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if (
                marker.encode() in cmdline.read_bytes()
                and (cmdline.parent / "stat").read_text().rsplit(") ", 1)[1][0] != "Z"
            ):
                found.append(int(cmdline.parent.name))
        except (OSError, IndexError):
            continue
    return found


@pytest.fixture
def no_engine_left(tmp_path: Path) -> Iterator[None]:
    """Every engine a test started (its command line names the test's tmp_path: the model or the
    fake engine's log) is gone when the test ends; one left behind is killed, by pid, and fails it."""
    yield
    deadline = time.monotonic() + 20  # a stopping engine gets the tether's grace period
    left = processes_naming(str(tmp_path))
    while left and time.monotonic() < deadline:
        time.sleep(0.2)
        left = processes_naming(str(tmp_path))
    for pid in left:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    assert not left, f"processes of this test still running after it ended: {left}"
