"""Offline verifier for audit bundles: needs only the standard library and `cryptography`.

    python -m governance.audit.verify BUNDLE.zip [--public-key KEY.pem] [--json]

Checks the manifest digests, every event hash, gapless seq, fork freedom (each event links to
the one before), every checkpoint signature, and that each checkpoint's head is in the chain.
Exit status: 0 verified, 1 verification failed (the report names the first bad seq), 2 bad usage.

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


@dataclass
class VerifyReport:
    events: int = 0
    checkpoints: int = 0
    head_seq: int = 0
    head_hash: str = GENESIS_HASH
    first_bad_seq: int | None = None
    errors: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.errors

    def fail(self, message: str, seq: int | None = None) -> None:
        self.errors.append(message)
        if seq is not None and (self.first_bad_seq is None or seq < self.first_bad_seq):
            self.first_bad_seq = seq

    def as_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "events": self.events,
            "checkpoints": self.checkpoints,
            "head_seq": self.head_seq,
            "head_hash": self.head_hash,
            "first_bad_seq": self.first_bad_seq,
            "errors": self.errors,
        }


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
) -> VerifyReport:
    report = report or VerifyReport()
    checkpoint_list = list(checkpoints)  # a few per hour: small
    wanted: dict[int, str | None] = {}
    parsed_checkpoints: list[tuple[CheckpointRecord, dict[str, Any]]] = []
    expected_key_id = _key_id(public_key) if public_key else None
    for checkpoint in checkpoint_list:
        report.checkpoints += 1
        try:
            statement = json.loads(checkpoint.body)
            seq = int(statement["seq"])
            str(statement["head_hash"])  # must be present
        except (ValueError, KeyError, TypeError):
            report.fail("checkpoint: body is not a valid checkpoint statement")
            continue
        if public_key is None:
            report.fail(f"checkpoint seq {seq}: no public key to check its signature", seq)
        elif checkpoint.key_id != expected_key_id:
            report.fail(f"checkpoint seq {seq}: signed by key {checkpoint.key_id[:16]}…, not the given key", seq)
        else:
            try:
                public_key.verify(base64.b64decode(checkpoint.signature, validate=True), checkpoint.body)
            except (InvalidSignature, ValueError):
                report.fail(f"checkpoint seq {seq}: signature is invalid (forged or altered checkpoint)", seq)
                continue
        parsed_checkpoints.append((checkpoint, statement))
        wanted[seq] = None

    previous_hash = GENESIS_HASH
    expected_seq = 1
    if 0 in wanted:
        wanted[0] = GENESIS_HASH
    chain_broken = False
    for event in events:
        if chain_broken:
            report.events += 1
            continue
        report.events += 1
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

    for _checkpoint, statement in parsed_checkpoints:
        seq = int(statement["seq"])
        if chain_broken and seq >= (report.first_bad_seq or 0):
            continue  # already reported; the chain past the break cannot be compared
        if seq > report.head_seq:
            report.fail(
                f"checkpoint seq {seq}: chain ends at seq {report.head_seq} (events after it were removed)",
                report.head_seq + 1,
            )
        elif wanted.get(seq) != statement["head_hash"]:
            report.fail(
                f"checkpoint seq {seq}: signed head hash differs from the chain (history rewritten at or before it)",
                seq,
            )
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


def _read_checkpoints(stream: IO[bytes], report: VerifyReport) -> list[CheckpointRecord]:
    records = []
    for number, line in enumerate(stream, start=1):
        try:
            envelope, body = split_line(line)
            records.append(CheckpointRecord(str(envelope["key_id"]), str(envelope["signature"]), body))
        except (ValueError, KeyError, TypeError):
            report.fail(f"{CHECKPOINTS_FILE} line {number}: not a valid checkpoint line")
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


def verify_bundle(path: str, public_key_pem: bytes | None = None) -> VerifyReport:
    report = VerifyReport()
    with zipfile.ZipFile(path) as bundle:
        names = set(bundle.namelist())
        missing = {EVENTS_FILE, CHECKPOINTS_FILE, PUBLIC_KEY_FILE, MANIFEST_FILE} - names
        if missing:
            report.fail(f"bundle lacks {', '.join(sorted(missing))}")
            return report
        manifest_files: dict[str, str] = json.loads(bundle.read(MANIFEST_FILE)).get("files", {})
        for name, expected in sorted(manifest_files.items()):
            if name not in names:
                report.fail(f"manifest lists {name}, which the bundle lacks")
            elif name != EVENTS_FILE and _sha256_member(bundle, name) != expected:
                report.fail(f"{name}: SHA-256 differs from the manifest (file altered)")
        key = load_public_key(public_key_pem or bundle.read(PUBLIC_KEY_FILE))
        with bundle.open(CHECKPOINTS_FILE) as handle:
            checkpoints = _read_checkpoints(handle, report)
        with bundle.open(EVENTS_FILE) as handle:
            reader = _HashingReader(handle)
            verify_chain(_iter_events(reader, report), checkpoints, key, report)  # type: ignore[arg-type]
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
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    args = parser.parse_args(argv)
    try:
        key_pem = open(args.public_key, "rb").read() if args.public_key else None  # noqa: SIM115
        report = verify_bundle(args.bundle, key_pem)
    except (OSError, zipfile.BadZipFile, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(report.as_dict(), indent=2))
    elif report.ok:
        print(
            f"OK: {report.events} events, {report.checkpoints} checkpoints, head seq {report.head_seq} {report.head_hash}"
        )
        if not args.public_key:
            print("note: checked against the bundle's own public key; pass --public-key for an independent check")
    else:
        print(f"FAILED: first bad seq {report.first_bad_seq}")
        for error in report.errors:
            print(f"  - {error}")
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
