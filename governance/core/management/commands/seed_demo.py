"""Idempotent demo data: one team and a user per role (two legal reviewers, so a blocker's waiver can
be proposed and confirmed), each with an e-mail address for notifications. Passwords are printed
once, and only in DEBUG."""

from __future__ import annotations

import os
import secrets
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth.models import Group, User
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction

from governance.core.models import Team
from governance.core.roles import Role

DEMO_USERS = {
    "requester": Role.REQUESTER,
    "legal": Role.LEGAL_REVIEWER,
    "legal2": Role.LEGAL_REVIEWER,
    "engineer": Role.ENGINEERING_REVIEWER,
    "auditor": Role.AUDITOR,
    "admin": Role.ADMIN,
}
DEMO_EMAIL_DOMAIN = "example.com"  # reserved for documentation (RFC 2606): nothing is delivered there


def demo_email(username: str) -> str:
    return f"{username}@{DEMO_EMAIL_DOMAIN}"


class Command(BaseCommand):
    help = (
        "Create the demo team and one user per role (DEBUG only). Safe to run again; --reset-passwords "
        "gives the demo users new passwords and prints them."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--reset-passwords",
            action="store_true",
            help="set and print new passwords for the demo users (the first ones are printed only once)",
        )
        parser.add_argument(
            "--passwords-file",
            type=Path,
            help="also write the new passwords there (0600), for `make run` to repeat once its services are up",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if not settings.DEBUG:
            raise CommandError("seed_demo creates users with known roles and runs only with DEBUG on")
        reset = bool(options.get("reset_passwords"))
        created: list[tuple[str, str, str]] = []
        with transaction.atomic():
            team, _ = Team.objects.get_or_create(name="platform")
            for username, role in DEMO_USERS.items():
                user, was_created = User.objects.get_or_create(username=username)
                if was_created or reset:
                    password = secrets.token_urlsafe(12)
                    user.set_password(password)
                    user.is_staff = role == Role.ADMIN
                    user.is_superuser = role == Role.ADMIN
                    user.save()
                    created.append((username, str(role.value), password))
                if not user.email:
                    user.email = demo_email(username)
                    user.save(update_fields=["email"])
                user.groups.add(Group.objects.get(name=role.value))
                if role == Role.REQUESTER:
                    team.members.add(user)
        if created:
            self.stdout.write("Demo users (passwords shown only this once; seed_demo --reset-passwords sets new ones):")
            lines = [f"  {username:<10} {role_name:<22} {password}" for username, role_name, password in created]
            for line in lines:
                self.stdout.write(line)
            if options.get("passwords_file"):
                _write_private(options["passwords_file"], "".join(f"{line}\n" for line in lines))
        else:
            self.stdout.write(
                "Demo users already exist; passwords are not shown again (seed_demo --reset-passwords sets new ones)."
            )


def _write_private(path: Path, text: str) -> None:
    """Readable by this user only from the start; the start-up notes remove it once shown."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(text)
