"""Export the audit trail: `--format bundle` (verifiable zip), `jsonl` or `csv` (filterable)."""

from __future__ import annotations

import sys
from datetime import datetime
from typing import Any, BinaryIO

from django.core.management.base import BaseCommand, CommandError, CommandParser

from governance.audit.actions import AuditAction
from governance.audit.exports import iter_csv, iter_jsonl, write_bundle
from governance.audit.selectors import audit_events_filter


def _datetime(value: str) -> datetime:
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise CommandError(f"not an ISO 8601 date-time: {value!r}") from None
    if moment.tzinfo is None:
        raise CommandError(f"give a timezone (e.g. Z or +00:00): {value!r}")
    return moment


class Command(BaseCommand):
    help = "Export audit events (jsonl/csv, filterable) or the verifiable bundle (zip)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--format", choices=["bundle", "jsonl", "csv"], default="bundle")
        parser.add_argument("--output", "-o", required=True, help="file to write ('-' for stdout, not for bundle)")
        parser.add_argument("--since")
        parser.add_argument("--until")
        parser.add_argument("--actor")
        parser.add_argument("--action", choices=sorted(a.label for a in AuditAction))
        parser.add_argument("--object-type")
        parser.add_argument("--object-id")

    def handle(self, *args: Any, **options: Any) -> None:
        output = options["output"]
        if options["format"] == "bundle":
            if output == "-":
                raise CommandError("a bundle is a zip file: give --output PATH")
            with open(output, "wb") as bundle_file:
                manifest = write_bundle(bundle_file)
            self.stderr.write(f"wrote {output}: {manifest['counts']}")
            return
        events = audit_events_filter(
            since=_datetime(options["since"]) if options["since"] else None,
            until=_datetime(options["until"]) if options["until"] else None,
            actor=options["actor"],
            action=next((int(a) for a in AuditAction if a.label == options["action"]), None),
            object_type=options["object_type"],
            object_id=options["object_id"],
        )
        chunks = iter_jsonl(events) if options["format"] == "jsonl" else iter_csv(events)
        target: BinaryIO = sys.stdout.buffer if output == "-" else open(output, "wb")  # noqa: SIM115
        try:
            for chunk in chunks:
                target.write(chunk)
        finally:
            if target is not sys.stdout.buffer:
                target.close()
