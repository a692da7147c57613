"""Everything `make run` needs after migrate: reference data, keys, and (DEBUG only) demo users and
the embedded `local` cluster with its tiny test model.

Each step is idempotent, so running it on every start is safe.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandParser

BOOTSTRAP_STEPS: list[str] = ["audit_keygen", "pki_init", "load_license_catalog"]


class Command(BaseCommand):
    help = "Load seed data and create keys (idempotent); create demo users when DEBUG is on."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--passwords-file",
            type=Path,
            help="DEBUG: also write new demo passwords there, for `make run`'s start-up notes",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        for step in BOOTSTRAP_STEPS:
            call_command(step)
        if settings.DEBUG:
            call_command("seed_demo", passwords_file=options.get("passwords_file"))
            # Runs jobs as subprocesses of this host: a development convenience, never made in production.
            call_command("local_cluster")
