"""Issue an API token for a user; the clear token is printed once and never stored.

`--create-service-user` makes USER first when it does not exist: an account for a machine (billing,
CI) with no password and no role, so the token's scopes are all it can do."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import User
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction

from governance.core.errors import ApplicationError
from governance.core.selectors import team_by_name
from governance.core.tokens import TOKEN_SCOPES, api_token_issue


class Command(BaseCommand):
    help = "Issue a bearer token for USER (shown once)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")
        parser.add_argument("--name", required=True, help="what the token is for (shown in the admin)")
        parser.add_argument(
            "--scope",
            action="append",
            default=[],
            dest="scopes",
            help=f"repeatable; one of: {', '.join(sorted(TOKEN_SCOPES))}",
        )
        # A scoped token reaches only the requests of its team (the user's teams when none is given).
        parser.add_argument("--team", help="the team whose requests a scoped token may reach")
        parser.add_argument(
            "--create-service-user",
            action="store_true",
            help="create USER as a service account (no password, no role) when missing",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        username = options["username"]
        team = None
        if options["team"]:
            team = team_by_name(options["team"])
            if team is None:
                raise CommandError(f"no team named {options['team']!r}")
        with transaction.atomic():
            user = User.objects.filter(username=username).first()
            if user is None and not options["create_service_user"]:
                raise CommandError(f"no user named {username!r} (add --create-service-user to make a service account)")
            if user is None:
                user = User(username=username)
                user.set_unusable_password()
                user.full_clean(exclude=["password"])
                user.save()
                self.stderr.write(f"created service user {username!r} (no password, no role)")
            try:
                issued = api_token_issue(
                    user=user,
                    name=options["name"],
                    scopes=options["scopes"],
                    team=team,
                    actor="system:manage.py issue_token",
                )
            except ApplicationError as exc:
                raise CommandError(exc.message) from None
        self.stdout.write(issued.clear_text)
