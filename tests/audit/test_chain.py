import json
import threading

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import DatabaseError, connection, transaction

from governance.audit.actions import AuditAction
from governance.audit.chain import GENESIS_HASH, chain_hash
from governance.audit.models import AuditChainHead, AuditCheckpoint, AuditEvent
from governance.audit.services import audit_checkpoint_create, audit_record
from governance.audit.tasks import audit_checkpoint_task
from tests.audit.helpers import tamper
from tests.conftest import Personas


def _verify_live() -> dict:
    from io import StringIO

    out = StringIO()
    call_command("audit_verify", "--json", stdout=out)
    return json.loads(out.getvalue())


def test_events_are_gapless_linked_and_canonical(personas: Personas, django_capture_on_commit_callbacks) -> None:
    first = audit_record(
        actor=personas.legal,
        action=AuditAction.LICENSE_EVALUATED,
        obj=personas.team,
        data={"b": 2, "a": 1},
        request_id="req-12345678",
    )
    second = audit_record(actor=None, action=AuditAction.AUDIT_CHECKPOINT, data={})
    assert (first.seq, second.seq) == (1, 2)
    assert first.prev_hash == GENESIS_HASH
    assert second.prev_hash == first.hash
    assert first.hash == chain_hash(GENESIS_HASH, first.body.encode())
    body = json.loads(first.body)
    assert body["actor"] == "legal"
    assert body["action"] == "license.evaluated"
    assert body["object"] == {"type": "core.team", "id": str(personas.team.code)}
    assert body["request_id"] == "req-12345678"
    assert first.body.index('"a":1') < first.body.index('"b":2')  # RFC 8785 key order
    assert AuditChainHead.objects.get().seq == 2
    with django_capture_on_commit_callbacks(execute=True):  # publish, as a committed checkpoint is
        audit_checkpoint_create()
    assert _verify_live()["status"] == "ok"


def test_event_rolls_back_with_the_change_it_records(personas: Personas) -> None:
    def change_that_fails() -> None:
        with transaction.atomic():
            audit_record(actor=personas.admin, action=AuditAction.LICENSE_TERM_CHANGED)
            raise RuntimeError("the change failed")

    with pytest.raises(RuntimeError):
        change_that_fails()
    assert AuditEvent.objects.count() == 0
    assert audit_record(actor=personas.admin, action=AuditAction.LICENSE_TERM_CHANGED).seq == 1


@pytest.mark.parametrize(
    "statement",
    [
        "UPDATE audit_auditevent SET data = '{}'",
        "UPDATE audit_auditevent SET hash = 'x'",
        "DELETE FROM audit_auditevent",
        "DELETE FROM audit_auditcheckpoint",
        "UPDATE audit_auditcheckpoint SET seq = 0",
    ],
)
def test_database_refuses_raw_changes(personas: Personas, statement: str) -> None:
    audit_record(actor=personas.admin, action=AuditAction.LICENSE_TERM_CHANGED)
    audit_checkpoint_create()
    with pytest.raises(DatabaseError, match="append-only"), transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(statement)
    assert AuditEvent.objects.count() == 1
    assert AuditCheckpoint.objects.count() == 1


def test_database_refuses_orm_update_and_delete(personas: Personas) -> None:
    event = audit_record(actor=personas.admin, action=AuditAction.LICENSE_TERM_CHANGED, data={"x": 1})
    with pytest.raises(DatabaseError, match="append-only"), transaction.atomic():
        AuditEvent.objects.filter(pk=event.pk).update(data={"x": 2})
    with pytest.raises(DatabaseError, match="append-only"), transaction.atomic():
        event.delete()
    event.refresh_from_db()
    assert event.data == {"x": 1}


@pytest.mark.skipif("connection.vendor != 'postgresql'", reason="TRUNCATE triggers exist on PostgreSQL only")
@pytest.mark.django_db(transaction=True)
def test_postgres_refuses_truncate() -> None:
    audit_record(actor="system:test", action=AuditAction.LICENSE_TERM_CHANGED)  # committed: no pending FK checks
    with pytest.raises(DatabaseError, match="append-only"), transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("TRUNCATE audit_auditevent")
    assert AuditEvent.objects.count() == 1


def test_tampered_event_is_named_by_seq(personas: Personas) -> None:
    for n in range(5):
        audit_record(actor=personas.admin, action=AuditAction.LICENSE_TERM_CHANGED, data={"n": n})
    event = AuditEvent.objects.get(seq=3)
    tamper("UPDATE audit_auditevent SET body = %s WHERE seq = 3", [event.body.replace('"n":2', '"n":99')])
    with pytest.raises(CommandError, match="seq 3"):
        call_command("audit_verify")


def test_consistent_rehash_is_caught_by_an_earlier_checkpoint(personas: Personas) -> None:
    for n in range(6):
        audit_record(actor=personas.admin, action=AuditAction.LICENSE_TERM_CHANGED, data={"n": n})
    audit_checkpoint_create()  # signs seq 6
    audit_record(actor=personas.admin, action=AuditAction.LICENSE_TERM_CHANGED, data={"n": 6})
    # A superuser rewrites seq 4 and recomputes every later hash, so the chain is self-consistent.
    events = list(AuditEvent.objects.order_by("seq"))
    prev = events[2].hash
    # Hashes are unique, so first move the suffix's hashes aside, then write the new ones.
    tamper("UPDATE audit_auditevent SET prev_hash = 'old-' || seq, hash = 'oldh-' || seq WHERE seq >= 4")
    for event in events[3:]:
        body = event.body.replace('"n":3', '"n":333') if event.seq == 4 else event.body
        new_hash = chain_hash(prev, body.encode())
        tamper(
            "UPDATE audit_auditevent SET body = %s, prev_hash = %s, hash = %s WHERE seq = %s",
            [body, prev, new_hash, event.seq],
        )
        prev = new_hash
    tamper("UPDATE audit_auditchainhead SET hash = %s", [prev])
    report = _verify_report()
    assert report["ok"] is False
    assert any("checkpoint seq 6" in error and "differs" in error for error in report["errors"])


def test_deleted_tail_is_caught_by_the_last_checkpoint(personas: Personas) -> None:
    for n in range(5):
        audit_record(actor=personas.admin, action=AuditAction.LICENSE_TERM_CHANGED, data={"n": n})
    audit_checkpoint_create()
    tamper("DELETE FROM audit_auditevent WHERE seq > 3")
    report = _verify_report()
    assert report["ok"] is False
    assert report["first_bad_seq"] == 4
    assert any("chain ends at seq 3" in error for error in report["errors"])


def _verify_report() -> dict:
    from io import StringIO

    out = StringIO()
    with pytest.raises(CommandError):
        call_command("audit_verify", "--json", stdout=out)
    return json.loads(out.getvalue())


def test_checkpoint_signs_head_and_skips_when_unchanged(personas: Personas, settings) -> None:
    audit_record(actor=personas.admin, action=AuditAction.LICENSE_TERM_CHANGED)
    assert audit_checkpoint_task() == 1
    assert audit_checkpoint_task() is None
    checkpoint = AuditCheckpoint.objects.get()
    assert json.loads(checkpoint.body) == {
        "origin": settings.AUDIT_ORIGIN,
        "seq": 1,
        "head_hash": AuditEvent.objects.get(seq=1).hash,
        "time": json.loads(checkpoint.body)["time"],
    }
    assert "audit-checkpoint" in settings.CELERY_BEAT_SCHEDULE


@pytest.mark.django_db(transaction=True)
def test_concurrent_writers_never_fork_the_chain() -> None:
    writers, per_writer = 8, 250
    errors: list[BaseException] = []
    barrier = threading.Barrier(writers)

    def write(writer: int) -> None:
        from django.db import connections

        try:
            barrier.wait()
            for n in range(per_writer):
                with transaction.atomic():
                    audit_record(actor=f"system:writer-{writer}", action=AuditAction.JOB_STATE_CHANGED, data={"n": n})
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=write, args=(w,)) for w in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    seqs = list(AuditEvent.objects.order_by("seq").values_list("seq", flat=True))
    assert seqs == list(range(1, writers * per_writer + 1))
    assert AuditEvent.objects.values("prev_hash").distinct().count() == writers * per_writer
    audit_checkpoint_create()
    assert _verify_live() | {"head_hash": None} == {
        "ok": True,
        "status": "ok",
        "events": 2000,
        "checkpoints": 1,
        "trusted_checkpoints": 1,  # published after commit
        "head_seq": 2000,
        "head_hash": None,
        "anchored_seq": 2000,
        "published_beyond_head": [],
        "exported_at": None,
        "unanchored_events": 0,
        "first_bad_seq": None,
        "errors": [],
        "warnings": [],
    }
