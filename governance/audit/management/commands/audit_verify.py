"""Verify the live chain in the database with the offline verifier's checks."""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from governance.audit.keys import load_signing_key
from governance.audit.models import AuditCheckpoint, AuditEvent
from governance.audit.verify import CheckpointRecord, EventRecord, verify_chain


class Command(BaseCommand):
    help = "Check every hash, gaplessness, fork freedom and every checkpoint of the live audit chain."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--json", action="store_true")

    def handle(self, *args: Any, **options: Any) -> None:
        rows = AuditEvent.objects.order_by("seq").values_list("seq", "prev_hash", "hash", "body")
        events = (EventRecord(seq, prev, h, body.encode()) for seq, prev, h, body in rows.iterator(chunk_size=5000))
        checkpoints = [
            CheckpointRecord(c.key_id, c.signature, c.body.encode()) for c in AuditCheckpoint.objects.order_by("seq")
        ]
        report = verify_chain(events, checkpoints, load_signing_key().public_key())
        if options["json"]:
            self.stdout.write(json.dumps(report.as_dict(), indent=2))
        if not report.ok:
            raise CommandError(f"audit chain FAILED at seq {report.first_bad_seq}: " + "; ".join(report.errors))
        if not options["json"]:
            self.stdout.write(
                f"OK: {report.events} events, {report.checkpoints} checkpoints, head seq {report.head_seq}"
            )
