"""Loaded into the time-limit test's worker only (`celery worker --include tests.approvals.slow_verify_hook`).

No file within the verifier's bounds is slow enough to cross a time limit on purpose, so a file
carrying SLOW_MARKER waits in the verifier's place until the task's soft time limit interrupts it:
what the worker does with a verification that runs too long is what the test checks, not how such a
file is built. It waits outside pyHanko (it looped on real verifications before) because pyHanko
catches `Exception` in places (diff analysis, its PDF object layer) and Celery's SoftTimeLimitExceeded
is one: landing there, it was swallowed, the loop went on, the hard limit killed the child and the job
stayed `running` (a CI run under load; the service fails such a job when its message comes again)."""

from __future__ import annotations

import time
from typing import Any

from governance.approvals import verification

SLOW_MARKER = b"%slow-verify"
_original = verification._verify_packet


def _slow(data: bytes, **kwargs: Any) -> Any:
    if SLOW_MARKER not in data:
        return _original(data, **kwargs)
    while True:
        time.sleep(0.05)


verification._verify_packet = _slow
