"""Verify the live chain in the database with the offline verifier's checks, anchored by the
checkpoints published outside the database."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from governance.audit.integrity import verify_live_chain
from governance.audit.keys import load_signing_key


class Command(BaseCommand):
    help = (
        "Check every hash, gaplessness, fork freedom, display columns, the chain head and every checkpoint of the "
        "live audit chain. Exit 0: verified and anchored; 1: failed; 3: events after the last published checkpoint "
        "are unanchored; 4 (with --restored): behind, the database ends before the published checkpoints (restored "
        "from an older backup: events missing, none altered)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--json", action="store_true")
        parser.add_argument(
            "--restored",
            action="store_true",
            help="this database was restored from a backup: events missing after its last one are reported as "
            "lost in the restore (exit 4) when everything present verifies, instead of as a removed tail (exit 1)",
        )
        parser.add_argument(
            "--checkpoints",
            help="a published checkpoint log to trust (default: AUDIT_CHECKPOINT_PUBLISH_PATH)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        trusted = Path(options["checkpoints"]) if options["checkpoints"] else None
        report = verify_live_chain(load_signing_key().public_key(), trusted, restored=options["restored"])
        if options["json"]:
            self.stdout.write(json.dumps(report.as_dict(), indent=2))
        if report.status == "failed":
            raise CommandError(
                f"audit chain FAILED at seq {report.first_bad_seq}: "
                + "; ".join(report.errors)
                + "".join(f"\nwarning: {warning}" for warning in report.warnings)
            )
        if report.status in ("unanchored", "behind"):
            # Never a silent OK: a superuser could have rewritten these events and re-hashed the chain,
            # and a restore that lost events must be noticed before the service takes new ones.
            raise CommandError(report.summary(), returncode=report.exit_code)
        if not options["json"]:
            self.stdout.write(report.summary())
