"""Reading an audit bundle (the zip an export writes) and the published checkpoint log: the
manifest digests, the event and checkpoint lines, then the chain checks over what was read.
Standard library and `cryptography` only."""

from __future__ import annotations

import hashlib
import json
import re
import zipfile
from collections.abc import Iterable, Iterator
from typing import IO, Any

from governance.audit.verify.checks import CheckpointRecord, EventRecord, VerifyReport, load_public_key, verify_chain

# The bundle's members, as the exporter names them.
EVENTS_FILE = "events.jsonl"
CHECKPOINTS_FILE = "checkpoints.jsonl"
PUBLIC_KEY_FILE = "audit-public-key.pem"
MANIFEST_FILE = "manifest.json"

BODY_MARKER = b',"body":'
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
            verify_chain(_iter_events(reader, report), checkpoints, key, report, trusted, prefix=True)  # type: ignore[arg-type]
            while reader.read(4 << 20):  # the rest, if the chain check stopped early
                pass
        if EVENTS_FILE in manifest_files and reader.digest.hexdigest() != manifest_files[EVENTS_FILE]:
            report.fail(f"{EVENTS_FILE}: SHA-256 differs from the manifest (file altered)")
    return report
