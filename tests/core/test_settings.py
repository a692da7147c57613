"""The settings module itself refuses bad configuration (run in a subprocess: settings load once)."""

import os
import secrets
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _run(*args: str, environ: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *args], cwd=ROOT, env=environ, capture_output=True, text=True, check=False)


def _load_settings(code: str = "import governance.settings", **env: str) -> subprocess.CompletedProcess[str]:
    """Run `code` with the settings' own variables unset but for `env`."""
    environ = {
        k: v
        for k, v in os.environ.items()
        if k not in {"DATABASE_URL", "CELERY_BROKER_URL", "CACHE_URL", "SECRET_KEY", "DEBUG"}
    }
    environ.update(env)
    return _run("-c", code, environ=environ)


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"DEBUG": "1", "DATABASE_URL": "mysql://x@y/z"}, "DATABASE_URL must be postgres:// or sqlite://"),
        ({"DEBUG": "1", "CELERY_BROKER_URL": "amqp://guest@localhost//"}, "CELERY_BROKER_URL must be"),
        ({"DEBUG": "perhaps"}, "DEBUG must be one of"),
        ({}, "SECRET_KEY (or SECRET_KEY_FILE) must be set"),
        ({"SECRET_KEY": "k" * 50, "SECURE_HSTS_SECONDS": "-1"}, "SECURE_HSTS_SECONDS must be >= 0"),
    ],
)
def test_bad_settings_fail_loudly(env: dict[str, str], message: str) -> None:
    result = _load_settings(**env)
    assert result.returncode != 0
    assert message in result.stderr


def test_production_settings_pass_deploy_checks(tmp_path: Path) -> None:
    environ = dict(
        os.environ,
        SECRET_KEY=secrets.token_urlsafe(50),
        DEBUG="0",
        DJANGO_SETTINGS_MODULE="governance.settings",
    )
    result = _run("manage.py", "check", "--deploy", "--fail-level", "WARNING", environ=environ)
    assert result.returncode == 0, result.stderr
    assert "no issues" in result.stdout


@pytest.mark.parametrize(
    ("cache_url", "engine"),
    [
        ("", "django.contrib.sessions.backends.db"),
        ("redis://127.0.0.1:6379/9", "django.contrib.sessions.backends.cached_db"),
    ],
)
def test_sessions_read_from_the_cache_only_when_it_is_shared(cache_url: str, engine: str) -> None:
    """A per-process cache would keep a session another worker ended (logout): sessions are read
    from the cache only when CACHE_URL names a shared one, and written through to the database."""
    result = _load_settings("import governance.settings as s; print(s.SESSION_ENGINE)", DEBUG="1", CACHE_URL=cache_url)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == engine
