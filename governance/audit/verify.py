"""Offline verifier for audit bundles: needs only the standard library and `cryptography`.

    python -m governance.audit.verify BUNDLE.zip --public-key KEY.pem --checkpoints PUBLISHED.jsonl [--json]

Checks the manifest digests, every event hash, gapless seq, fork freedom (each event links to
the one before), every checkpoint signature, and that each checkpoint's head is in the chain.

Checkpoints inside the bundle come from the database, which a superuser can rewrite together
with the chain (and the export signs a fresh one over whatever it finds). Only checkpoints
published outside the database (`--checkpoints`, the service's published log) anchor the
chain: events after the last trusted checkpoint are reported as UNANCHORED.
Exit status: 0 verified and anchored, 1 verification failed (the report names the first bad
seq), 2 bad usage, 3 verified but events after the last trusted checkpoint are unanchored.

The same checks run against the live database through `manage.py audit_verify`.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import re
import sys
import zipfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import IO, Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from governance.audit.chain import GENESIS_HASH, chain_hash

BODY_MARKER = b',"body":'
EVENTS_FILE = "events.jsonl"
CHECKPOINTS_FILE = "checkpoints.jsonl"
PUBLIC_KEY_FILE = "audit-public-key.pem"
MANIFEST_FILE = "manifest.json"


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


EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_UNANCHORED = 3


@dataclass
class VerifyReport:
    events: int = 0
    checkpoints: int = 0
    trusted_checkpoints: int = 0
    head_seq: int = 0
    head_hash: str = GENESIS_HASH
    anchored_seq: int = 0  # the highest seq a trusted checkpoint vouches for
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
        return "\n".join(lines + [f"warning: {warning}" for warning in self.warnings])


# The envelope as the exporter writes it; anything else falls back to the JSON parser.
_EVENT_LINE = re.compile(rb'\{"seq":(\d+),"prev_hash":"([0-9a-f]{64})","hash":"([0-9a-f]{64})","body":')


def split_line(line: bytes) -> tuple[dict[str, Any], bytes]:
    """Split an exported line into its envelope fields and the verbatim body bytes.

    Lines are written as `{<envelope fields>,"body":<body>}` with the body last, so the body's
    exact bytes are everything between the first `,"body":` and the closing brace.
    """
    line = line.rstrip(b"\n")
    cut = line.find(BODY_MARKER)
    if cut < 0 or not line.endswith(b"}"):
        raise ValueError("line has no body member")
    envelope = json.loads(line[:cut] + b"}")
    return envelope, line[cut + len(BODY_MARKER) : -1]


def verify_chain(
    events: Iterable[EventRecord],
    checkpoints: Iterable[CheckpointRecord],
    public_key: Ed25519PublicKey | None,
    report: VerifyReport | None = None,
    trusted: Iterable[CheckpointRecord] | None = None,
) -> VerifyReport:
    """Check the chain against every checkpoint; only `trusted` ones (published outside the
    database) anchor it. `trusted=None` means none were given: every event is unanchored."""
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

    reported: set[tuple[int, str]] = set()
    for statement, is_trusted in statements:
        seq = int(statement["seq"])
        where = "trusted checkpoint" if is_trusted else "checkpoint"
        if chain_broken and seq >= (report.first_bad_seq or 0):
            continue  # already reported; the chain past the break cannot be compared
        if seq > report.head_seq:
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
    if trusted is not None and report.trusted_checkpoints == 0:
        report.warnings.append("the trusted checkpoint log holds no checkpoint: nothing anchors this chain")
    return report


def _key_id(public_key: Ed25519PublicKey) -> str:
    raw = public_key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return hashlib.sha256(raw).hexdigest()


def load_public_key(pem: bytes) -> Ed25519PublicKey:
    key = serialization.load_pem_public_key(pem)
    if not isinstance(key, Ed25519PublicKey):
        raise ValueError("the public key is not an Ed25519 key")
    return key


def _iter_lines(stream: IO[bytes], chunk_size: int = 4 << 20) -> Iterator[bytes]:
    """Lines of a (decompressing) stream, read in large chunks: much faster than line-by-line reads."""
    pending = b""
    while chunk := stream.read(chunk_size):
        lines = (pending + chunk).split(b"\n")
        pending = lines.pop()
        yield from lines
    if pending:
        yield pending


def _iter_events(stream: IO[bytes], report: VerifyReport) -> Iterator[EventRecord]:
    match_line = _EVENT_LINE.match
    for number, line in enumerate(_iter_lines(stream), start=1):
        found = match_line(line)
        if found is not None and line.endswith(b"}"):
            yield EventRecord(int(found[1]), found[2].decode(), found[3].decode(), line[found.end() : -1])
            continue
        try:
            envelope, body = split_line(line)
            yield EventRecord(int(envelope["seq"]), str(envelope["prev_hash"]), str(envelope["hash"]), body)
        except (ValueError, KeyError, TypeError):
            report.fail(f"{EVENTS_FILE} line {number}: not a valid event line")
            return


def read_checkpoints(
    stream: Iterable[bytes], report: VerifyReport, source: str = CHECKPOINTS_FILE
) -> list[CheckpointRecord]:
    """Checkpoint lines (bundle member or the published log); blank lines are skipped."""
    records = []
    for number, line in enumerate(stream, start=1):
        if not line.strip():
            continue
        try:
            envelope, body = split_line(line)
            records.append(CheckpointRecord(str(envelope["key_id"]), str(envelope["signature"]), body))
        except (ValueError, KeyError, TypeError):
            report.fail(f"{source} line {number}: not a valid checkpoint line")
    return records


def _sha256_member(bundle: zipfile.ZipFile, name: str) -> str:
    digest = hashlib.sha256()
    with bundle.open(name) as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


class _HashingReader:
    """Reads a stream while hashing it, so events.jsonl is decompressed once for both checks."""

    def __init__(self, stream: IO[bytes]) -> None:
        self.stream = stream
        self.digest = hashlib.sha256()

    def read(self, size: int = -1) -> bytes:
        data = self.stream.read(size)
        self.digest.update(data)
        return data


def verify_bundle(
    path: str, public_key_pem: bytes | None = None, trusted_checkpoints: bytes | None = None
) -> VerifyReport:
    """`trusted_checkpoints`: the published checkpoint log's bytes (None: not given, nothing anchored)."""
    report = VerifyReport()
    trusted = (
        read_checkpoints(trusted_checkpoints.splitlines(keepends=True), report, "trusted checkpoints")
        if trusted_checkpoints is not None
        else None
    )
    with zipfile.ZipFile(path) as bundle:
        names = set(bundle.namelist())
        missing = {EVENTS_FILE, CHECKPOINTS_FILE, PUBLIC_KEY_FILE, MANIFEST_FILE} - names
        if missing:
            report.fail(f"bundle lacks {', '.join(sorted(missing))}")
            return report
        manifest = json.loads(bundle.read(MANIFEST_FILE))
        manifest_files: dict[str, str] = manifest.get("files", {})
        # What the exporting service found wrong in its own database while writing the bundle.
        if manifest.get("export_checkpoint_refused"):
            report.fail(f"the exporting service refused to sign a checkpoint: {manifest['export_checkpoint_refused']}")
        edited = manifest.get("display_column_mismatches") or []
        if edited:
            report.fail(
                f"the exporting service found display columns edited in its database at seq {edited[:10]}",
                int(edited[0]),
            )
        for name, expected in sorted(manifest_files.items()):
            if name not in names:
                report.fail(f"manifest lists {name}, which the bundle lacks")
            elif name != EVENTS_FILE and _sha256_member(bundle, name) != expected:
                report.fail(f"{name}: SHA-256 differs from the manifest (file altered)")
        key = load_public_key(public_key_pem or bundle.read(PUBLIC_KEY_FILE))
        with bundle.open(CHECKPOINTS_FILE) as handle:
            checkpoints = read_checkpoints(handle, report)
        with bundle.open(EVENTS_FILE) as handle:
            reader = _HashingReader(handle)
            verify_chain(_iter_events(reader, report), checkpoints, key, report, trusted)  # type: ignore[arg-type]
            while reader.read(4 << 20):  # the rest, if the chain check stopped early
                pass
        if EVENTS_FILE in manifest_files and reader.digest.hexdigest() != manifest_files[EVENTS_FILE]:
            report.fail(f"{EVENTS_FILE}: SHA-256 differs from the manifest (file altered)")
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m governance.audit.verify", description=__doc__.split("\n")[0])
    parser.add_argument("bundle", help="the zip made by an audit export")
    parser.add_argument(
        "--public-key",
        help="PEM of the service's checkpoint key obtained independently (else the bundle's own copy is used)",
    )
    parser.add_argument(
        "--checkpoints",
        help="the service's published checkpoint log (JSON Lines, kept outside the database): anchors the chain",
    )
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    args = parser.parse_args(argv)
    try:
        key_pem = open(args.public_key, "rb").read() if args.public_key else None  # noqa: SIM115
        published = open(args.checkpoints, "rb").read() if args.checkpoints else None  # noqa: SIM115
        report = verify_bundle(args.bundle, key_pem, published)
    except (OSError, zipfile.BadZipFile, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if not args.public_key:
        report.warnings.append(
            "checked against the bundle's own public key; pass --public-key for an independent check"
        )
    if args.json:
        print(json.dumps(report.as_dict(), indent=2))
    else:
        print(report.summary())
    return report.exit_code


if __name__ == "__main__":
    sys.exit(main())
