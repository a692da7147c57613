"""A bundle is a prefix of the chain: the offline verifier checks it up to its own head, lists the
published checkpoints beyond it, and fails only on a contradiction (a bundle signed after a
published checkpoint it does not reach, a checkpoint it contradicts, a cut or edited file).

Pure tests on `verify_chain` (chains built here with a throwaway key), then the issue's scenario
end to end: export, beat publishes the next checkpoint, verify the earlier bundle."""

from __future__ import annotations

import base64
import hashlib
import json
import shutil
import zipfile
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from django.core.management import call_command

from governance.audit.actions import AuditAction
from governance.audit.chain import GENESIS_HASH, chain_hash
from governance.audit.keys import load_signing_key, public_key_pem
from governance.audit.models import AuditEvent
from governance.audit.services import audit_checkpoint_create, audit_record
from governance.audit.verify import EXIT_FAILED, EXIT_OK, CheckpointRecord, EventRecord, verify_chain
from tests.audit.helpers import run_verifier, tamper
from tests.conftest import Personas

# ---------------------------------------------------------------- pure: chains built in memory


def _events(count: int) -> list[EventRecord]:
    events, previous = [], GENESIS_HASH
    for seq in range(1, count + 1):
        body = b'{"action":"x","data":{"n":%d},"seq":%d,"v":1}' % (seq, seq)
        event_hash = chain_hash(previous, body)
        events.append(EventRecord(seq, previous, event_hash, body))
        previous = event_hash
    return events


def _checkpoint(key: Ed25519PrivateKey, seq: int, head_hash: str, time: str) -> CheckpointRecord:
    raw = key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    body = json.dumps(
        {"head_hash": head_hash, "origin": "governance", "seq": seq, "time": time}, separators=(",", ":")
    ).encode()
    return CheckpointRecord(hashlib.sha256(raw).hexdigest(), base64.b64encode(key.sign(body)).decode(), body)


@pytest.fixture
def key() -> Ed25519PrivateKey:
    return Ed25519PrivateKey.generate()


def test_published_checkpoints_beyond_an_honest_bundle_are_listed_not_failed(key: Ed25519PrivateKey) -> None:
    whole = _events(50)
    bundle = whole[:46]
    exported = _checkpoint(key, 46, bundle[-1].hash, "2026-12-01T10:00:00.000000Z")
    published = [
        _checkpoint(key, 40, whole[39].hash, "2026-12-01T09:55:00.000000Z"),
        exported,
        _checkpoint(key, 50, whole[49].hash, "2026-12-01T10:05:00.000000Z"),
    ]
    report = verify_chain(bundle, [exported], key.public_key(), trusted=published, prefix=True)
    assert report.errors == []
    assert (report.status, report.exit_code, report.head_seq, report.anchored_seq) == ("ok", EXIT_OK, 46, 46)
    assert report.published_beyond_head == [50]
    assert report.exported_at == "2026-12-01T10:00:00.000000Z"
    assert report.as_dict()["published_beyond_head"] == [50]
    summary = report.summary()
    assert summary.startswith("OK: ")
    assert "published checkpoint seq 50 lies beyond this bundle's head seq 46" in summary


def test_the_live_chain_still_fails_when_a_published_checkpoint_lies_beyond_its_head(
    key: Ed25519PrivateKey,
) -> None:
    # The database holds the whole chain, not a prefix: there, a checkpoint beyond the head means removed events.
    whole = _events(50)
    published = [_checkpoint(key, 50, whole[49].hash, "2026-12-01T10:05:00.000000Z")]
    report = verify_chain(whole[:46], [], key.public_key(), trusted=published)
    assert report.status == "failed"
    assert "chain ends at seq 46" in report.errors[0]


def test_a_bundle_signed_after_a_published_checkpoint_it_does_not_reach_is_cut(key: Ed25519PrivateKey) -> None:
    # Seq 50 was published at 10:05, yet a bundle signed at 10:10 ends at seq 46: its tail was cut
    # (and the chain re-signed at the cut).
    whole = _events(50)
    bundle = whole[:46]
    exported = _checkpoint(key, 46, bundle[-1].hash, "2026-12-01T10:10:00.000000Z")
    published = [_checkpoint(key, 50, whole[49].hash, "2026-12-01T10:05:00.000000Z")]
    report = verify_chain(bundle, [exported], key.public_key(), trusted=published, prefix=True)
    assert (report.status, report.exit_code, report.first_bad_seq) == ("failed", EXIT_FAILED, 47)
    assert any(
        "signed at 2026-12-01T10:10:00.000000Z" in error and "published checkpoint seq 50" in error
        for error in report.errors
    ), report.errors


def test_a_bundle_contradicting_a_published_checkpoint_within_it_fails(key: Ed25519PrivateKey) -> None:
    whole = _events(46)
    forged = _events(46)
    # A rewritten history: same length, different event 30 and everything after it.
    body = b'{"action":"x","data":{"n":"forged"},"seq":30,"v":1}'
    previous = forged[28].hash
    for seq in range(30, 47):
        body = body if seq == 30 else forged[seq - 1].body
        event_hash = chain_hash(previous, body)
        forged[seq - 1] = EventRecord(seq, previous, event_hash, body)
        previous = event_hash
    exported = _checkpoint(key, 46, forged[-1].hash, "2026-12-01T10:10:00.000000Z")
    published = [_checkpoint(key, 40, whole[39].hash, "2026-12-01T10:00:00.000000Z")]
    report = verify_chain(forged, [exported], key.public_key(), trusted=published, prefix=True)
    assert report.status == "failed"
    assert any("trusted checkpoint seq 40: signed head hash differs" in error for error in report.errors)


def test_a_bundle_whose_own_checkpoint_lies_beyond_its_events_was_cut(key: Ed25519PrivateKey) -> None:
    # The bundle's own (signed) export checkpoint says seq 46, but the events stop at 44.
    whole = _events(46)
    exported = _checkpoint(key, 46, whole[-1].hash, "2026-12-01T10:00:00.000000Z")
    report = verify_chain(whole[:44], [exported], key.public_key(), trusted=[exported], prefix=True)
    assert report.status == "failed"
    assert any("checkpoint seq 46: chain ends at seq 44" in error for error in report.errors)


# ---------------------------------------------------------------- the scenario, end to end


def _append(personas: Personas, count: int) -> None:
    for n in range(count):
        audit_record(actor=personas.legal, action=AuditAction.LICENSE_TERM_CHANGED, obj=personas.team, data={"n": n})


def _export(path: Path, capture: Any) -> None:
    with capture(execute=True):  # the export's fresh checkpoint is published after commit
        call_command("audit_export", "--format", "bundle", "--output", str(path), stderr=StringIO())


@pytest.mark.django_db
def test_an_honest_bundle_still_verifies_after_beat_publishes_the_next_checkpoint(
    personas: Personas, settings: Any, tmp_path: Path, django_capture_on_commit_callbacks: Any
) -> None:
    _append(personas, 3)
    bundle = tmp_path / "audit.zip"
    _export(bundle, django_capture_on_commit_callbacks)
    head = AuditEvent.objects.order_by("-seq").first()
    assert head is not None
    _append(personas, 4)
    with django_capture_on_commit_callbacks(execute=True):  # beat's next run
        later = audit_checkpoint_create()
    assert later is not None
    assert later.seq > head.seq
    key = tmp_path / "key.pem"
    key.write_bytes(public_key_pem(load_signing_key().public_key()))
    published = settings.AUDIT_CHECKPOINT_PUBLISH_PATH
    result = run_verifier(str(bundle), "--public-key", str(key), "--checkpoints", published)
    assert result.returncode == EXIT_OK, result.stdout + result.stderr
    assert result.stdout.startswith("OK: ")
    assert f"published checkpoint seq {later.seq} lies beyond this bundle's head seq {head.seq}" in result.stdout
    report = json.loads(
        run_verifier(str(bundle), "--public-key", str(key), "--checkpoints", published, "--json").stdout
    )
    assert (report["status"], report["head_seq"], report["published_beyond_head"]) == ("ok", head.seq, [later.seq])


@pytest.mark.postgres  # the superuser cut uses session_replication_role
@pytest.mark.django_db
def test_a_bundle_exported_after_a_cut_fails_against_the_published_log(
    personas: Personas, settings: Any, tmp_path: Path, django_capture_on_commit_callbacks: Any
) -> None:
    """A superuser removes the tail and the stored checkpoints, and exports while the service does
    not see its published log: the export signs the cut chain, later than the published checkpoint
    that the bundle does not reach."""
    _append(personas, 6)
    with django_capture_on_commit_callbacks(execute=True):
        published_checkpoint = audit_checkpoint_create()
    assert published_checkpoint is not None
    published = tmp_path / "published-copy.jsonl"
    shutil.copy(settings.AUDIT_CHECKPOINT_PUBLISH_PATH, published)
    cut = AuditEvent.objects.get(seq=published_checkpoint.seq - 2)
    tamper("DELETE FROM audit_auditcheckpoint")
    tamper("DELETE FROM audit_auditevent WHERE seq > %s", [cut.seq])
    tamper("UPDATE audit_auditchainhead SET seq = %s, hash = %s", [cut.seq, cut.hash])
    settings.AUDIT_CHECKPOINT_PUBLISH_PATH = str(tmp_path / "elsewhere.jsonl")
    bundle = tmp_path / "audit.zip"
    _export(bundle, django_capture_on_commit_callbacks)
    key = tmp_path / "key.pem"
    key.write_bytes(public_key_pem(load_signing_key().public_key()))
    result = run_verifier(str(bundle), "--public-key", str(key), "--checkpoints", str(published))
    assert result.returncode == EXIT_FAILED, result.stdout
    assert f"published checkpoint seq {published_checkpoint.seq}" in result.stdout
    assert "does not reach" in result.stdout


@pytest.mark.django_db
def test_an_events_file_cut_after_export_fails(
    personas: Personas, settings: Any, tmp_path: Path, django_capture_on_commit_callbacks: Any
) -> None:
    _append(personas, 4)
    bundle = tmp_path / "audit.zip"
    _export(bundle, django_capture_on_commit_callbacks)
    cut = tmp_path / "cut.zip"
    with zipfile.ZipFile(bundle) as source, zipfile.ZipFile(cut, "w") as target:
        for item in source.infolist():
            data = source.read(item.filename)
            if item.filename == "events.jsonl":
                data = b"".join(data.splitlines(keepends=True)[:-2])
            target.writestr(item, data)
    result = run_verifier(str(cut), "--checkpoints", settings.AUDIT_CHECKPOINT_PUBLISH_PATH)
    assert result.returncode == EXIT_FAILED, result.stdout
    assert "events.jsonl: SHA-256 differs from the manifest" in result.stdout
