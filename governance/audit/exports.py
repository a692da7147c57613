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
from typing import IO, Any, cast

from django.db.models import QuerySet
from django.utils import timezone

from governance.audit.integrity import EVENT_COLUMNS, display_mismatches
from governance.audit.keys import load_signing_key, public_key_pem
from governance.audit.models import AuditEvent
from governance.audit.selectors import audit_checkpoints
from governance.audit.services import CheckpointRefusedError, audit_checkpoint_create, checkpoint_line, format_time
from governance.audit.signals import bundle_files
from governance.audit.verify import CHECKPOINTS_FILE, EVENTS_FILE, MANIFEST_FILE, PUBLIC_KEY_FILE
from governance.core.csvcells import csv_safe

CHUNK_ROWS = 2000
MAX_LISTED_MISMATCHES = 1000

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


def _iter_bundle_events(mismatches: list[int]) -> Iterator[bytes]:
    """The whole chain for a bundle; meanwhile notes every row whose display columns were edited."""
    rows = AuditEvent.objects.order_by("seq").values_list(*EVENT_COLUMNS)
    for row in rows.iterator(chunk_size=CHUNK_ROWS):
        if display_mismatches(row):
            mismatches.append(row[0])
        yield event_line(row[0], row[1], row[2], row[3])


def iter_csv(events: QuerySet[AuditEvent]) -> Iterator[bytes]:
    """Every cell comes from the hashed body, never from the display columns a superuser could edit."""
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(CSV_COLUMNS)
    rows = events.order_by("seq").values_list("seq", "body", "hash")
    for count, (seq, body_text, event_hash) in enumerate(rows.iterator(chunk_size=CHUNK_ROWS), start=1):
        body = event_view(body_text)
        writer.writerow(
            [
                seq,
                body["occurred_at"],
                csv_safe(body["actor"]),
                body["action"],
                csv_safe(body["object_type"]),
                csv_safe(body["object_id"]),
                csv_safe(body["request_id"]),
                csv_safe(json.dumps(body["data"], sort_keys=True, ensure_ascii=False)),
                event_hash,
            ]
        )
        if count % 500 == 0:
            yield buffer.getvalue().encode()
            buffer.seek(0)
            buffer.truncate()
    yield buffer.getvalue().encode()


def event_view(body_text: str) -> dict[str, Any]:
    """What is shown of an event (API, CSV, admin), read from its hashed body."""
    body = json.loads(body_text)
    obj = body.get("object") or {}
    return {
        "occurred_at": body.get("occurred_at", ""),
        "actor": body.get("actor", ""),
        "action": body.get("action", ""),
        "object_type": obj.get("type", ""),
        "object_id": obj.get("id", ""),
        "request_id": body.get("request_id", ""),
        "data": body.get("data", {}),
    }


def write_bundle(target: IO[bytes]) -> dict[str, object]:
    """Write the whole chain, checkpoints, public key and manifest into a zip. Returns the manifest.

    A fresh checkpoint is signed first (after verifying the chain since the last one), so the
    bundle's end is vouched for and, once published, anchors later verifications. When the chain
    does not verify, the bundle is still written (an auditor needs the evidence) and the
    manifest says why no checkpoint was signed.
    """
    public_key = public_key_pem(load_signing_key().public_key())
    fresh: dict[str, object] | None = None
    refused: str | None = None
    try:
        checkpoint = audit_checkpoint_create(force=True)
    except CheckpointRefusedError as exc:
        refused = exc.message
    else:
        if checkpoint is None:  # force=True always signs: a checkpoint missing here is a bug, said so
            raise RuntimeError("audit checkpoint: a forced checkpoint was not created")
        fresh = {"seq": checkpoint.seq, "head_hash": checkpoint.head_hash}
    digests: dict[str, str] = {}
    counts: dict[str, int] = {}
    with zipfile.ZipFile(target, "w", compression=zipfile.ZIP_DEFLATED) as bundle:
        mismatches: list[int] = []
        for name, lines in (
            (EVENTS_FILE, _iter_bundle_events(mismatches)),
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
            "export_checkpoint": fresh,
            # Rows whose display columns contradict their hashed body (edited by a superuser); the
            # verifier fails the bundle when any are listed.
            "display_column_mismatches": mismatches[:MAX_LISTED_MISMATCHES],
        }
        if refused is not None:
            manifest["export_checkpoint_refused"] = refused
        bundle.writestr(MANIFEST_FILE, json.dumps(manifest, indent=2, sort_keys=True))
    return manifest
