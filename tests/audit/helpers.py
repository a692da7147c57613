"""Helpers for audit tests: fast bulk chains and database tampering (as a superuser would)."""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from django.db import connection

from governance.audit.actions import AuditAction
from governance.audit.chain import GENESIS_HASH, chain_hash
from governance.audit.models import AuditChainHead, AuditEvent
from governance.audit.services import format_time
from governance.audit.triggers import triggers_suspended
from governance.core.canonical import canonical_json

ROOT = Path(__file__).resolve().parents[2]


def bulk_chain(count: int, batch: int = 5000) -> None:
    """Append `count` valid events quickly (bulk inserts with the real hash scheme)."""
    head = AuditChainHead.objects.filter(pk=1).first()
    seq, prev = (head.seq, head.hash) if head else (0, GENESIS_HASH)
    moment = datetime(2026, 1, 1, tzinfo=UTC)
    rows: list[AuditEvent] = []
    for _ in range(count):
        seq += 1
        body = canonical_json(
            {
                "occurred_at": format_time(moment),
                "actor": "bulk",
                "action": AuditAction.AUDIT_CHECKPOINT.label,
                "object": None,
                "request_id": "",
                "data": {"n": seq},
                "seq": seq,
                "v": 1,
            }
        )
        event_hash = chain_hash(prev, body)
        rows.append(
            AuditEvent(
                seq=seq,
                occurred_at=moment,
                actor_name="bulk",
                action=int(AuditAction.AUDIT_CHECKPOINT),
                data={"n": seq},
                body=body.decode(),
                prev_hash=prev,
                hash=event_hash,
            )
        )
        prev = event_hash
        if len(rows) >= batch:
            AuditEvent.objects.bulk_create(rows)
            rows = []
    AuditEvent.objects.bulk_create(rows)
    with triggers_suspended(connection):  # the head only advances one seq per append otherwise
        AuditChainHead.objects.update_or_create(pk=1, defaults={"seq": seq, "hash": prev})


def tamper(sql: str, params: list[Any] | None = None) -> None:
    with triggers_suspended(connection), connection.cursor() as cursor:
        cursor.execute(sql, params or [])


def run_verifier(*args: str) -> subprocess.CompletedProcess[str]:
    """The offline verifier in a clean interpreter: no Django settings in its environment."""
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "governance.audit.verify", *args],
        cwd="/",
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
