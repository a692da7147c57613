from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from governance.core.env import env_bool, env_int, env_list, env_secret, env_str


def test_env_bool_accepts_common_spellings() -> None:
    assert env_bool("X", False, environ={"X": "yes"}) is True
    assert env_bool("X", True, environ={"X": "0"}) is False
    assert env_bool("X", True, environ={}) is True


def test_env_bool_rejects_garbage_naming_the_variable() -> None:
    with pytest.raises(ImproperlyConfigured, match="DEBUG"):
        env_bool("DEBUG", False, environ={"DEBUG": "maybe"})


def test_env_int_rejects_non_integers_and_out_of_range() -> None:
    with pytest.raises(ImproperlyConfigured, match="WORKERS must be an integer"):
        env_int("WORKERS", 1, environ={"WORKERS": "two"})
    with pytest.raises(ImproperlyConfigured, match="WORKERS must be >= 1"):
        env_int("WORKERS", 1, minimum=1, environ={"WORKERS": "0"})
    assert env_int("WORKERS", 1, environ={"WORKERS": " 4 "}) == 4


def test_env_list_rejects_empty_items() -> None:
    assert env_list("ALLOWED_HOSTS", [], environ={"ALLOWED_HOSTS": "a.example, b.example"}) == [
        "a.example",
        "b.example",
    ]
    with pytest.raises(ImproperlyConfigured, match="ALLOWED_HOSTS"):
        env_list("ALLOWED_HOSTS", [], environ={"ALLOWED_HOSTS": "a.example,,b"})


def test_env_str_required() -> None:
    with pytest.raises(ImproperlyConfigured, match="DATABASE_URL must be set"):
        env_str("DATABASE_URL", environ={})


def test_env_secret_from_file(tmp_path: Path) -> None:
    secret = tmp_path / "key"
    secret.write_text("s3cret\n")
    assert env_secret("SECRET_KEY", environ={"SECRET_KEY_FILE": str(secret)}) == "s3cret"


def test_env_secret_errors_name_the_variable(tmp_path: Path) -> None:
    with pytest.raises(ImproperlyConfigured, match="SECRET_KEY_FILE"):
        env_secret("SECRET_KEY", environ={"SECRET_KEY_FILE": str(tmp_path / "missing")})
    empty = tmp_path / "empty"
    empty.write_text("")
    with pytest.raises(ImproperlyConfigured, match="is empty"):
        env_secret("SECRET_KEY", environ={"SECRET_KEY_FILE": str(empty)})
    with pytest.raises(ImproperlyConfigured, match="not both"):
        env_secret("SECRET_KEY", environ={"SECRET_KEY": "a", "SECRET_KEY_FILE": str(empty)})
    with pytest.raises(ImproperlyConfigured, match=r"SECRET_KEY \(or SECRET_KEY_FILE\) must be set"):
        env_secret("SECRET_KEY", environ={})
