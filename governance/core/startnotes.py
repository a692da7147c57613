"""What `make run` prints once its services answer: the address, the demo users' passwords (on the
first start) and how to scrape /metrics. Bootstrap prints the passwords before honcho starts, and the
web server's, worker's and beat's start-up lines push them out of sight; here they come last.

    python -m governance.core.startnotes --passwords-file var/demo-passwords &
    exec honcho start

Started in the background just before honcho takes over the shell (so honcho is its parent): it waits
for /healthz and for the worker's answer to a ping, prints, and exits; it exits at once, printing
nothing, when honcho has gone (Ctrl-C before the services came up).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import urllib.request
from pathlib import Path

from governance.core.localenv import ENV_FILE, metrics_token, read_local_env

WAIT_S = 600  # a first start on a busy machine migrates and loads the catalog first
RULE = "=" * 78


def base_url(environ: dict[str, str], file_values: dict[str, str]) -> str:
    host = environ.get("HOST") or file_values.get("HOST") or "127.0.0.1"
    port = environ.get("PORT") or file_values.get("PORT") or "8000"
    if host in ("0.0.0.0", "::", ""):  # noqa: S104  (listening everywhere: this host reaches it on loopback)
        host = "127.0.0.1"
    return f"http://{host}:{port}"


def notes(url: str, token: str, passwords: str | None) -> str:
    lines = [RULE, f"Serving {url}/ (Ctrl-C stops the web server, worker and beat)"]
    if passwords:
        lines += [
            "Demo users (passwords shown only at this first start; seed_demo --reset-passwords sets new ones):",
            *passwords.rstrip("\n").splitlines(),
        ]
    else:
        lines.append("Demo users: their passwords were printed at the first start (seed_demo --reset-passwords)")
    if token:
        lines.append(f"Metrics (Prometheus; METRICS_TOKEN in {ENV_FILE.name}):")
        lines.append(f'  curl -H "Authorization: Bearer {token}" {url}/metrics')
    else:
        lines.append("Metrics: /metrics answers METRICS_TOKEN_FILE's token or METRICS_ALLOWED_NETWORKS")
    lines.append(RULE)
    return "\n".join(lines) + "\n"


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/healthz", timeout=5) as answer:  # noqa: S310  (our own http URL)
            return bool(answer.status == 200)
    except OSError:
        return False


def _worker_answers() -> bool:
    try:
        from governance.celery import app  # loads the settings: a bad one is the web server's to report

        return bool(app.control.ping(timeout=1))
    except Exception:  # the broker not there yet, or no settings: asked again until WAIT_S
        return False


def wait_until_up(url: str, parent: int, wait_s: float) -> bool:
    """True once the web server and a worker answer; False when honcho (our parent) has gone."""
    deadline = time.monotonic() + wait_s
    ready = {"web": False, "worker": False}
    while time.monotonic() < deadline:
        if os.getppid() != parent:
            return False
        ready["web"] = ready["web"] or _answers(url)
        ready["worker"] = ready["worker"] or (ready["web"] and _worker_answers())
        if all(ready.values()):
            return True
        time.sleep(1)
    return os.getppid() == parent  # slow: print anyway, the address and token still hold


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m governance.core.startnotes")
    parser.add_argument("--passwords-file", type=Path, help="the demo passwords bootstrap wrote (removed once shown)")
    parser.add_argument("--env-file", type=Path, default=ENV_FILE)
    parser.add_argument("--wait-s", type=float, default=WAIT_S)
    args = parser.parse_args(argv)
    parent = os.getppid()
    environ = dict(os.environ)
    url = base_url(environ, read_local_env(args.env_file))
    if not wait_until_up(url, parent, args.wait_s):
        return 0
    passwords_file: Path | None = args.passwords_file
    passwords = passwords_file.read_text() if passwords_file and passwords_file.is_file() else None
    sys.stdout.write(notes(url, metrics_token(args.env_file, environ), passwords))
    sys.stdout.flush()
    if passwords_file:
        passwords_file.unlink(missing_ok=True)  # shown: a password is kept on disk no longer than that
    return 0


if __name__ == "__main__":
    sys.exit(main())
