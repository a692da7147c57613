"""python -m planner.evaljob.tether PARENT_PID -- ENGINE ARGV…

Runs the serving engine tied to the eval job that started it. The engine lives in a session of its
own (so stopping it stops its workers and never signals the job), which also means that killing
the job's process group - the local executor's cancel, `timeout`, a node agent, SIGKILL - does not
reach it: left alone it would keep its port, its memory (a whole GPU node's worth on a real engine)
and run forever. This small process sits between the two: it is the engine's session leader and
parent, and as soon as the job is gone (Linux tells it with PR_SET_PDEATHSIG; a poll of the parent
pid covers other systems and the moment before prctl took effect) it stops the engine's whole
process group: SIGTERM, SIGKILL after a grace period.

A SIGTERM sent to the group by the job's own `Engine.stop` reaches the engine directly; the tether
then only waits for it and exits with its code, so `stop()` still returns once the engine is down.
No torch, no third-party import: it must start in milliseconds wherever the job runs.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys

PR_SET_PDEATHSIG = 1  # linux/prctl.h
GRACE_S = 15.0
POLL_S = 0.5


def _ask_for_parent_death_signal() -> None:
    """Linux: be sent SIGTERM the moment the parent (the eval job) dies, even by SIGKILL."""
    if not sys.platform.startswith("linux"):
        return
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)


def _stop_group(engine: subprocess.Popen[bytes], grace_s: float) -> int:
    """The engine and everything it started (its group is ours): TERM, then KILL after `grace_s`."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # the group signal must not end the tether first
    with contextlib.suppress(ProcessLookupError):
        os.killpg(os.getpgrp(), signal.SIGTERM)
    try:
        return engine.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        # The engine's own workers are in this group too; SIGKILL ends this process with them.
        os.killpg(os.getpgrp(), signal.SIGKILL)
        return 1  # not reached


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) < 3 or args[1] != "--" or not args[0].isdigit():
        print("usage: python -m planner.evaljob.tether PARENT_PID -- ENGINE ARGV…", file=sys.stderr)
        return 2
    parent, command = int(args[0]), args[2:]
    _ask_for_parent_death_signal()
    if os.getppid() != parent:  # the job died before prctl took effect: start nothing
        return 1
    parent_gone = [False]

    def on_term(signum: int, frame: object) -> None:
        # Either the job's Engine.stop (the engine got the same SIGTERM from the group) or the death
        # signal; which one is told by the parent pid, checked by the loop below.
        parent_gone[0] = os.getppid() != parent

    signal.signal(signal.SIGTERM, on_term)
    try:
        engine = subprocess.Popen(command)  # noqa: S603 - the job's validated argv, no shell
    except OSError as exc:
        print(f"cannot start the engine {command[0]!r}: {exc}", file=sys.stderr, flush=True)
        return 127
    while True:
        try:
            code = engine.wait(timeout=POLL_S)
        except subprocess.TimeoutExpired:
            if parent_gone[0] or os.getppid() != parent:
                print("tether: the eval job is gone; stopping the engine", file=sys.stderr, flush=True)
                return _stop_group(engine, GRACE_S) or 1
            continue
        return code if code >= 0 else 128 - code


if __name__ == "__main__":
    sys.exit(main())
