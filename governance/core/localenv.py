"""The local env file (`.env` in the checkout) that `make run` writes and `manage.py` reads.

It makes a checkout work without exporting anything: a generated SECRET_KEY (kept across runs),
DEBUG=1, and the HOST/PORT the web server listens on (honcho reads the same file). Variables set
in the environment always win over the file. Production never has this file: without it, settings
still refuse to start with no real secret. Imports neither Django nor the project's apps.
"""

from __future__ import annotations

import os
import secrets
import sys
from pathlib import Path

from dotenv import dotenv_values, load_dotenv

ENV_FILE = Path(__file__).resolve().parents[2] / ".env"
DEFAULTS = {"DEBUG": "1", "HOST": "127.0.0.1", "PORT": "8000"}
HEADER = "# Written by `make run` (python -m governance.core.localenv): local development only, never commit.\n"


def load_local_env(path: Path = ENV_FILE) -> bool:
    """Export the file's variables that the environment does not already set; False when absent."""
    return path.is_file() and load_dotenv(path, override=False)


def write_local_env(path: Path = ENV_FILE, environ: dict[str, str] | None = None) -> dict[str, str]:
    """Create or refresh the file: the environment's DEBUG/HOST/PORT, else the file's, else defaults;
    the secret key is generated once and then kept (sessions survive a restart)."""
    environ = dict(os.environ if environ is None else environ)
    current = {k: v for k, v in dotenv_values(path).items() if v is not None} if path.is_file() else {}
    values = dict(current)
    for name, default in DEFAULTS.items():
        values[name] = environ.get(name) or current.get(name) or default
    if not values.get("SECRET_KEY"):
        values["SECRET_KEY"] = secrets.token_urlsafe(50)
    if not values["PORT"].isdigit() or not 0 < int(values["PORT"]) < 65536:
        raise ValueError(f"PORT must be a TCP port number, got {values['PORT']!r}")
    body = HEADER + "".join(f"{name}={value}\n" for name, value in values.items())
    temporary = path.with_name(f".{path.name}.tmp")
    # Written 0600 from the start: the file holds the secret key.
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(body)
    os.replace(temporary, path)
    return values


if __name__ == "__main__":
    written = write_local_env(Path(sys.argv[1]) if len(sys.argv) > 1 else ENV_FILE)
    print(f"local settings: {ENV_FILE.name} (DEBUG={written['DEBUG']}, http://{written['HOST']}:{written['PORT']}/)")
