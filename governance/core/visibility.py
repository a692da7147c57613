"""Which objects a person may not see, by object type, for reads that list records of many apps
(the audit trail). Each app that owns objects with object-level permissions registers ONE
function at start-up (its AppConfig.ready): the same visibility selector its own API and pages
use. A direct call, not a signal: a registered function that fails raises, and an answer that is
not a collection of ids (or a query of them, run as a subquery of the read) is an error — the read
fails closed, never open."""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Any

from django.db.models import Func, QuerySet, TextField

# The ids hidden from a user: a list, or a values_list query of text ids (no row leaves the database).
HiddenIds = Collection[str] | QuerySet[Any, str]
HiddenFrom = Callable[[Any], HiddenIds]


class UUIDText(Func):
    """A UUID column as the text str(uuid) gives (lower case, hyphenated), so that a query of codes
    can stand in for the object ids other tables store as text: PostgreSQL's cast already reads so;
    SQLite keeps UUIDs as 32 hex digits, hyphenated here."""

    template = "CAST(%(expressions)s AS text)"
    output_field = TextField()

    def as_sqlite(self, compiler: Any, connection: Any, **extra: Any) -> Any:
        parts = "||'-'||".join(f"substr(%(expressions)s, {start}, {length})" for start, length in _UUID_PARTS)
        return self.as_sql(compiler, connection, template=f"lower({parts})", **extra)


_UUID_PARTS = ((1, 8), (9, 4), (13, 4), (17, 4), (21, 12))

_REGISTRY: dict[str, HiddenFrom] = {}


def register_hidden(object_type: str, hidden_from: HiddenFrom) -> None:
    """`hidden_from(user)` answers the ids of the `object_type` objects `user` would get 404 for."""
    _REGISTRY[object_type] = hidden_from


def hidden_objects(user: Any) -> dict[str, HiddenIds]:
    """{object_type: ids hidden from user} from every registered selector: a list, or a query of
    text ids that the caller uses as a subquery."""
    hidden: dict[str, HiddenIds] = {}
    for object_type, hidden_from in _REGISTRY.items():
        ids = hidden_from(user)
        if isinstance(ids, QuerySet):
            hidden[object_type] = ids
            continue
        if isinstance(ids, str | bytes) or not isinstance(ids, Collection):
            raise TypeError(f"the visibility selector for {object_type} answered {type(ids).__name__}, not ids")
        hidden[object_type] = [str(i) for i in ids]
    return hidden


# One object by its id, for a write that names it (a startup log naming the request whose deployment printed
# it): whether the writer may see it, by the owning app's own rule. Registered like register_hidden.
VisibleTo = Callable[[Any, str], bool]
_VISIBLE: dict[str, VisibleTo] = {}


def register_visible(object_type: str, visible_to: VisibleTo) -> None:
    """`visible_to(user, object_id)`: whether the object exists and `user` may see it."""
    _VISIBLE[object_type] = visible_to


def object_visible(user: Any, object_type: str, object_id: str) -> bool:
    """Whether `user` sees that object; False when no app registered the type (fails closed)."""
    visible_to = _VISIBLE.get(object_type)
    return bool(visible_to(user, object_id)) if visible_to is not None else False
