import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.core.management.base import CommandError


@pytest.mark.django_db
def test_seed_demo_is_idempotent_and_prints_passwords_once(settings, capsys) -> None:  # type: ignore[no-untyped-def]
    settings.DEBUG = True
    call_command("seed_demo")
    first = capsys.readouterr().out
    assert "passwords shown only this once" in first
    call_command("seed_demo")
    second = capsys.readouterr().out
    assert "not shown again" in second
    assert User.objects.filter(username__in=["requester", "legal", "engineer", "auditor", "admin"]).count() == 5
    assert User.objects.get(username="legal").groups.filter(name="legal_reviewer").exists()


@pytest.mark.django_db
def test_seed_demo_refuses_without_debug(settings) -> None:  # type: ignore[no-untyped-def]
    settings.DEBUG = False
    with pytest.raises(CommandError, match="DEBUG"):
        call_command("seed_demo")
