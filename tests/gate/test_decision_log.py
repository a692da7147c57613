"""The decision log: every answer is stored and audited first; when it cannot be, the gate
answers 503 and never allow. The log is listed, filtered and shown per request."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from django.db import connection

from governance.audit.actions import AuditAction
from governance.audit.models import AuditEvent
from governance.gate.models import GateDecision
from tests.gate.conftest import Gate


@contextmanager
def refuse_inserts(table: str) -> Iterator[None]:
    """A database trigger that refuses every INSERT into `table`: the log is unwritable for real."""
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(
                "CREATE FUNCTION test_refuse_insert() RETURNS trigger LANGUAGE plpgsql AS "
                "$$ BEGIN RAISE EXCEPTION 'log unwritable'; END $$"
            )
            cursor.execute(
                f"CREATE TRIGGER test_refuse BEFORE INSERT ON {table} "
                "FOR EACH ROW EXECUTE FUNCTION test_refuse_insert()"
            )
        else:
            cursor.execute(
                f"CREATE TRIGGER test_refuse BEFORE INSERT ON {table} BEGIN SELECT RAISE(ABORT, 'log unwritable'); END"
            )
    try:
        yield
    finally:
        with connection.cursor() as cursor:
            if connection.vendor == "postgresql":
                cursor.execute(f"DROP TRIGGER test_refuse ON {table}")
                cursor.execute("DROP FUNCTION test_refuse_insert()")
            else:
                cursor.execute("DROP TRIGGER test_refuse")


def test_an_unwritable_decision_log_answers_503_never_allow(gate: Gate) -> None:
    assert gate.check().json()["decision"] == "allow"
    with refuse_inserts("gate_gatedecision"):
        response = gate.check()
    assert response.status_code == 503
    assert "deny" in response.json()["message"]
    assert "decision" not in response.json()
    assert GateDecision.objects.count() == 1  # only the first answer


def test_an_unwritable_audit_trail_answers_503_and_logs_nothing(unsigned_gate: Gate) -> None:
    gate = unsigned_gate  # a deny is logged like an allow
    with refuse_inserts("audit_auditevent"):
        response = gate.check()
    assert response.status_code == 503
    assert GateDecision.objects.count() == 0  # the decision rolled back with its audit event


def test_every_answer_is_logged_with_its_input_and_audited(gate: Gate) -> None:
    allow = gate.check().json()
    deny = gate.check(serving={"max_model_len": 65536}).json()
    logged = GateDecision.objects.get(code=deny["decision_id"])
    assert logged.decision == "deny"
    assert logged.reasons == deny["reasons"]
    assert logged.serving["max_model_len"] == 65536
    assert logged.evidence_digest == deny["evidence_digest"]
    assert logged.token_prefix == gate.token[:12]
    events = AuditEvent.objects.filter(action=AuditAction.GATE_DECISION).order_by("seq")
    assert [e.data["decision_id"] for e in events] == [allow["decision_id"], deny["decision_id"]]
    assert events[1].data["reasons"] == ["serving.max_model_len_exceeded"]


def test_decisions_are_listed_filtered_and_shown_per_request(gate: Gate) -> None:
    p = gate.p
    gate.check()
    gate.check(environment="staging")
    auditor = gate.flow.client(p.auditor)
    listed = auditor.get("/api/v1/gate/decisions").json()
    assert listed["count"] == 2
    denied = auditor.get("/api/v1/gate/decisions", {"decision": "deny"}).json()["results"]
    assert [d["environment"] for d in denied] == ["staging"]
    assert denied[0]["reasons"][0]["code"] == "environment.not_approved"
    assert auditor.get("/api/v1/gate/decisions", {"environment": "production"}).json()["count"] == 1
    assert auditor.get("/api/v1/gate/decisions", {"deployment": gate.code}).json()["count"] == 2
    assert auditor.get("/api/v1/gate/decisions", {"token": gate.token[:12]}).json()["count"] == 2
    assert auditor.get("/api/v1/gate/decisions", {"decision": "maybe"}).status_code == 400
    misspelt = auditor.get("/api/v1/gate/decisions", {"decisions": "deny"})  # refused, not ignored
    assert misspelt.status_code == 400
    assert "decisions" in misspelt.json()["extra"]["fields"]
    assert auditor.get("/api/v1/gate/decisions", {"page": 1, "page_size": 1}).json()["count"] == 2
    per_request = gate.flow.client(p.requester).get(f"/api/v1/deployments/{gate.code}/gate-decisions")
    assert per_request.status_code == 200
    assert per_request.json()["count"] == 2
    # Another team's requester sees neither the request nor its decisions.
    other = gate.flow.client(p.other_requester)
    assert other.get(f"/api/v1/deployments/{gate.code}/gate-decisions").status_code == 404
    assert other.get("/api/v1/gate/decisions").json()["count"] == 0
    assert gate.flow.client(p.outsider).get("/api/v1/gate/decisions").status_code == 403


def test_time_filters_with_offsets_postgresql_refuses_are_normalised_not_500(unsigned_gate: Gate) -> None:
    """Schemathesis found `until=0863-02-20T11:15:11.836+20:23`: Python parses the offset,
    PostgreSQL refuses it (DataError, 500). The filter converts to UTC first."""
    gate = unsigned_gate  # a deny is logged like an allow
    gate.check()
    client = gate.flow.client(gate.p.auditor)
    ok = client.get("/api/v1/gate/decisions", {"until": "0863-02-20T11:15:11.836+20:23"})
    assert ok.status_code == 200, ok.content
    assert ok.json()["results"] == []
    ok = client.get("/api/v1/gate/decisions", {"since": "1486-08-20T11:44:27-05:45"})
    assert ok.status_code == 200
    assert len(ok.json()["results"]) == 1
    bad = client.get("/api/v1/gate/decisions", {"since": "0001-01-01T00:10:00+20:00"})
    assert bad.status_code == 400
    assert "since" in bad.json()["extra"]["fields"]
