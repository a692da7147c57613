"""Who is acting, for changes that reach the audit trail without a user at hand (Django's m2m
signals fired from admin views): set around such code with `acting_as`."""

from __future__ import annotations

import contextvars
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

_acting_actor: contextvars.ContextVar[Any] = contextvars.ContextVar("acting_actor", default=None)


@contextmanager
def acting_as(actor: Any) -> Iterator[None]:
    token = _acting_actor.set(actor if getattr(actor, "is_authenticated", True) else None)
    try:
        yield
    finally:
        _acting_actor.reset(token)


def current_actor() -> Any:
    """The declared actor (a user or a "system:…" name), else "system"."""
    return _acting_actor.get() or "system"
