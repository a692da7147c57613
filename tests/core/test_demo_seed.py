import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.core.management.base import CommandError


@pytest.mark.django_db
def test_seed_demo_is_idempotent_and_prints_passwords_once(settings, capsys) -> None:
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
def test_demo_users_have_email_addresses_and_two_legal_reviewers(settings) -> None:
    """Issue 13: notifications reach the demo users; a blocker's waiver needs two legal reviewers."""
    settings.DEBUG = True
    User.objects.create_user(username="legal2")  # an existing user without an address gets one
    call_command("seed_demo")
    users = User.objects.filter(username__in=["requester", "legal", "legal2", "engineer", "auditor", "admin"])
    assert {u.username: u.email for u in users} == {
        name: f"{name}@example.com" for name in ["requester", "legal", "legal2", "engineer", "auditor", "admin"]
    }
    assert User.objects.filter(groups__name="legal_reviewer").count() == 2


@pytest.mark.django_db
def test_seed_demo_refuses_without_debug(settings) -> None:
    settings.DEBUG = False
    with pytest.raises(CommandError, match="DEBUG"):
        call_command("seed_demo")
