"""The restore drill (issue 33): pg_dump -> restore into a fresh database -> audit_verify against the
published checkpoints. A dump taken an hour before the last published checkpoint restores as
`behind` (events missing), never as tampering; a dump of an altered chain still fails."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import time_machine
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection
from django.utils import timezone

from governance.audit.actions import AuditAction
from governance.audit.integrity import EXIT_BEHIND
from governance.audit.models import AuditEvent
from governance.audit.restore import database_dump, restore_drill
from governance.audit.services import audit_checkpoint_create, audit_record
from governance.audit.triggers import triggers_suspended
from tests.conftest import Personas

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def record(n: int, label: str) -> None:
    for i in range(n):
        audit_record(actor="system:drill", action=AuditAction.AUDIT_EXPORTED, data={"drill": label, "i": i})


def published(settings: Any) -> list[str]:
    return Path(settings.AUDIT_CHECKPOINT_PUBLISH_PATH).read_text().splitlines()


def test_a_fresh_dump_restores_and_verifies_anchored(personas: Personas, settings: Any) -> None:
    record(5, "before")
    assert audit_checkpoint_create(force=True) is not None
    head = AuditEvent.objects.order_by("-seq").values_list("seq", flat=True).first()
    assert published(settings)  # the checkpoint is outside the database too

    result = restore_drill()
    assert result.exit_code == 0, result.summary
    assert result.report["status"] == "ok"
    assert result.report["events"] == head
    assert result.report["anchored_seq"] == head
    assert result.summary.startswith("OK")


def test_a_restore_that_lost_the_last_hour_is_behind_not_tampered(
    personas: Personas, settings: Any, tmp_path: Path
) -> None:
    record(4, "backed up")
    audit_checkpoint_create(force=True)
    backup = database_dump(tmp_path / "nightly.dump")
    backed_up_head = AuditEvent.objects.order_by("-seq").values_list("seq", flat=True).first()
    assert backed_up_head is not None

    with time_machine.travel(timezone.now() + timedelta(hours=1)):  # the hour the restore loses
        record(3, "lost")
        audit_checkpoint_create(force=True)
    published_head = AuditEvent.objects.order_by("-seq").values_list("seq", flat=True).first()
    assert published_head == backed_up_head + 3

    result = restore_drill(dump=backup)
    assert result.exit_code == EXIT_BEHIND, result.summary
    report = result.report
    assert report["status"] == "behind"
    assert report["errors"] == []  # not tampering
    assert report["head_seq"] == backed_up_head
    assert report["anchored_seq"] == backed_up_head  # what the dump holds is anchored by the older checkpoint
    assert report["missing"]["from_seq"] == backed_up_head + 1
    assert report["missing"]["to_seq"] == published_head
    assert report["missing"]["events"] == 3
    assert "BEHIND" in result.summary
    assert "missing" in result.summary
    assert "altered" in result.summary  # "missing, not altered"


def test_an_altered_chain_restores_as_failed(personas: Personas, settings: Any) -> None:
    record(3, "x")
    audit_checkpoint_create(force=True)
    with triggers_suspended(connection), connection.cursor() as cursor:
        cursor.execute("UPDATE audit_auditevent SET body = replace(body, '\"i\":1', '\"i\":7') WHERE seq = 2")

    result = restore_drill()
    assert result.exit_code == 1
    assert result.report["status"] == "failed"
    assert result.report["first_bad_seq"] == 2


def test_an_altered_restore_that_is_also_behind_is_failed(personas: Personas, settings: Any, tmp_path: Path) -> None:
    """Missing events never excuse altered ones: a tampered old dump fails."""
    record(3, "x")
    audit_checkpoint_create(force=True)
    with triggers_suspended(connection), connection.cursor() as cursor:
        cursor.execute("UPDATE audit_auditevent SET body = replace(body, '\"i\":0', '\"i\":9') WHERE seq = 1")
    backup = database_dump(tmp_path / "tampered.dump")
    with triggers_suspended(connection), connection.cursor() as cursor:
        cursor.execute("UPDATE audit_auditevent SET body = replace(body, '\"i\":9', '\"i\":0') WHERE seq = 1")
    record(2, "later")
    audit_checkpoint_create(force=True)

    result = restore_drill(dump=backup)
    assert result.exit_code == 1
    assert result.report["status"] == "failed"


def test_the_command_exits_with_the_verifiers_status(personas: Personas, settings: Any, tmp_path: Path) -> None:
    record(2, "a")
    audit_checkpoint_create(force=True)
    backup = database_dump(tmp_path / "a.dump")
    record(2, "b")
    audit_checkpoint_create(force=True)
    with pytest.raises(CommandError) as raised:
        call_command("audit_restore_drill", "--dump", str(backup))
    assert raised.value.returncode == EXIT_BEHIND
    assert "BEHIND" in str(raised.value)


def test_without_restored_a_short_chain_still_fails_and_says_how_to_check_a_restore(
    personas: Personas, settings: Any, tmp_path: Path
) -> None:
    """A removed tail and an old backup look the same to the checks: only the operator who
    restored may say `--restored`; without it the short chain fails, with a hint."""
    record(2, "a")
    audit_checkpoint_create(force=True)
    backup = database_dump(tmp_path / "a.dump")
    record(2, "b")
    audit_checkpoint_create(force=True)
    result = restore_drill(dump=backup, keep=True)
    try:
        env = {
            **os.environ,
            "DATABASE_URL": result.database_url,
            "AUDIT_SIGNING_KEY_PATH": settings.AUDIT_SIGNING_KEY_PATH,
            "AUDIT_CHECKPOINT_PUBLISH_PATH": settings.AUDIT_CHECKPOINT_PUBLISH_PATH,
        }
        plain = subprocess.run(
            [sys.executable, "manage.py", "audit_verify"], env=env, capture_output=True, text=True, check=False
        )
    finally:
        drop = subprocess.run(["dropdb", "--if-exists", result.database], env=_pg_env(), check=False)
    assert drop.returncode == 0
    assert result.exit_code == EXIT_BEHIND
    assert plain.returncode == 1
    assert "FAILED" in plain.stderr
    assert "audit_verify --restored" in plain.stderr


def _pg_env() -> dict[str, str]:
    db = connection.settings_dict
    env = {**os.environ, "PGHOST": str(db.get("HOST") or "127.0.0.1"), "PGPORT": str(db.get("PORT") or 5432)}
    env["PGUSER"] = str(db.get("USER") or "")
    if db.get("PASSWORD"):
        env["PGPASSWORD"] = str(db["PASSWORD"])
    return env
