"""The restore drill (docs/operations.md, "Backups"): restore a dump into a fresh database and
verify its audit chain against the published checkpoints."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from governance.audit.restore import RestoreDrillError, restore_drill


class Command(BaseCommand):
    help = (
        "pg_dump this database (or take --dump), restore it into a fresh database, run audit_verify there against "
        "the published checkpoints, drop it. Exit status as audit_verify's: 0 ok, 1 failed (tampering), "
        "3 unanchored, 4 behind (the dump ends before the last published checkpoint: events lost, none altered)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--dump", help="a pg_dump --format=custom file to restore (default: dump this database now)"
        )
        parser.add_argument(
            "--checkpoints", help="the published checkpoint log (default: AUDIT_CHECKPOINT_PUBLISH_PATH)"
        )
        parser.add_argument("--keep", action="store_true", help="keep the restored database for inspection")
        parser.add_argument("--json", action="store_true")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            result = restore_drill(
                dump=Path(options["dump"]) if options["dump"] else None,
                checkpoints=Path(options["checkpoints"]) if options["checkpoints"] else None,
                keep=options["keep"],
            )
        except RestoreDrillError as exc:
            raise CommandError(f"restore drill could not run: {exc.message}") from None
        if options["json"]:
            self.stdout.write(json.dumps({"database": result.database, "exit_code": result.exit_code, **result.report}))
        else:
            self.stdout.write(f"restored into {result.database}{' (kept)' if options['keep'] else ' (dropped)'}")
        if result.exit_code != 0:
            raise CommandError(result.summary, returncode=result.exit_code)
        if not options["json"]:
            self.stdout.write(result.summary)
