"""`manage.py seed_demo --reset-passwords`: a developer who lost the passwords printed once gets new
ones for the demo users (DEBUG only), and the old ones stop working."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.core.management.base import CommandError

from governance.core.management.commands.seed_demo import DEMO_USERS


@pytest.mark.django_db
def test_reset_passwords_prints_new_working_ones(settings: Any, capsys: Any) -> None:
    settings.DEBUG = True
    call_command("seed_demo")
    first = dict(re.findall(r"^\s+(\w+)\s+\w+\s+(\S+)$", capsys.readouterr().out, re.MULTILINE))
    call_command("seed_demo", "--reset-passwords")
    printed = capsys.readouterr().out
    second = dict(re.findall(r"^\s+(\w+)\s+\w+\s+(\S+)$", printed, re.MULTILINE))
    assert set(second) == set(DEMO_USERS)
    for username in DEMO_USERS:
        assert second[username] != first[username]
        user = User.objects.get(username=username)
        assert user.check_password(second[username])
        assert not user.check_password(first[username])


@pytest.mark.django_db
def test_reset_passwords_refuses_without_debug(settings: Any) -> None:
    settings.DEBUG = False
    with pytest.raises(CommandError, match="DEBUG"):
        call_command("seed_demo", "--reset-passwords")


@pytest.mark.django_db
def test_bootstrap_keeps_new_passwords_for_the_start_up_notes_only(settings: Any, capsys: Any, tmp_path: Any) -> None:
    """`make run` repeats the first start's passwords once its services are up: bootstrap writes them
    to a file only this user reads; a later start writes none (the users exist, nothing is new)."""
    import stat

    settings.DEBUG = True
    kept = tmp_path / "var" / "demo-passwords"
    call_command("seed_demo", passwords_file=kept)
    printed = dict(re.findall(r"^\s+(\w+)\s+\w+\s+(\S+)$", capsys.readouterr().out, re.MULTILINE))
    assert stat.S_IMODE(kept.stat().st_mode) == 0o600
    assert dict(re.findall(r"^\s+(\w+)\s+\w+\s+(\S+)$", kept.read_text(), re.MULTILINE)) == printed
    kept.unlink()  # what the notes do once they have shown it
    call_command("seed_demo", passwords_file=kept)
    assert not kept.exists()
