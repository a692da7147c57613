"""Typed readers for settings that come from the environment.

Each helper fails loudly (ImproperlyConfigured naming the variable) instead of silently
falling back when a value is present but malformed: a typo in production must not run.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def _raw(name: str, environ: Mapping[str, str] | None) -> str | None:
    env = os.environ if environ is None else environ
    return env.get(name)


def env_str(name: str, default: str | None = None, *, environ: Mapping[str, str] | None = None) -> str:
    value = _raw(name, environ)
    if value is None:
        if default is None:
            raise ImproperlyConfigured(f"{name} must be set")
        return default
    return value


def env_bool(name: str, default: bool, *, environ: Mapping[str, str] | None = None) -> bool:
    value = _raw(name, environ)
    if value is None:
        return default
    lowered = value.strip().lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise ImproperlyConfigured(f"{name} must be one of {sorted(_TRUE | _FALSE - {''})}, got {value!r}")


def env_int(
    name: str,
    default: int,
    *,
    minimum: int | None = None,
    maximum: int | None = None,
    environ: Mapping[str, str] | None = None,
) -> int:
    value = _raw(name, environ)
    if value is None:
        return default
    try:
        number = int(value.strip())
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be an integer, got {value!r}") from None
    if minimum is not None and number < minimum:
        raise ImproperlyConfigured(f"{name} must be >= {minimum}, got {number}")
    if maximum is not None and number > maximum:
        raise ImproperlyConfigured(f"{name} must be <= {maximum}, got {number}")
    return number


def env_list(name: str, default: list[str], *, environ: Mapping[str, str] | None = None) -> list[str]:
    value = _raw(name, environ)
    if value is None:
        return list(default)
    items = [item.strip() for item in value.split(",")]
    if any(not item for item in items):
        raise ImproperlyConfigured(f"{name} must be a comma-separated list without empty items, got {value!r}")
    return items


def env_secret(name: str, default: str | None = None, *, environ: Mapping[str, str] | None = None) -> str:
    """Read a secret from NAME, or from the file named by NAME_FILE (Docker/K8s secret mounts).

    Setting both is an error: which one wins would be a guess.
    """
    direct = _raw(name, environ)
    file_name = _raw(f"{name}_FILE", environ)
    if direct is not None and file_name is not None:
        raise ImproperlyConfigured(f"set {name} or {name}_FILE, not both")
    if file_name is not None:
        path = Path(file_name)
        try:
            secret = path.read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise ImproperlyConfigured(f"{name}_FILE={file_name!r} cannot be read: {exc.strerror}") from None
        if not secret:
            raise ImproperlyConfigured(f"{name}_FILE={file_name!r} is empty")
        return secret
    if direct is not None:
        if not direct.strip():
            raise ImproperlyConfigured(f"{name} is set but empty")
        return direct
    if default is None:
        raise ImproperlyConfigured(f"{name} (or {name}_FILE) must be set")
    return default
