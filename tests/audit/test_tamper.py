"""Tamper suite on PostgreSQL: what a database superuser can do (`session_replication_role =
replica` switches the append-only triggers off), each attack detected, or reported UNANCHORED,
by `manage.py audit_verify` and by the offline verifier given only the bundle, the public key
and the checkpoints published outside the database."""

from __future__ import annotations

import csv
import io
import json
import logging
import shutil
from collections.abc import Callable
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import DatabaseError, connection, transaction
from django.http import StreamingHttpResponse

from governance.audit.actions import AuditAction
from governance.audit.chain import chain_hash
from governance.audit.keys import load_signing_key, public_key_pem
from governance.audit.models import AuditChainHead, AuditCheckpoint, AuditEvent
from governance.audit.services import CheckpointRefusedError, audit_checkpoint_create, audit_record
from tests.audit.helpers import run_verifier, tamper
from tests.conftest import Personas

pytestmark = pytest.mark.skipif(
    "connection.vendor != 'postgresql'", reason="the superuser attacks use PostgreSQL's session_replication_role"
)


@pytest.fixture
def published(settings: Any) -> Path:
    return Path(settings.AUDIT_CHECKPOINT_PUBLISH_PATH)


@pytest.fixture
def checkpoint(django_capture_on_commit_callbacks: Any) -> Callable[[], AuditCheckpoint | None]:
    """Sign a checkpoint and run its after-commit publication, as a committed beat run would."""

    def sign() -> AuditCheckpoint | None:
        with django_capture_on_commit_callbacks(execute=True):
            return audit_checkpoint_create()

    return sign


def _events(personas: Personas, numbers: range) -> None:
    for n in numbers:
        audit_record(actor=personas.legal, action=AuditAction.LICENSE_TERM_CHANGED, obj=personas.team, data={"n": n})


def _live() -> tuple[int, dict[str, Any]]:
    out = StringIO()
    try:
        call_command("audit_verify", "--json", stdout=out)
    except CommandError as exc:
        return exc.returncode, json.loads(out.getvalue())
    return 0, json.loads(out.getvalue())


def _offline(tmp_path: Path, published: Path, django_capture_on_commit_callbacks: Any) -> tuple[int, dict[str, Any]]:
    """Export a bundle (the export signs and publishes its own checkpoint when the chain allows),
    then verify it in a clean interpreter with the independently held key and published log."""
    trusted_log = tmp_path / "published-copy.jsonl"
    if published.exists():
        shutil.copy(published, trusted_log)
    else:
        trusted_log.write_bytes(b"")
    key = tmp_path / "trusted.pem"
    key.write_bytes(public_key_pem(load_signing_key().public_key()))
    bundle = tmp_path / "bundle.zip"
    with django_capture_on_commit_callbacks(execute=True):
        call_command("audit_export", "--format", "bundle", "--output", str(bundle), stderr=StringIO())
    result = run_verifier(str(bundle), "--public-key", str(key), "--checkpoints", str(trusted_log), "--json")
    assert result.returncode in (0, 1, 3), result.stdout + result.stderr
    return result.returncode, json.loads(result.stdout)


def _rehash_from(seq: int, edit: Callable[[str], str]) -> None:
    """A consistent rewrite: edit event `seq`, recompute every later hash and the head."""
    events = list(AuditEvent.objects.filter(seq__gte=seq - 1).order_by("seq"))
    prev = events[0].hash if seq > 1 else "0" * 64
    tamper("UPDATE audit_auditevent SET prev_hash = 'old-' || seq, hash = 'oldh-' || seq WHERE seq >= %s", [seq])
    for event in events[1:] if seq > 1 else events:
        body = edit(event.body) if event.seq == seq else event.body
        new_hash = chain_hash(prev, body.encode())
        tamper(
            "UPDATE audit_auditevent SET body = %s, data = %s::jsonb, prev_hash = %s, hash = %s WHERE seq = %s",
            [body, json.dumps(json.loads(body)["data"]), prev, new_hash, event.seq],
        )
        prev = new_hash
    tamper("UPDATE audit_auditchainhead SET hash = %s", [prev])


def test_superuser_rewrite_and_checkpoint_deletion_is_detected(
    personas: Personas, checkpoint: Any, published: Path, tmp_path: Path, django_capture_on_commit_callbacks: Any
) -> None:
    _events(personas, range(6))
    checkpoint()  # seq 6, stored and published
    _events(personas, range(6, 8))
    _rehash_from(4, lambda body: body.replace('"n":3', '"n":333'))
    tamper("DELETE FROM audit_auditcheckpoint")  # what the database held as evidence is gone
    code, report = _live()
    assert (code, report["status"]) == (1, "failed")
    assert any("trusted checkpoint seq 6" in error and "differs" in error for error in report["errors"])
    code, report = _offline(tmp_path, published, django_capture_on_commit_callbacks)
    assert (code, report["status"]) == (1, "failed")
    assert any("trusted checkpoint seq 6" in error and "differs" in error for error in report["errors"])


def test_display_column_edit_is_detected_and_never_shown(
    personas: Personas, checkpoint: Any, published: Path, tmp_path: Path, django_capture_on_commit_callbacks: Any
) -> None:
    _events(personas, range(3))
    checkpoint()
    tamper("UPDATE audit_auditevent SET actor_name = 'someone-else', data = '{\"n\": 99}' WHERE seq = 2")
    code, report = _live()
    assert (code, report["first_bad_seq"]) == (1, 2)
    assert any("actor_name, data differ from the hashed body" in error for error in report["errors"])
    client = personas.client(personas.auditor)
    shown = client.get("/api/v1/audit/events").json()["results"][1]
    assert (shown["seq"], shown["actor"], shown["data"]) == (2, "legal", {"n": 1})
    export = client.get("/api/v1/audit/events/export.csv")
    assert isinstance(export, StreamingHttpResponse)
    csv_text = b"".join(export.streaming_content).decode()
    row = next(csv.reader(io.StringIO(csv_text.splitlines()[2])))
    assert (row[0], row[2], json.loads(row[7])) == ("2", "legal", {"n": 1})
    assert "someone-else" not in csv_text
    code, report = _offline(tmp_path, published, django_capture_on_commit_callbacks)
    assert code == 1
    assert any("display columns edited in its database at seq [2]" in error for error in report["errors"])


def test_forged_head_before_a_checkpoint_is_refused_and_detected(
    personas: Personas,
    checkpoint: Any,
    published: Path,
    tmp_path: Path,
    django_capture_on_commit_callbacks: Any,
    caplog: pytest.LogCaptureFixture,
) -> None:
    _events(personas, range(3))
    checkpoint()
    _events(personas, range(3, 5))
    tamper("UPDATE audit_auditchainhead SET hash = %s", ["f" * 64])
    published_before = published.read_bytes()
    with caplog.at_level(logging.CRITICAL), pytest.raises(CheckpointRefusedError, match="head forged"):
        checkpoint()
    assert any("checkpoint refused" in record.getMessage() for record in caplog.records)
    assert published.read_bytes() == published_before  # nothing signed, nothing published
    assert AuditCheckpoint.objects.count() == 1
    refused = AuditEvent.objects.get(action=AuditAction.AUDIT_CHECKPOINT_REFUSED)
    assert "head forged" in refused.data["problem"]
    code, report = _live()
    assert code == 1
    code, report = _offline(tmp_path, published, django_capture_on_commit_callbacks)
    assert code == 1
    assert any("refused to sign a checkpoint" in error for error in report["errors"])


def test_rewrite_before_the_last_checkpoint_is_never_blessed_by_the_next(personas: Personas, checkpoint: Any) -> None:
    _events(personas, range(4))
    checkpoint()
    _rehash_from(2, lambda body: body.replace('"n":1', '"n":111'))
    tamper("DELETE FROM audit_auditcheckpoint")
    _events(personas, range(4, 6))
    with pytest.raises(CheckpointRefusedError, match="published checkpoint seq 4 signed a different head hash"):
        checkpoint()


def test_truncated_tail_is_detected(
    personas: Personas, checkpoint: Any, published: Path, tmp_path: Path, django_capture_on_commit_callbacks: Any
) -> None:
    _events(personas, range(6))
    checkpoint()
    four = AuditEvent.objects.get(seq=4)
    tamper("DELETE FROM audit_auditcheckpoint")
    tamper("DELETE FROM audit_auditevent WHERE seq > 4")
    tamper("UPDATE audit_auditchainhead SET seq = 4, hash = %s", [four.hash])
    code, report = _live()
    assert (code, report["first_bad_seq"]) == (1, 5)
    assert any("trusted checkpoint seq 6: chain ends at seq 4" in error for error in report["errors"])
    code, report = _offline(tmp_path, published, django_capture_on_commit_callbacks)
    assert code == 1
    # The bundle (ending at seq 5, the export's own `audit.checkpoint_refused` event) is read as a
    # prefix of the chain, so the published seq 6 alone does not fail it; the refusal does.
    assert any("refused to sign a checkpoint" in error for error in report["errors"])


def test_events_after_the_last_checkpoint_are_reported_unanchored(
    personas: Personas, checkpoint: Any, published: Path, tmp_path: Path, django_capture_on_commit_callbacks: Any
) -> None:
    _events(personas, range(4))
    checkpoint()
    _events(personas, range(4, 7))
    code, report = _live()
    assert (code, report["status"], report["anchored_seq"], report["unanchored_events"]) == (3, "unanchored", 4, 3)
    with pytest.raises(CommandError, match=r"UNANCHORED: .* 3 events after seq 4"):
        call_command("audit_verify")
    # The export signs (and publishes) a fresh checkpoint, but the auditor's copy of the log
    # predates it: the bundle's own checkpoints never anchor, so its tail stays unanchored.
    code, report = _offline(tmp_path, published, django_capture_on_commit_callbacks)
    assert (code, report["status"], report["anchored_seq"]) == (3, "unanchored", 4)
    assert report["checkpoints"] == 2  # the stored one and the export's fresh one
    text = run_verifier(str(tmp_path / "bundle.zip"), "--checkpoints", str(published))
    assert text.returncode == 0, text.stdout  # the log after the export anchors the whole bundle
    assert text.stdout.startswith("OK: ")


def test_no_published_log_means_nothing_is_anchored(personas: Personas, checkpoint: Any, tmp_path: Path) -> None:
    _events(personas, range(2))
    checkpoint()
    bundle = tmp_path / "b.zip"
    call_command("audit_export", "--format", "bundle", "--output", str(bundle), stderr=StringIO())
    result = run_verifier(str(bundle))
    assert result.returncode == 3
    assert result.stdout.startswith("UNANCHORED")
    assert "no trusted checkpoints given" in result.stdout


def test_chain_head_row_refuses_forging_without_superuser(personas: Personas) -> None:
    _events(personas, range(2))
    for statement in (
        "UPDATE audit_auditchainhead SET hash = repeat('f', 64)",
        "UPDATE audit_auditchainhead SET seq = seq + 5",
        "DELETE FROM audit_auditchainhead",
        "TRUNCATE audit_auditchainhead",
    ):
        with pytest.raises(DatabaseError, match="refused"), transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(statement)
    assert AuditChainHead.objects.get().seq == 2
    _events(personas, range(2, 3))  # appends still advance it
    assert AuditChainHead.objects.get().seq == 3
