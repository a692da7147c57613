"""Which objects a person may not see, by object type, for reads that list records of many apps
(the audit trail). Each app that owns objects with object-level permissions registers ONE
function at start-up (its AppConfig.ready): the same visibility selector its own API and pages
use. A direct call, not a signal: a registered function that fails raises, and an answer that is
not a collection of ids is an error — the read fails closed, never open."""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Any

HiddenFrom = Callable[[Any], Collection[str]]

_REGISTRY: dict[str, HiddenFrom] = {}


def register_hidden(object_type: str, hidden_from: HiddenFrom) -> None:
    """`hidden_from(user)` answers the ids of the `object_type` objects `user` would get 404 for."""
    _REGISTRY[object_type] = hidden_from


def hidden_objects(user: Any) -> dict[str, list[str]]:
    """{object_type: [ids hidden from user]} from every registered selector."""
    hidden: dict[str, list[str]] = {}
    for object_type, hidden_from in _REGISTRY.items():
        ids = hidden_from(user)
        if isinstance(ids, str | bytes) or not isinstance(ids, Collection):
            raise TypeError(f"the visibility selector for {object_type} answered {type(ids).__name__}, not ids")
        hidden[object_type] = [str(i) for i in ids]
    return hidden
