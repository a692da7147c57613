"""Counters and histograms that only the process doing the work can see (gate latency, packet
render/verify time). Everything the database already knows (sign-offs, jobs, the outbox, the
audit chain) is read at scrape time instead (governance/observability/collectors.py), so it is right whichever process or
container did the work.

Under gunicorn (several worker processes) set PROMETHEUS_MULTIPROC_DIR: prometheus_client then
keeps these values in files there and /metrics sums them over every process. A Celery worker
(packets are rendered and verified there) that shares the folder, as a volume mounted into both
containers, adds its own: files are named by host and pid, since two containers' pids collide."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from functools import wraps
from typing import ParamSpec, TypeVar

from prometheus_client import Counter, Histogram

# For its side effect, before any metric below exists: in multiprocess mode it decides where values are kept.
import governance.core.prometheus  # noqa: F401

P = ParamSpec("P")
R = TypeVar("R")

# The gate answers in milliseconds; the buckets resolve 1 ms..1 s, where an SLO would sit.
_GATE_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)
# Rendering and verifying a packet takes a tenth of a second to several seconds (CJK fonts).
_PACKET_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)

GATE_DECISIONS = Counter(
    "governance_gate_decisions",
    "Gate decisions answered, by result (allow, deny; error: the decision could not be logged, 503).",
    ["result"],
)
GATE_DENY_REASONS = Counter(
    "governance_gate_deny_reasons",
    "Reason codes of gate denials (a denial with three reasons counts three times).",
    ["reason"],
)
GATE_LATENCY = Histogram(
    "governance_gate_check_duration_seconds",
    "Time to answer POST /api/v1/gate/check, token check included, by HTTP status.",
    ["status"],
    buckets=_GATE_BUCKETS,
)
PACKET_RENDER = Histogram(
    "governance_packet_render_duration_seconds",
    "Time to render an approval packet (HTML to PDF/A-3b).",
    buckets=_PACKET_BUCKETS,
)
PACKET_VERIFY = Histogram(
    "governance_packet_verify_duration_seconds",
    "Time to verify the signatures of an approval packet.",
    buckets=_PACKET_BUCKETS,
)


def gate_decision_observe(result: str, reason_codes: Iterable[str]) -> None:
    GATE_DECISIONS.labels(result=result).inc()
    for code in reason_codes:
        GATE_DENY_REASONS.labels(reason=code).inc()


def timed(histogram: Histogram) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Observe how long each call takes, raised exceptions included."""

    def decorate(fn: Callable[P, R]) -> Callable[P, R]:
        @wraps(fn)
        def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
            started = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                histogram.observe(time.perf_counter() - started)

        return wrapper

    return decorate
