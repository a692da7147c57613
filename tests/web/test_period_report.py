"""The period report: for a date range, every approval, revocation and waiver with the request,
model and artifact digest, license decision, obligations, signers, evidence digest, packet hash and
gate decisions, as CSV and PDF; each row names the audit event (seq and hash) it can be checked
against in an audit bundle of the same range. Auditors and admins only."""

from __future__ import annotations

import csv
import io
from typing import Any

from django.test import Client
from django.utils import timezone

from governance.audit.actions import AuditAction
from governance.audit.models import AuditEvent
from tests.approvals.conftest import SignFlow


def _client(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_an_approval_and_its_revocation_are_rows_checkable_against_the_trail(
    sign_flow: SignFlow, artifacts: Any, personas: Any
) -> None:
    code = sign_flow.kimi(artifacts)
    sign_flow.approve_signed(code)
    assert sign_flow.post(personas.legal, code, "revoke", {"reason": "licence withdrawn"}).status_code == 200
    today = timezone.now().date().isoformat()
    response = _client(personas.auditor).get("/audit/report.csv", {"since": today, "until": today})
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/csv")
    rows = list(
        csv.DictReader(
            io.StringIO(
                b"".join(response.streaming_content).decode()
                if hasattr(response, "streaming_content")
                else response.content.decode()
            )
        )
    )
    kinds = [row["kind"] for row in rows]
    assert kinds == ["approval", "revocation"], rows
    approval = rows[0]
    assert approval["request"] == code
    assert approval["model"].startswith("Kimi-K2")
    assert approval["artifact_digest"].startswith("sha256:")
    assert "kimi-k2-modified-mit" in approval["license_decision"]
    assert "legal:" in approval["signers"]
    assert "engineering:" in approval["signers"]
    assert len(approval["packet_sha256"]) == 64
    assert len(approval["evidence_digest"]) == 64
    event = AuditEvent.objects.get(seq=int(approval["audit_seq"]))
    assert event.action == AuditAction.DEPLOYMENT_TRANSITIONED
    assert event.hash == approval["audit_hash"]
    assert event.data["to"] == "approved"
    pdf = _client(personas.auditor).get("/audit/report.pdf", {"since": today, "until": today})
    assert pdf.status_code == 200
    assert pdf["Content-Type"] == "application/pdf"
    body = b"".join(pdf.streaming_content) if hasattr(pdf, "streaming_content") else pdf.content
    assert body.startswith(b"%PDF")


def test_only_auditors_and_admins_get_the_report(personas: Any) -> None:
    assert _client(personas.requester).get("/audit/report.csv").status_code == 403
    assert _client(personas.legal).get("/audit/report.csv").status_code == 403
    assert _client(personas.admin).get("/audit/report.csv").status_code == 200


def test_a_bad_date_is_named(personas: Any) -> None:
    response = _client(personas.auditor).get("/audit/report.csv", {"since": "yesterday"})
    assert response.status_code == 400
    assert b"since" in response.content
