from typing import Any

from django.core.management.base import BaseCommand

from governance.audit.keys import generate_signing_key, signing_key_path


class Command(BaseCommand):
    help = "Create the Ed25519 checkpoint signing key if it does not exist (idempotent)."

    def handle(self, *args: Any, **options: Any) -> None:
        path = signing_key_path()
        if generate_signing_key(path):
            self.stdout.write(f"created audit signing key {path}")
        else:
            self.stdout.write(f"audit signing key exists: {path}")
