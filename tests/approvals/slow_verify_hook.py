"""Loaded into the time-limit test's worker only (`celery worker --include tests.approvals.slow_verify_hook`).

No file within the verifier's bounds is slow enough to cross a time limit on purpose, so a file
carrying SLOW_MARKER is verified again and again (real pyHanko work, in a loop) until the task's
soft time limit interrupts it: what the worker does with a verification that runs too long is what
the test checks, not how such a file is built."""

from __future__ import annotations

from typing import Any

from governance.approvals import verification

SLOW_MARKER = b"%slow-verify"
_original = verification._verify_packet


def _slow(data: bytes, **kwargs: Any) -> Any:
    if SLOW_MARKER not in data:
        return _original(data, **kwargs)
    while True:
        _original(data, **kwargs)


verification._verify_packet = _slow
