"""Verify a signed approval packet: each signature and whether its evidence is still current.
Exit status 0 when every signature is accepted and the evidence is current, 1 otherwise."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from governance.approvals.services import packet_verify


class Command(BaseCommand):
    help = "Verify an approval packet PDF (signatures, trust, DocMDP, evidence digest) and store the result."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file", type=Path)

    def handle(self, *args: Any, **options: Any) -> None:
        path: Path = options["file"]
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise CommandError(f"cannot read {path}: {exc.strerror}") from None
        from governance.approvals.verification import UploadRefused

        try:
            report, stored = packet_verify(data=data, actor="system:verify_approval")
        except UploadRefused as refused:
            raise CommandError(f"{path}: {refused}") from None
        result = {**report.as_dict(), "evidence_current": stored.evidence_current}
        self.stdout.write(json.dumps(result, indent=2))
        if not (report.all_valid and stored.evidence_current):
            raise SystemExit(1)
