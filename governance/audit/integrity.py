"""Checks of the live chain against checkpoints from outside the database.

Shared by `manage.py audit_verify` (the whole chain) and checkpoint signing (only the events
since the last checkpoint, so a new checkpoint never blesses a rewritten or forged head).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from django.conf import settings

from governance.audit.actions import AuditAction
from governance.audit.chain import GENESIS_HASH, chain_hash
from governance.audit.models import AuditChainHead, AuditEvent
from governance.audit.selectors import audit_checkpoints
from governance.audit.verify import CheckpointRecord, EventRecord, VerifyReport, read_checkpoints, verify_chain

# `audit_verify`'s exit status for a database that ends before the published checkpoints do: a
# restore from a backup older than the last published checkpoint (0, 1 and 3 as the verifier's).
EXIT_BEHIND = 4

# Checkpoint lines are a few hundred bytes: the last one is always inside this tail.
_TAIL_BYTES = 64 << 10

EVENT_COLUMNS = (
    "seq",
    "prev_hash",
    "hash",
    "body",
    "occurred_at",
    "actor_name",
    "action",
    "object_type",
    "object_id",
    "request_id",
    "data",
)


def published_log_path() -> Path | None:
    path = settings.AUDIT_CHECKPOINT_PUBLISH_PATH
    return Path(path) if path else None


def read_published_checkpoints(path: Path | None, report: VerifyReport) -> list[CheckpointRecord] | None:
    """Every checkpoint of the published log; None when there is no log to read (nothing anchors)."""
    if path is None:
        return None
    try:
        with path.open("rb") as handle:
            return read_checkpoints(handle, report, f"published log {path.name}")
    except FileNotFoundError:
        report.warnings.append(f"published checkpoint log {path} does not exist")
        return []


def last_published_statement(public_key: Ed25519PublicKey) -> dict[str, Any] | None:
    """The last checkpoint of the published log whose signature checks out with our key."""
    path = published_log_path()
    if path is None or not path.exists():
        return None
    with path.open("rb") as handle:
        handle.seek(0, 2)
        size = handle.tell()
        handle.seek(max(size - _TAIL_BYTES, 0))
        lines = handle.read().splitlines(keepends=True)
    for record in reversed(read_checkpoints(lines[1:] if size > _TAIL_BYTES else lines, VerifyReport())):
        statement = _verified_statement(record, public_key)
        if statement is not None:
            return statement
    return None


def _verified_statement(record: CheckpointRecord, public_key: Ed25519PublicKey) -> dict[str, Any] | None:
    import base64

    try:
        public_key.verify(base64.b64decode(record.signature, validate=True), record.body)
        statement: dict[str, Any] = json.loads(record.body)
        int(statement["seq"]), str(statement["head_hash"])
    except (InvalidSignature, ValueError, KeyError, TypeError):
        return None
    return statement


def display_mismatches(row: tuple[Any, ...]) -> list[str]:
    """The displayed columns an event's hashed body contradicts (a superuser edited the row)."""
    from governance.audit.services import format_time

    _seq, _prev, _hash, body_text, occurred_at, actor_name, action, object_type, object_id, request_id, data = row
    try:
        body = json.loads(body_text)
    except ValueError:
        return ["body"]  # the hash check reports it
    obj = body.get("object") or {}
    expected = {
        "occurred_at": body.get("occurred_at"),
        "actor_name": body.get("actor"),
        "action": body.get("action"),
        "object_type": obj.get("type", ""),
        "object_id": obj.get("id", ""),
        "request_id": body.get("request_id"),
        "data": body.get("data"),
    }
    actual = {
        "occurred_at": format_time(occurred_at),
        "actor_name": actor_name,
        "action": AuditAction(action).label if action in AuditAction.values else action,
        "object_type": object_type,
        "object_id": object_id,
        "request_id": request_id,
        "data": data,
    }
    return [name for name in expected if expected[name] != actual[name]]


def _live_events(report: VerifyReport) -> Iterator[EventRecord]:
    rows = AuditEvent.objects.order_by("seq").values_list(*EVENT_COLUMNS)
    for row in rows.iterator(chunk_size=5000):
        changed = display_mismatches(row)
        if changed:
            report.fail(
                f"seq {row[0]}: stored {', '.join(changed)} differ from the hashed body (display columns edited)",
                row[0],
            )
        yield EventRecord(row[0], row[1], row[2], row[3].encode())


@dataclass
class LiveVerifyReport(VerifyReport):
    """The verifier's report on the live chain, plus one verdict only the database can give:
    `behind`. The events present verify and agree with every published checkpoint up to the
    last of them, but the published log vouches for a longer chain: the database was restored
    from a backup taken before the last checkpoint was published (or its tail was removed; the
    checks cannot tell which, the backup's time can). Events missing, not events altered."""

    missing_from_seq: int | None = None  # the first seq the published log knows and the database lacks
    published_head_seq: int = 0  # the highest seq a published checkpoint signed
    published_head_time: str | None = None  # when that checkpoint was signed
    last_event_time: str | None = None  # when the last event the database holds happened
    behind_checkpoints: list[int] = field(default_factory=list)

    @property
    def status(self) -> str:
        if self.errors:
            return "failed"
        return "behind" if self.missing_from_seq is not None else super().status

    @property
    def exit_code(self) -> int:
        return EXIT_BEHIND if self.status == "behind" else super().exit_code

    def as_dict(self) -> dict[str, Any]:
        result = super().as_dict()
        result["status"] = self.status
        if self.missing_from_seq is not None:
            result["missing"] = {
                "from_seq": self.missing_from_seq,
                "to_seq": self.published_head_seq,
                "events": self.published_head_seq - self.missing_from_seq + 1,
                "last_event_time": self.last_event_time,
                "published_head_time": self.published_head_time,
                "checkpoints_beyond": self.behind_checkpoints,
            }
        return result

    def summary(self) -> str:
        if self.status != "behind":
            return super().summary()
        lost = self.published_head_seq - self.missing_from_seq + 1 if self.missing_from_seq else 0
        lines = [
            f"BEHIND: the database ends at seq {self.head_seq} ({self.last_event_time or 'no events'}); the published "
            f"checkpoints vouch for seq {self.published_head_seq} ({self.published_head_time}). At least {lost} events "
            f"from seq {self.missing_from_seq} on are missing: a restore from a backup older than the last published "
            "checkpoint (or a removed tail). Missing, not altered: every event present verifies, and those up to seq "
            f"{self.anchored_seq} match the published checkpoints.",
        ]
        if self.unanchored_events:
            lines.append(
                f"  {self.unanchored_events} events after seq {self.anchored_seq} are covered by no trusted checkpoint "
                "that reaches them (they could have been rewritten)"
            )
        return "\n".join(lines + [f"warning: {warning}" for warning in self.warnings])


def verify_live_chain(
    public_key: Ed25519PublicKey, trusted_path: Path | None = None, *, restored: bool = False
) -> LiveVerifyReport:
    """The whole live chain: hashes, links, display columns, the head row, every checkpoint;
    anchored by the published checkpoint log (or `trusted_path`).

    A chain that ends before the published checkpoints do fails: a superuser who removed the
    tail leaves exactly that. `restored=True` is the operator saying the database was restored
    from a backup (the restore drill says it): then, when everything present verifies, the
    verdict is `behind` with what was lost, instead of failed. The checks alone cannot tell a
    restore from a removed tail; the person who restored can."""
    report = LiveVerifyReport()
    trusted = read_published_checkpoints(trusted_path or published_log_path(), report)
    checkpoints = [CheckpointRecord(c.key_id, c.signature, c.body.encode()) for c in audit_checkpoints()]
    last_event = AuditEvent.objects.order_by("-seq").values_list("seq", "occurred_at").first()
    last_seq = last_event[0] if last_event else 0
    beyond: list[dict[str, Any]] = []
    within: list[CheckpointRecord] = []
    for record in trusted or ():
        # Only validly signed checkpoints past the last event count as evidence of missing events.
        statement = _verified_statement(record, public_key)
        if statement is not None and int(statement["seq"]) > last_seq:
            beyond.append(statement)
        else:
            within.append(record)
    if restored and trusted is not None:
        # Checkpoints past the database's last event cannot be compared with it; the rest anchor as usual.
        trusted = within
    verify_chain(_live_events(report), checkpoints, public_key, report, trusted)
    if beyond and restored and not report.errors:
        newest = max(beyond, key=lambda statement: int(statement["seq"]))
        report.missing_from_seq = report.head_seq + 1
        report.published_head_seq = int(newest["seq"])
        report.published_head_time = str(newest.get("time") or "") or None
        report.last_event_time = _format_time(last_event[1]) if last_event else None
        report.behind_checkpoints = sorted({int(statement["seq"]) for statement in beyond})
        report.trusted_checkpoints += len(beyond)
    elif beyond and not restored:
        report.warnings.append(
            f"published checkpoints reach seq {max(int(s['seq']) for s in beyond)}, past this database's last event "
            f"(seq {last_seq}): if it was restored from a backup, `audit_verify --restored` reports the events the "
            "restore lost instead of failing"
        )
    head = AuditChainHead.objects.filter(pk=1).first()
    head_seq, head_hash = (head.seq, head.hash) if head else (0, GENESIS_HASH)
    if report.first_bad_seq is None and (head_seq, head_hash) != (report.head_seq, report.head_hash):
        report.fail(
            f"chain head row says seq {head_seq} {head_hash[:16]}…, the last event is seq {report.head_seq} "
            f"{report.head_hash[:16]}… (head forged or events removed)",
            min(head_seq, report.head_seq) + 1,
        )
    return report


def _format_time(moment: Any) -> str:
    from governance.audit.services import format_time

    return format_time(moment)


def chain_problem_since_last_checkpoint(head: AuditChainHead | None, public_key: Ed25519PublicKey) -> str | None:
    """Why the chain may not be signed now, or None. Walks only the events since the earliest of
    the last published and the last stored checkpoint, so signing stays cheap."""
    anchors: list[tuple[str, int, str]] = []
    published = last_published_statement(public_key)
    if published is not None:
        anchors.append(("published checkpoint", int(published["seq"]), str(published["head_hash"])))
    stored = audit_checkpoints().last()
    if stored is not None:
        statement = _verified_statement(
            CheckpointRecord(stored.key_id, stored.signature, stored.body.encode()), public_key
        )
        if statement is None:
            return f"stored checkpoint seq {stored.seq} does not carry a valid signature of this key"
        anchors.append(("stored checkpoint", int(statement["seq"]), str(statement["head_hash"])))
    head_seq, head_hash = (head.seq, head.hash) if head else (0, GENESIS_HASH)
    start = min((seq for _, seq, _ in anchors), default=0)
    for name, seq, _signed_hash in anchors:
        if seq > head_seq:
            return f"{name} seq {seq} is beyond the chain head seq {head_seq} (events removed)"
    expected = {seq: (name, signed_hash) for name, seq, signed_hash in anchors}
    # Before the first event walked, only the anchor's signed hash is known (checked below).
    previous_hash: str | None = GENESIS_HASH if start == 0 else None
    last_seq, last_hash = max(start - 1, 0), GENESIS_HASH
    rows = AuditEvent.objects.filter(seq__gte=max(start, 1)).order_by("seq").values_list(*EVENT_COLUMNS)
    for row in rows.iterator(chunk_size=2000):
        seq, prev_hash, event_hash, body = row[0], row[1], row[2], row[3]
        if seq != last_seq + 1 and start > 0 and last_seq == start - 1:
            return f"seq {start}, which the {expected[start][0]} signed, is missing (events removed)"
        if seq != last_seq + 1:
            return f"seq {last_seq + 1} is missing"
        if previous_hash is not None and prev_hash != previous_hash:
            return f"seq {seq} does not link to seq {seq - 1}"
        if not body.endswith(f',"seq":{seq},"v":1}}') or chain_hash(prev_hash, body.encode()) != event_hash:
            return f"seq {seq}: hash mismatch (event altered)"
        changed = display_mismatches(row)
        if changed:
            return f"seq {seq}: stored {', '.join(changed)} differ from the hashed body"
        if seq in expected and expected[seq][1] != event_hash:
            return f"{expected[seq][0]} seq {seq} signed a different head hash (history rewritten)"
        previous_hash, last_seq, last_hash = event_hash, seq, event_hash
    if start > 0 and last_seq < start:
        return f"seq {start}, which the {expected[start][0]} signed, is missing (events removed)"
    if 0 in expected and expected[0][1] != GENESIS_HASH:
        return "a checkpoint at seq 0 signed a head hash other than genesis"
    if (last_seq, last_hash) != (head_seq, head_hash):
        return (
            f"chain head row says seq {head_seq} {head_hash[:16]}…, the last event is seq {last_seq} "
            f"{last_hash[:16]}… (head forged or events removed)"
        )
    return None
