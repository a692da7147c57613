"""The local env file (`.env` in the checkout) that `make run` writes and `manage.py` reads.

It makes a checkout work without exporting anything: a generated SECRET_KEY and METRICS_TOKEN (kept
across runs), DEBUG=1, and the HOST/PORT the web server listens on (honcho reads the same file).
Variables set in the environment always win over the file. Production never has this file: without
it, settings still refuse to start with no real secret. Imports neither Django nor the project's apps.
"""

from __future__ import annotations

import io
import os
import secrets
import sys
from pathlib import Path

from dotenv import dotenv_values, load_dotenv

ENV_FILE = Path(__file__).resolve().parents[2] / ".env"
DEFAULTS = {"DEBUG": "1", "HOST": "127.0.0.1", "PORT": "8000"}
HEADER = "# Written by `make run` (python -m governance.core.localenv): local development only, never commit.\n"


def load_local_env(path: Path = ENV_FILE) -> bool:
    """Export the file's variables that the environment does not already set; False when absent.
    No `${VAR}` expansion: honcho, which exports the same file to the processes it starts, has none."""
    return path.is_file() and load_dotenv(path, override=False, interpolate=False)


def read_local_env(path: Path = ENV_FILE) -> dict[str, str]:
    """The file's variables as the settings read them (python-dotenv, no expansion); {} when absent."""
    if not path.is_file():
        return {}
    return {k: v for k, v in dotenv_values(path, interpolate=False).items() if v is not None}


def metrics_token(path: Path = ENV_FILE, environ: dict[str, str] | None = None) -> str:
    """The token a local scrape of /metrics presents: the environment's, else the file's."""
    environ = dict(os.environ if environ is None else environ)
    return environ.get("METRICS_TOKEN") or read_local_env(path).get("METRICS_TOKEN", "")


def write_local_env(path: Path = ENV_FILE, environ: dict[str, str] | None = None) -> dict[str, str]:
    """Create or refresh the file: the environment's DEBUG/HOST/PORT, else the file's, else defaults;
    the secret key and the metrics token are generated once and then kept (sessions and a scraper's
    configuration survive a restart). Every other line the user wrote keeps its value."""
    environ = dict(os.environ if environ is None else environ)
    current = read_local_env(path)
    values = dict(current)
    for name, default in DEFAULTS.items():
        values[name] = environ.get(name) or current.get(name) or default
    if not values.get("SECRET_KEY"):
        values["SECRET_KEY"] = secrets.token_urlsafe(50)
    # /metrics answers only a scraper that presents METRICS_TOKEN (or connects from
    # METRICS_ALLOWED_NETWORKS): without a token a local run's /metrics is 403 to everyone.
    if not any(values.get(name) or environ.get(name) for name in ("METRICS_TOKEN", "METRICS_TOKEN_FILE")):
        values["METRICS_TOKEN"] = secrets.token_urlsafe(32)
    if not values["PORT"].isdigit() or not 0 < int(values["PORT"]) < 65536:
        raise ValueError(f"PORT must be a TCP port number, got {values['PORT']!r}")
    body = HEADER + "".join(f"{env_line(name, value)}\n" for name, value in values.items())
    temporary = path.with_name(f".{path.name}.tmp")
    # Written 0600 from the start: the file holds the secret key.
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(body)
    os.replace(temporary, path)
    return values


def env_line(name: str, value: str) -> str:
    """`NAME='value'`, quoted so that both readers of the file get `value` back: honcho splits a line
    into shell words and joins them, so unquoted it drops the quotes and spaces of a JSON value
    (`{"a": "b"}` became `{a:b}`) and cuts at `#`; python-dotenv (the settings) reads the quotes.
    Single quotes are literal to both; a value holding one goes in double quotes, escaped."""
    escaped = value.replace("\\", "\\\\").replace('"', '\\"')
    for line in (f"{name}='{value}'", f'{name}="{escaped}"'):
        if _honcho_reads(line) == {name: value} and _dotenv_reads(line) == {name: value}:
            return line
    raise ValueError(
        f"{name}: its value (a line break, or a quote beside a backslash sequence) cannot be written to "
        f"{ENV_FILE.name} so that honcho and the settings read it alike; export it in the environment instead"
    )


def _honcho_reads(line: str) -> dict[str, str]:
    from honcho.environ import parse  # type: ignore[import-untyped]  # wherever `make run` is; never in the settings

    try:
        return dict(parse(line))
    except ValueError:  # shlex: "No closing quotation" (a line break inside the quotes)
        return {}


def _dotenv_reads(line: str) -> dict[str, str]:
    return {k: v for k, v in dotenv_values(stream=io.StringIO(line), interpolate=False).items() if v is not None}


if __name__ == "__main__":
    written = write_local_env(Path(sys.argv[1]) if len(sys.argv) > 1 else ENV_FILE)
    print(f"local settings: {ENV_FILE.name} (DEBUG={written['DEBUG']}, http://{written['HOST']}:{written['PORT']}/)")
