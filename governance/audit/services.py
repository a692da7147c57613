"""Writes to the audit trail: append an event, sign a checkpoint.

`audit_record` is called by every state-changing service inside that service's own
transaction, so the change and its audit event commit or roll back together.
"""

from __future__ import annotations

import base64
import functools
import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AnonymousUser, User
from django.db import models, transaction
from django.utils import timezone

from governance.audit.actions import AuditAction
from governance.audit.chain import GENESIS_HASH, chain_hash
from governance.audit.integrity import chain_problem_since_last_checkpoint
from governance.audit.keys import key_id, load_signing_key
from governance.audit.models import AuditChainHead, AuditCheckpoint, AuditEvent
from governance.core.canonical import canonical_json
from governance.core.errors import ConflictError
from governance.core.logging import current_request_id
from governance.core.prepared import fetch_one_prepared
from governance.core.services import defer_to_boundary

logger = logging.getLogger(__name__)

BODY_VERSION = 1

AuditObject = models.Model | tuple[str, str] | None


def _object_ref(obj: AuditObject) -> tuple[str, str]:
    if obj is None:
        return "", ""
    if isinstance(obj, tuple):
        return obj
    public_id = getattr(obj, "code", None) or getattr(obj, "key", None) or obj.pk
    return obj._meta.label_lower, str(public_id)


def _actor_ref(actor: User | AnonymousUser | str | None) -> tuple[User | None, str]:
    if actor is None or isinstance(actor, AnonymousUser):
        return None, "system"
    if isinstance(actor, str):
        return None, actor  # a system actor, e.g. "system:beat"
    return actor, actor.get_username()


def format_time(moment: Any) -> str:
    """UTC, microseconds, 'Z': one spelling, so the canonical body never varies by timezone setting."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _lock_head() -> AuditChainHead:
    head = AuditChainHead.objects.select_for_update().filter(pk=1).first()
    if head is None:
        head = _create_head()
    return head


def _create_head() -> AuditChainHead:
    _insert_head()
    return AuditChainHead.objects.select_for_update().get(pk=1)


def _insert_head() -> None:
    # First append ever (or after a test flush): create the head; a concurrent creator wins the PK.
    AuditChainHead.objects.bulk_create([AuditChainHead(id=1, seq=0, hash=GENESIS_HASH)], ignore_conflicts=True)


def _body_parts(fields: dict[str, Any]) -> tuple[str, str]:
    """Canonical body split around the seq number: `prefix + str(seq) + suffix`.

    RFC 8785 sorts keys, and every key of the body sorts before "seq" except "v", so the
    canonical text of the whole body is the canonical text of the other keys with
    `,"seq":N,"v":1` spliced in before the closing brace. This lets PostgreSQL put the seq
    in while it holds the chain-head lock, in one statement.
    """
    if not all(key < "seq" for key in fields):
        raise ValueError("every body key except seq and v must sort before 'seq'")
    text = canonical_json(fields).decode()
    return text[:-1] + ',"seq":', f',"v":{BODY_VERSION}}}'


# One statement on PostgreSQL: lock the head, advance it, hash in SQL, insert the event. The
# head lock is held from this statement to COMMIT, so fewer round trips mean more appends/s.
# `{refs}` (audit_record_with_insert): the rows the statement's inserts reference, locked before
# the head (the head is joined to them, so it is locked only once they are): the documented order,
# rows first and the chain head last (docs/architecture.md, *Lock order and retries*).
_PG_APPEND = """
WITH {refs}old AS (
    SELECT h.seq, h.hash FROM audit_auditchainhead h{refs_join} WHERE h.id = 1 FOR UPDATE OF h
), {side}body AS (
    SELECT old.seq + 1 AS seq, old.hash AS prev_hash, %(prefix)s || (old.seq + 1)::text || %(suffix)s AS text
    FROM old
), new AS (
    UPDATE audit_auditchainhead AS head
    SET seq = body.seq,
        hash = encode(sha256(decode(body.prev_hash, 'hex') || sha256(convert_to(body.text, 'UTF8'))), 'hex')
    FROM body WHERE head.id = 1
    RETURNING head.seq, head.hash, body.prev_hash, body.text
)
INSERT INTO audit_auditevent
    (seq, occurred_at, actor_id, actor_name, action, object_type, object_id, request_id, data, body, prev_hash, hash)
SELECT new.seq, %(occurred_at)s, %(actor_id)s, %(actor_name)s, %(action)s, %(object_type)s, %(object_id)s,
       %(request_id)s, %(data)s::jsonb, new.text, new.prev_hash, new.hash
FROM new
RETURNING id, seq, body, prev_hash, hash
"""
_PG_APPEND_ALONE = _PG_APPEND.format(refs="", refs_join="", side="")


class ReferenceChangedError(ConflictError):
    """A row the insert references no longer holds the values it was read with (or is gone):
    nothing was written. The caller decides again from what the rows hold now."""

    def __init__(self, field: str) -> None:
        super().__init__(f"the {field} this write references changed since it was read", extra={"field": field})
        self.field = field


# What a referenced row must still hold, per foreign key of the inserted row: {column: value}.
Unchanged = Mapping[str, Mapping[str, Any]]


def _event(
    actor: User | AnonymousUser | str | None,
    action: AuditAction,
    obj: AuditObject,
    data: dict[str, Any] | None,
    request_id: str | None,
) -> tuple[AuditEvent, str, str]:
    """The unsaved event and its canonical body around the seq number (filled in by the append)."""
    user, actor_name = _actor_ref(actor)
    object_type, object_id = _object_ref(obj)
    if request_id is None:
        request_id = current_request_id()
        request_id = "" if request_id == "-" else request_id
    payload = json.loads(json.dumps(data or {}, default=str))  # what the JSON column will hold
    occurred_at = timezone.now()
    prefix, suffix = _body_parts(
        {
            "occurred_at": format_time(occurred_at),
            "actor": actor_name,
            "action": AuditAction(action).label,
            "object": {"type": object_type, "id": object_id} if object_type else None,
            "request_id": request_id,
            "data": payload,
        }
    )
    event = AuditEvent(
        occurred_at=occurred_at,
        actor=user,
        actor_name=actor_name,
        action=int(action),
        object_type=object_type,
        object_id=object_id,
        request_id=request_id,
        data=payload,
    )
    return event, prefix, suffix


def audit_record(
    *,
    actor: User | AnonymousUser | str | None,
    action: AuditAction,
    obj: AuditObject = None,
    data: dict[str, Any] | None = None,
    request_id: str | None = None,
) -> AuditEvent:
    """Append one event to the chain. Serialized on the chain-head row; never forks."""
    event, prefix, suffix = _event(actor, action, obj, data, request_id)
    # Inside a write service the append is the transaction's last write, so the chain-head lock,
    # which every writer takes, is never held while waiting for another row (docs/architecture.md).
    if not defer_to_boundary(functools.partial(_append, event, prefix, suffix)):
        _append(event, prefix, suffix)
    return event


def audit_record_with_insert(
    instance: models.Model,
    *,
    actor: User | AnonymousUser | str | None,
    action: AuditAction,
    obj: AuditObject = None,
    data: dict[str, Any] | None = None,
    unchanged: Unchanged | None = None,
) -> AuditEvent:
    """Insert `instance` (a new row with no other side effects: no signals, no parents) and append
    its audit event in ONE statement on PostgreSQL.

    Why: a hot path (the gate's decision log) pays per round trip, and a single statement outside a
    transaction is its own transaction: no BEGIN/COMMIT round trips, and the row and its event
    still commit together or not at all. The row is inserted only when the chain head exists
    (`INSERT ... SELECT ... FROM old`), so the first append ever creates the head and runs again
    without a duplicate row. Elsewhere both writes run in one transaction.

    Lock order: every row the two inserts reference (the instance's foreign keys, the event's actor)
    is locked FOR KEY SHARE before the chain head, as each insert's foreign-key check would lock it
    after; a writer that holds such a row and then appends (a token's revoke, a request's evidence
    refresh) is waited for instead of deadlocked with. `unchanged` names, per foreign key, the
    values its row was read with ({"token": {"revoked_at": None}}); checked under that lock, a
    row that changed writes nothing and raises ReferenceChangedError naming the field, so what the
    row says is never logged after a change the chain already records."""
    connection = transaction.get_connection()
    model = type(instance)
    columns: list[str] = []
    values: dict[str, Any] = {}
    for field in model._meta.concrete_fields:
        if field.primary_key and getattr(instance, field.attname) is None:
            continue  # the database numbers the row
        columns.append(str(field.column))
        values[f"row_{len(columns)}"] = field.get_db_prep_save(field.pre_save(instance, True), connection)
    event, prefix, suffix = _event(actor, action, obj, data, None)
    references = _references(instance, event, unchanged or {})
    if connection.vendor != "postgresql":
        with transaction.atomic(savepoint=False):
            _check_unchanged(references)
            instance.save(force_insert=True)
            _append(event, prefix, suffix)
        return event
    placeholders = ", ".join(f"%({name})s" for name in values)
    side = (
        f"row AS (INSERT INTO {connection.ops.quote_name(model._meta.db_table)} "  # noqa: S608 (model names)
        f"({', '.join(connection.ops.quote_name(column) for column in columns)}) SELECT {placeholders} FROM old), "
    )
    refs, refs_params = _refs_sql(references, connection)
    statement = (refs, " CROSS JOIN refs" if refs else "", side)
    if connection.in_atomic_block:
        with transaction.atomic():  # a savepoint: a refused write leaves the caller's transaction usable
            _append(event, prefix, suffix, side=(statement, {**values, **refs_params}), references=references)
    else:
        _append(event, prefix, suffix, side=(statement, {**values, **refs_params}), references=references)
    return event


@dataclass(frozen=True, slots=True)
class _Reference:
    """A row an insert references: its table, key and the values it must still hold."""

    field: str
    model: type[models.Model]
    pk: Any
    unchanged: Mapping[str, Any]


def _references(instance: models.Model, event: AuditEvent, unchanged: Unchanged) -> list[_Reference]:
    """The rows the instance's foreign keys and the event's actor reference, in field order."""
    references = []
    for field in type(instance)._meta.concrete_fields:
        if field.is_relation and (pk := getattr(instance, field.attname)) is not None:
            if not isinstance(field.related_model, type):  # a concrete model, not "self" unresolved
                raise TypeError(f"audit: {field.name} of {type(instance).__name__} names no resolved model")
            references.append(_Reference(field.name, field.related_model, pk, unchanged.get(field.name, {})))
    if event.actor is not None:
        references.append(_Reference("actor", type(event.actor), event.actor.pk, {}))
    unknown = set(unchanged) - {reference.field for reference in references}
    if unknown:
        raise ValueError(f"unchanged names no foreign key with a value: {', '.join(sorted(unknown))}")
    return references


def _refs_sql(references: list[_Reference], connection: Any) -> tuple[str, dict[str, Any]]:
    """The `refs` CTE: each referenced row by primary key, still holding its `unchanged` values,
    locked FOR KEY SHARE (what a foreign-key check takes: a concurrent update of other columns is
    not blocked, a revoke or refresh holding the row FOR UPDATE is waited for, and under READ
    COMMITTED the conditions are checked again on the row as that writer committed it)."""
    if not references:
        return "", {}
    quote = connection.ops.quote_name
    tables, conditions, params = [], [], {}
    for n, reference in enumerate(references, start=1):
        alias, meta = f"r{n}", reference.model._meta
        tables.append(f"{quote(meta.db_table)} {alias}")
        conditions.append(f"{alias}.{quote(meta.pk.column)} = %(ref_{n})s")
        params[f"ref_{n}"] = reference.pk
        for name, value in reference.unchanged.items():
            field = meta.get_field(name)
            if not isinstance(field, models.Field):
                raise ValueError(f"unchanged: {name} is not a column of {meta.label}")
            column = f"{alias}.{quote(field.column)}"
            if value is None:
                conditions.append(f"{column} IS NULL")
            else:
                key = f"ref_{n}_{field.column}"
                conditions.append(f"{column} = %({key})s")
                params[key] = field.get_db_prep_value(value, connection)
    aliases = ", ".join(f"r{n}" for n in range(1, len(references) + 1))
    sql = (
        f"refs AS MATERIALIZED (SELECT 1 AS referenced FROM {', '.join(tables)} "  # noqa: S608 (model names)
        f"WHERE {' AND '.join(conditions)} FOR KEY SHARE OF {aliases}), "
    )
    return sql, params


def _check_unchanged(references: list[_Reference]) -> None:
    """Other databases: the same check by the ORM (the caller's transaction holds the rows)."""
    for reference in references:
        rows = reference.model._default_manager.select_for_update().filter(pk=reference.pk, **reference.unchanged)
        if not rows.exists():
            raise ReferenceChangedError(reference.field)


def _changed_reference(references: list[_Reference]) -> str:
    """Which referenced row no longer holds its values (after the statement wrote nothing)."""
    for reference in references:
        if not reference.model._default_manager.filter(pk=reference.pk, **reference.unchanged).exists():
            return reference.field
    return references[0].field  # changed, then changed back: say which was asked about first


def _append(
    event: AuditEvent,
    prefix: str,
    suffix: str,
    side: tuple[tuple[str, str, str], dict[str, Any]] | None = None,
    references: list[_Reference] | None = None,
) -> None:
    """Lock the chain head, append `event`, fill in its seq, body and hashes (with `side`, the
    caller's own INSERT and the rows it references, in the same statement: audit_record_with_insert)."""
    user = event.actor
    connection = transaction.get_connection()
    if connection.vendor == "postgresql":
        params = {
            "prefix": prefix,
            "suffix": suffix,
            "occurred_at": event.occurred_at,
            "actor_id": user.pk if user else None,
            "actor_name": event.actor_name,
            "action": event.action,
            "object_type": event.object_type,
            "object_id": event.object_id,
            "request_id": event.request_id,
            "data": json.dumps(event.data),
        }
        statement = _PG_APPEND_ALONE
        if side is not None:
            (refs, refs_join, insert), side_params = side
            statement = _PG_APPEND.format(refs=refs, refs_join=refs_join, side=insert)
            params.update(side_params)
        # One statement: atomic by itself, so outside a transaction no BEGIN/COMMIT is needed.
        # Prepared: every write service appends, so its plan is made once per connection.
        row = fetch_one_prepared(statement, params)
        if row is None:  # no head row yet, or a referenced row changed: nothing was written
            _insert_head()  # the statement run again locks it
            row = fetch_one_prepared(statement, params)
        if row is None and references:
            raise ReferenceChangedError(_changed_reference(references))
        if row is None:  # the append's statement returns the row it wrote, or raised
            raise RuntimeError("audit append: the statement returned no row")
        event.pk, event.seq, event.body, event.prev_hash, event.hash = (
            row["id"],
            row["seq"],
            row["body"],
            row["prev_hash"],
            row["hash"],
        )
        return
    with transaction.atomic(savepoint=False):
        head = _lock_head()
        event.seq = head.seq + 1
        event.body = f"{prefix}{event.seq}{suffix}"
        event.prev_hash = head.hash
        event.hash = chain_hash(head.hash, event.body.encode())
        event.save(force_insert=True)
        AuditChainHead.objects.filter(pk=1).update(seq=event.seq, hash=event.hash)


def checkpoint_line(checkpoint: AuditCheckpoint) -> bytes:
    """The JSON Lines form of a checkpoint: the signed body embedded verbatim as the last member."""
    head = json.dumps({"key_id": checkpoint.key_id, "signature": checkpoint.signature}, separators=(",", ":"))
    return head[:-1].encode() + b',"body":' + checkpoint.body.encode() + b"}\n"


class CheckpointRefusedError(ConflictError):
    """The chain since the last checkpoint does not verify: signing it would bless a forgery."""


def audit_checkpoint_create(*, force: bool = False) -> AuditCheckpoint | None:
    """Sign the current head after verifying the chain since the previous checkpoint.

    Skipped (None) when nothing was appended since the last checkpoint. On a mismatch nothing is
    signed: an alert is logged, an `audit.checkpoint_refused` event recorded, and
    CheckpointRefusedError raised.
    """
    signing_key = load_signing_key()
    with transaction.atomic():
        # The head lock keeps appends out while the segment since the last checkpoint is checked.
        head = AuditChainHead.objects.select_for_update().filter(pk=1).first()
        seq, head_hash = (head.seq, head.hash) if head else (0, GENESIS_HASH)
        last = AuditCheckpoint.objects.order_by("-seq", "-id").first()
        if last is not None and last.seq == seq and last.head_hash == head_hash and not force:
            return None
        problem = chain_problem_since_last_checkpoint(head, signing_key.public_key())
        if problem is None:
            signed_at = timezone.now()
            body = canonical_json(
                {"origin": settings.AUDIT_ORIGIN, "seq": seq, "head_hash": head_hash, "time": format_time(signed_at)}
            )
            checkpoint = AuditCheckpoint.objects.create(
                seq=seq,
                head_hash=head_hash,
                origin=settings.AUDIT_ORIGIN,
                signed_at=signed_at,
                body=body.decode(),
                signature=base64.b64encode(signing_key.sign(body)).decode(),
                key_id=key_id(signing_key.public_key()),
            )
            transaction.on_commit(lambda: _publish_checkpoint(checkpoint))
            return checkpoint
    # Outside the head lock: the refusal is recorded on the chain (in the caller's transaction, if any).
    logger.critical(
        "audit checkpoint refused: the chain does not verify since the last checkpoint",
        extra={"problem": problem, "head_seq": seq},
    )
    audit_record(
        actor="system:audit",
        action=AuditAction.AUDIT_CHECKPOINT_REFUSED,
        data={"problem": problem, "head_seq": seq, "head_hash": head_hash},
    )
    raise CheckpointRefusedError(f"checkpoint refused: {problem}", extra={"head_seq": seq})


def _publish_checkpoint(checkpoint: AuditCheckpoint) -> None:
    """Append the checkpoint to a file outside the database, where a DB superuser cannot rewrite it."""
    path = settings.AUDIT_CHECKPOINT_PUBLISH_PATH
    if not path:
        return
    try:
        with open(path, "ab") as handle:
            handle.write(checkpoint_line(checkpoint))
    except OSError:
        logger.exception("could not publish audit checkpoint", extra={"seq": checkpoint.seq})
