"""The chain checks, on records already read: every event hash, gapless seq, fork freedom (each
event links to the one before), every checkpoint signature, and that each checkpoint's head is in
the chain. Only checkpoints published outside the database (`trusted`) anchor the chain.
Standard library and `cryptography` only."""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from governance.audit.chain import GENESIS_HASH, chain_hash

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_UNANCHORED = 3


@dataclass(frozen=True, slots=True)
class EventRecord:
    seq: int
    prev_hash: str
    hash: str
    body: bytes


@dataclass(frozen=True, slots=True)
class CheckpointRecord:
    key_id: str
    signature: str
    body: bytes


@dataclass
class VerifyReport:
    events: int = 0
    checkpoints: int = 0
    trusted_checkpoints: int = 0
    head_seq: int = 0
    head_hash: str = GENESIS_HASH
    anchored_seq: int = 0  # the highest seq a trusted checkpoint vouches for
    # A bundle is a prefix of the chain: the published checkpoints signed after it was exported.
    published_beyond_head: list[int] = field(default_factory=list)
    exported_at: str | None = None  # the latest time the bundle's own signed checkpoints state
    first_bad_seq: int | None = None
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.errors

    @property
    def unanchored_events(self) -> int:
        return max(self.head_seq - self.anchored_seq, 0)

    @property
    def status(self) -> str:
        if self.errors:
            return "failed"
        return "unanchored" if self.unanchored_events else "ok"

    @property
    def exit_code(self) -> int:
        return {"failed": EXIT_FAILED, "unanchored": EXIT_UNANCHORED}.get(self.status, EXIT_OK)

    def fail(self, message: str, seq: int | None = None) -> None:
        self.errors.append(message)
        if seq is not None and (self.first_bad_seq is None or seq < self.first_bad_seq):
            self.first_bad_seq = seq

    def as_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "status": self.status,
            "events": self.events,
            "checkpoints": self.checkpoints,
            "trusted_checkpoints": self.trusted_checkpoints,
            "head_seq": self.head_seq,
            "head_hash": self.head_hash,
            "anchored_seq": self.anchored_seq,
            "published_beyond_head": self.published_beyond_head,
            "exported_at": self.exported_at,
            "unanchored_events": self.unanchored_events,
            "first_bad_seq": self.first_bad_seq,
            "errors": self.errors,
            "warnings": self.warnings,
        }

    def summary(self) -> str:
        """The human-readable verdict; UNANCHORED is never printed as OK."""
        if self.errors:
            lines = [f"FAILED: first bad seq {self.first_bad_seq}", *(f"  - {error}" for error in self.errors)]
        elif self.unanchored_events:
            lines = [
                f"UNANCHORED: chain intact ({self.events} events, head seq {self.head_seq} {self.head_hash}), but "
                f"{self.unanchored_events} events after seq {self.anchored_seq} are covered by no trusted checkpoint"
            ]
        else:
            lines = [
                f"OK: {self.events} events, {self.checkpoints + self.trusted_checkpoints} checkpoints, "
                f"anchored to seq {self.anchored_seq}, head seq {self.head_seq} {self.head_hash}"
            ]
        if not self.errors and self.published_beyond_head:
            lines.append(self._beyond_note())
        return "\n".join(lines + [f"warning: {warning}" for warning in self.warnings])

    def _beyond_note(self) -> str:
        beyond = self.published_beyond_head
        tail = "events appended after this bundle was exported; a later bundle covers them"
        if len(beyond) == 1:
            return f"note: published checkpoint seq {beyond[0]} lies beyond this bundle's head seq {self.head_seq} ({tail})"
        return (
            f"note: {len(beyond)} published checkpoints (seq {beyond[0]} to {beyond[-1]}) lie beyond this bundle's "
            f"head seq {self.head_seq} ({tail})"
        )


def verify_chain(
    events: Iterable[EventRecord],
    checkpoints: Iterable[CheckpointRecord],
    public_key: Ed25519PublicKey | None,
    report: VerifyReport | None = None,
    trusted: Iterable[CheckpointRecord] | None = None,
    prefix: bool = False,
) -> VerifyReport:
    """Check the chain against every checkpoint; only `trusted` ones (published outside the
    database) anchor it. `trusted=None` means none were given: every event is unanchored.

    `prefix`: the events are a bundle, a prefix of the chain cut at export time, so a published
    checkpoint beyond its head is listed, not failed, unless the bundle's own signed checkpoints
    are later than it: the service had then already signed that seq, so the bundle was cut.
    Without `prefix` (the live database holds the whole chain) any checkpoint beyond the head
    means events were removed."""
    report = report or VerifyReport()
    expected_key_id = _key_id(public_key) if public_key else None
    statements: list[tuple[dict[str, Any], bool]] = []  # (statement, trusted)
    sources = [(checkpoint, False) for checkpoint in checkpoints]
    sources += [(checkpoint, True) for checkpoint in trusted or ()]
    if trusted is None:
        report.warnings.append(
            "no trusted checkpoints given (the published checkpoint log): nothing anchors this chain"
        )
    for checkpoint, is_trusted in sources:
        where = "trusted checkpoint" if is_trusted else "checkpoint"
        if is_trusted:
            report.trusted_checkpoints += 1
        else:
            report.checkpoints += 1
        try:
            statement = json.loads(checkpoint.body)
            seq = int(statement["seq"])
            str(statement["head_hash"])  # must be present
        except (ValueError, KeyError, TypeError):
            report.fail(f"{where}: body is not a valid checkpoint statement")
            continue
        if public_key is None:
            report.fail(f"{where} seq {seq}: no public key to check its signature", seq)
            continue
        if checkpoint.key_id != expected_key_id:
            report.fail(f"{where} seq {seq}: signed by key {checkpoint.key_id[:16]}…, not the given key", seq)
            continue
        try:
            public_key.verify(base64.b64decode(checkpoint.signature, validate=True), checkpoint.body)
        except (InvalidSignature, ValueError):
            report.fail(f"{where} seq {seq}: signature is invalid (forged or altered checkpoint)", seq)
            continue
        statements.append((statement, is_trusted))

    wanted: dict[int, str | None] = {int(statement["seq"]): None for statement, _ in statements}
    if 0 in wanted:
        wanted[0] = GENESIS_HASH
    previous_hash = GENESIS_HASH
    expected_seq = 1
    chain_broken = False
    for event in events:
        report.events += 1
        if chain_broken:
            continue
        if event.seq != expected_seq:
            kind = "gap" if event.seq > expected_seq else "duplicate or out of order"
            report.fail(f"seq {expected_seq}: expected next, found {event.seq} ({kind})", expected_seq)
            chain_broken = True
            continue
        if event.prev_hash != previous_hash:
            report.fail(f"seq {event.seq}: prev_hash does not link to seq {event.seq - 1} (fork or splice)", event.seq)
            chain_broken = True
            continue
        # Canonical bodies end with `"seq":N,"v":1}` (keys sort last), binding the body to its position.
        if not event.body.endswith(b',"seq":%d,"v":1}' % event.seq):
            report.fail(f"seq {event.seq}: body does not carry this seq", event.seq)
            chain_broken = True
            continue
        if chain_hash(previous_hash, event.body) != event.hash:
            report.fail(f"seq {event.seq}: hash mismatch (event body or hash altered)", event.seq)
            chain_broken = True
            continue
        if event.seq in wanted:
            wanted[event.seq] = event.hash
        previous_hash = event.hash
        report.head_seq = event.seq
        report.head_hash = event.hash
        expected_seq += 1

    if prefix:
        signed_times = [
            (moment, str(statement["time"]))
            for statement, is_trusted in statements
            if not is_trusted and (moment := _signed_time(statement.get("time"))) is not None
        ]
        report.exported_at = max(signed_times)[1] if signed_times else None
    reported: set[tuple[int, str]] = set()
    for statement, is_trusted in statements:
        seq = int(statement["seq"])
        where = "trusted checkpoint" if is_trusted else "checkpoint"
        if chain_broken and seq >= (report.first_bad_seq or 0):
            continue  # already reported; the chain past the break cannot be compared
        if seq > report.head_seq and prefix and is_trusted:
            signed = _signed_time(statement.get("time"))
            exported = _signed_time(report.exported_at)
            if signed is not None and exported is not None and signed < exported:
                report.fail(
                    f"the bundle was signed at {report.exported_at}, after published checkpoint seq {seq} "
                    f"(signed at {statement['time']}), yet ends at seq {report.head_seq}: it does not reach a seq the "
                    "service had already signed (events cut)",
                    report.head_seq + 1,
                )
            elif seq not in report.published_beyond_head:
                report.published_beyond_head.append(seq)
        elif seq > report.head_seq:
            if (seq, "ends") not in reported:
                report.fail(
                    f"{where} seq {seq}: chain ends at seq {report.head_seq} (events after it were removed)",
                    report.head_seq + 1,
                )
                reported.add((seq, "ends"))
        elif wanted.get(seq) != statement["head_hash"]:
            if (seq, "differs") not in reported:
                report.fail(
                    f"{where} seq {seq}: signed head hash differs from the chain (history rewritten at or before it)",
                    seq,
                )
                reported.add((seq, "differs"))
        elif is_trusted:
            report.anchored_seq = max(report.anchored_seq, seq)
    report.published_beyond_head.sort()
    if trusted is not None and report.trusted_checkpoints == 0:
        report.warnings.append("the trusted checkpoint log holds no checkpoint: nothing anchors this chain")
    return report


def _signed_time(text: object) -> datetime | None:
    """A checkpoint's signed `time` (UTC), None when absent or unreadable (then no order is claimed)."""
    if not isinstance(text, str):
        return None
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _key_id(public_key: Ed25519PublicKey) -> str:
    raw = public_key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return hashlib.sha256(raw).hexdigest()


def load_public_key(pem: bytes) -> Ed25519PublicKey:
    key = serialization.load_pem_public_key(pem)
    if not isinstance(key, Ed25519PublicKey):
        raise ValueError("the public key is not an Ed25519 key")
    return key
