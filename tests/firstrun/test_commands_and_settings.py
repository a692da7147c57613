"""Documented commands work from a checkout: issue_token makes service users and refuses unknown
scopes; `.env` (written by make run) is read by manage.py; kombu's broadcast folder stays in var/."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import time
from io import StringIO
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command

from governance.core.localenv import load_local_env, write_local_env
from governance.core.models import ApiToken
from governance.core.tokens import api_token_resolve

ROOT = Path(__file__).resolve().parents[2]


def test_issue_token_creates_a_service_user_only_when_asked(db: None) -> None:
    with pytest.raises(CommandError, match="no user named 'billing'"):
        call_command("issue_token", "billing", "--name", "billing", "--scope", "usage:write")
    out = StringIO()
    call_command(
        "issue_token",
        "billing",
        "--create-service-user",
        "--name",
        "billing",
        "--scope",
        "usage:write",
        stdout=out,
        stderr=StringIO(),
    )
    user = User.objects.get(username="billing")
    assert not user.has_usable_password()
    assert not user.groups.exists()
    assert not user.is_staff
    token = api_token_resolve(out.getvalue().strip())
    assert token is not None
    assert token.user == user
    assert token.scopes == ["usage:write"]


def test_issue_token_refuses_unknown_scopes_and_creates_nothing(db: None) -> None:
    with pytest.raises(CommandError, match=r"scopes: unknown scope\(s\) usage:wirte; known: gate:check, usage:write"):
        call_command("issue_token", "ci", "--create-service-user", "--name", "ci", "--scope", "usage:wirte")
    assert not User.objects.filter(username="ci").exists()  # refused atomically
    assert not ApiToken.objects.exists()


def test_local_env_file_is_generated_once_and_the_environment_wins(tmp_path: Path, monkeypatch) -> None:
    path = tmp_path / ".env"
    first = write_local_env(path, environ={})
    assert (first["DEBUG"], first["HOST"], first["PORT"]) == ("1", "127.0.0.1", "8000")
    assert len(first["SECRET_KEY"]) >= 50
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    again = write_local_env(path, environ={"PORT": "9000"})
    assert again["SECRET_KEY"] == first["SECRET_KEY"]  # sessions survive a restart
    assert again["PORT"] == "9000"
    with pytest.raises(ValueError, match="PORT"):
        write_local_env(path, environ={"PORT": "http"})
    monkeypatch.setenv("HOST", "0.0.0.0")
    monkeypatch.delenv("SECRET_KEY", raising=False)
    assert load_local_env(path)
    assert os.environ["HOST"] == "0.0.0.0"
    assert os.environ["SECRET_KEY"] == first["SECRET_KEY"]
    assert not load_local_env(tmp_path / "absent")


def _clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("DEBUG", "SECRET_KEY", "DJANGO_SETTINGS_MODULE")}
    return {**env, **extra}


def test_manage_py_reads_the_checkouts_env_file(tmp_path: Path) -> None:
    """In a copy of the checkout: without .env, production settings refuse to start (no secret);
    after `python -m governance.core.localenv` (what make run does), `manage.py check` works with
    nothing exported."""
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    for name in ("governance", "planner", "templates", "static"):
        subprocess.run(["cp", "-r", str(ROOT / name), str(checkout / name)], check=True)
    (checkout / "manage.py").write_text((ROOT / "manage.py").read_text())
    env = _clean_env(GOVERNANCE_VAR_DIR=str(tmp_path / "var"), PYTHONPATH=str(checkout))

    def manage_check() -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "manage.py", "check"], cwd=checkout, env=env, capture_output=True, text=True, check=False
        )

    refused = manage_check()
    assert refused.returncode != 0
    assert "SECRET_KEY" in refused.stderr
    subprocess.run(
        [sys.executable, "-m", "governance.core.localenv"], cwd=checkout, env=env, check=True, capture_output=True
    )
    assert "SECRET_KEY=" in (checkout / ".env").read_text()
    ok = manage_check()
    assert ok.returncode == 0, ok.stderr[-2000:]


def test_filesystem_broker_keeps_its_control_folder_in_var(tmp_path: Path) -> None:
    """kombu's default broadcast folder is ./control of the working directory (it was committed once)."""
    workdir = tmp_path / "cwd"
    workdir.mkdir()
    var = tmp_path / "var"
    env = _clean_env(
        DEBUG="1",
        CELERY_BROKER_URL="filesystem://",
        GOVERNANCE_VAR_DIR=str(var),
        DATABASE_URL=f"sqlite:///{tmp_path / 'db.sqlite3'}",
        PYTHONPATH=str(ROOT),
    )
    worker = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "governance.celery", "worker", "--pool=solo", "--loglevel=INFO"],
        cwd=workdir,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not list((var / "celery-broker" / "control").glob("*.exchange")):
            time.sleep(0.5)
    finally:
        worker.terminate()
        output = worker.communicate(timeout=30)[0]
    assert list((var / "celery-broker" / "control").glob("*.exchange")), output[-2000:]
    assert not (workdir / "control").exists()
    tracked = subprocess.run(["git", "ls-files", "control"], cwd=ROOT, capture_output=True, text=True, check=True)
    assert tracked.stdout == ""
