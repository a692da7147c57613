from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from governance.audit.services import audit_checkpoint_create


class Command(BaseCommand):
    help = "Sign a checkpoint of the current chain head."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--force", action="store_true", help="sign even if the head did not move")

    def handle(self, *args: Any, **options: Any) -> None:
        checkpoint = audit_checkpoint_create(force=options["force"])
        if checkpoint is None:
            self.stdout.write("head unchanged since the last checkpoint; nothing signed")
        else:
            self.stdout.write(f"checkpoint seq {checkpoint.seq} {checkpoint.head_hash}")
