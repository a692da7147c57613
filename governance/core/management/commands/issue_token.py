"""Issue an API token for a user; the clear token is printed once and never stored."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import User
from django.core.management.base import BaseCommand, CommandError, CommandParser

from governance.core.tokens import api_token_issue


class Command(BaseCommand):
    help = "Issue a bearer token for USER (shown once)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")
        parser.add_argument("--name", required=True)
        parser.add_argument("--scope", action="append", default=[], dest="scopes")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            user = User.objects.get(username=options["username"])
        except User.DoesNotExist:
            raise CommandError(f"no user named {options['username']!r}") from None
        issued = api_token_issue(user=user, name=options["name"], scopes=options["scopes"])
        self.stdout.write(issued.clear_text)
