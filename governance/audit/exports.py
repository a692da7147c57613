"""Streaming exports: JSON Lines (body verbatim), CSV, and the verifiable bundle (zip).

Rows are read with server-side cursors in chunks, so memory stays flat whatever the size.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import zipfile
from collections.abc import Iterable, Iterator
from typing import IO, cast

from django.db.models import QuerySet
from django.utils import timezone

from governance.audit.keys import load_signing_key, public_key_pem
from governance.audit.models import AuditEvent
from governance.audit.selectors import audit_checkpoints
from governance.audit.services import checkpoint_line, format_time
from governance.audit.signals import bundle_files
from governance.audit.verify import CHECKPOINTS_FILE, EVENTS_FILE, MANIFEST_FILE, PUBLIC_KEY_FILE

CHUNK_ROWS = 2000

CSV_COLUMNS = ["seq", "occurred_at", "actor", "action", "object_type", "object_id", "request_id", "data", "hash"]


def event_line(seq: int, prev_hash: str, event_hash: str, body: str) -> bytes:
    # The body goes last and verbatim: the verifier slices its exact bytes back out (verify.split_line).
    return b'{"seq":%d,"prev_hash":"%s","hash":"%s","body":%s}\n' % (
        seq,
        prev_hash.encode(),
        event_hash.encode(),
        body.encode(),
    )


def iter_jsonl(events: QuerySet[AuditEvent]) -> Iterator[bytes]:
    rows = events.order_by("seq").values_list("seq", "prev_hash", "hash", "body")
    for seq, prev_hash, event_hash, body in rows.iterator(chunk_size=CHUNK_ROWS):
        yield event_line(seq, prev_hash, event_hash, body)


def iter_csv(events: QuerySet[AuditEvent]) -> Iterator[bytes]:
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(CSV_COLUMNS)
    rows = events.order_by("seq").values_list(
        "seq", "occurred_at", "actor_name", "action", "object_type", "object_id", "request_id", "data", "hash"
    )
    from governance.audit.actions import AuditAction

    for count, row in enumerate(rows.iterator(chunk_size=CHUNK_ROWS), start=1):
        seq, occurred_at, actor, action, object_type, object_id, request_id, data, event_hash = row
        writer.writerow(
            [
                seq,
                format_time(occurred_at),
                _csv_safe(actor),
                AuditAction(action).label,
                _csv_safe(object_type),
                _csv_safe(object_id),
                _csv_safe(request_id),
                _csv_safe(json.dumps(data, sort_keys=True, ensure_ascii=False)),
                event_hash,
            ]
        )
        if count % 500 == 0:
            yield buffer.getvalue().encode()
            buffer.seek(0)
            buffer.truncate()
    yield buffer.getvalue().encode()


def _csv_safe(value: str) -> str:
    # Spreadsheets execute cells starting with these characters (CSV injection).
    return "'" + value if value[:1] in ("=", "+", "-", "@", "\t", "\r") else value


def write_bundle(target: IO[bytes]) -> dict[str, object]:
    """Write the whole chain, checkpoints, public key and manifest into a zip. Returns the manifest."""
    public_key = public_key_pem(load_signing_key().public_key())
    digests: dict[str, str] = {}
    counts: dict[str, int] = {}
    with zipfile.ZipFile(target, "w", compression=zipfile.ZIP_DEFLATED) as bundle:
        for name, lines in (
            (EVENTS_FILE, iter_jsonl(AuditEvent.objects.all())),
            (CHECKPOINTS_FILE, (checkpoint_line(c) for c in audit_checkpoints().iterator())),
        ):
            digest = hashlib.sha256()
            count = 0
            with bundle.open(name, "w", force_zip64=True) as member:
                for line in lines:
                    member.write(line)
                    digest.update(line)
                    count += 1
            digests[name] = digest.hexdigest()
            counts[name] = count
        bundle.writestr(PUBLIC_KEY_FILE, public_key)
        digests[PUBLIC_KEY_FILE] = hashlib.sha256(public_key).hexdigest()
        for _receiver, response in bundle_files.send(sender=None):
            files = cast(Iterable[tuple[str, bytes]], response or ())
            for file_name, data in files:
                bundle.writestr(file_name, data)
                digests[file_name] = hashlib.sha256(data).hexdigest()
        manifest: dict[str, object] = {
            "format": "governance-audit-bundle/1",
            "created_at": format_time(timezone.now()),
            "hash_scheme": "hash_n = sha256(bytes.fromhex(hash_{n-1}) || sha256(body_n)); hash_0 = 64*'0'",
            "counts": counts,
            "files": digests,
        }
        bundle.writestr(MANIFEST_FILE, json.dumps(manifest, indent=2, sort_keys=True))
    return manifest
