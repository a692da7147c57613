"""The service boundary of a write (`write_service`): one transaction, retried as a whole when
PostgreSQL picks it as a deadlock or serialization-failure victim, with work deferred to its end.

It lives in core, below every app, because every app's write services use it; the audit trail
(governance.audit.services) defers its appends here so that the chain-head lock, which every writer
takes, is the last lock a transaction takes (docs/architecture.md, *Lock order and retries*)."""

from __future__ import annotations

import functools
import logging
import random
import time
from collections.abc import Callable
from contextvars import ContextVar
from typing import ParamSpec, TypeVar

from django.conf import settings
from django.db import OperationalError, transaction

logger = logging.getLogger(__name__)

# The work deferred to the end of the current write service's transaction (None: not inside one).
_deferred: ContextVar[list[Callable[[], None]] | None] = ContextVar("write_service_deferred", default=None)

# PostgreSQL's deadlock_detected and serialization_failure: the transaction was rolled back as a
# whole and may simply run again.
RETRYABLE_SQLSTATES = frozenset({"40P01", "40001"})

P = ParamSpec("P")
R = TypeVar("R")


def defer_to_boundary(work: Callable[[], None]) -> bool:
    """Run `work` as the last writes of the enclosing write service's transaction, in the order
    deferred. False (nothing deferred) outside a write service or outside a transaction: the
    caller then does the work at once."""
    deferred = _deferred.get()
    if deferred is None or not transaction.get_connection().in_atomic_block:
        return False
    deferred.append(work)
    return True


def _retryable(exc: OperationalError) -> bool:
    return getattr(exc.__cause__, "sqlstate", None) in RETRYABLE_SQLSTATES


def _run_deferred(deferred: list[Callable[[], None]]) -> None:
    while deferred:
        deferred.pop(0)()


def write_service(fn: Callable[P, R]) -> Callable[P, R]:
    """The service boundary of a write: one transaction whose deferred work (the audit events) is
    its last writes, run again (`SERVICE_RETRY_ATTEMPTS` times in all) when PostgreSQL picks it as
    a deadlock or serialization-failure victim. A write service called by another joins the
    caller's boundary; one called inside a caller's open transaction cannot be retried alone and
    runs once."""

    @functools.wraps(fn)
    def boundary(*args: P.args, **kwargs: P.kwargs) -> R:
        if _deferred.get() is not None:
            return fn(*args, **kwargs)
        attempts = 1 if transaction.get_connection().in_atomic_block else settings.SERVICE_RETRY_ATTEMPTS
        for attempt in range(1, attempts + 1):
            token = _deferred.set([])
            try:
                with transaction.atomic():
                    result = fn(*args, **kwargs)
                    _run_deferred(_deferred.get() or [])
                return result
            except OperationalError as exc:
                if attempt >= attempts or not _retryable(exc):
                    raise
                logger.warning(
                    "write service retried after a deadlock or serialization failure",
                    extra={"service": fn.__qualname__, "attempt": attempt, "sqlstate": exc.__cause__.sqlstate},  # type: ignore[union-attr]
                )
                time.sleep(random.uniform(0, 0.05 * 2**attempt))  # noqa: S311 - jitter, not a secret
            finally:
                _deferred.reset(token)
        raise AssertionError("unreachable")  # pragma: no cover

    return boundary
