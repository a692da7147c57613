"""Print the public half of the checkpoint signing key (PEM), to publish where auditors fetch it."""

from typing import Any

from django.core.management.base import BaseCommand

from governance.audit.keys import key_id, load_signing_key, public_key_pem


class Command(BaseCommand):
    help = "Print the audit checkpoint public key (PEM); its key id (SHA-256) goes to stderr."

    def handle(self, *args: Any, **options: Any) -> None:
        public = load_signing_key().public_key()
        self.stdout.write(public_key_pem(public).decode(), ending="")
        self.stderr.write(f"key id {key_id(public)}")
