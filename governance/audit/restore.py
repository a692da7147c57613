"""The restore drill: dump the database (or take a given dump), restore it into a fresh database,
and verify the restored audit chain against the published checkpoints.

A backup nobody restored is a hope. The drill shows that a dump restores into a database the
verifier accepts, and what a restore would lose: a dump older than the last published
checkpoint verifies as `behind` (events missing), never as tampering. PostgreSQL only: the
tools are pg_dump and pg_restore, run with argument lists (no shell) and the password in the
environment (never on a command line, where `ps` shows it)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

from django.conf import settings
from django.db import connection

from governance.core.errors import ApplicationError


class RestoreDrillError(ApplicationError):
    """The drill itself could not run (no PostgreSQL, a tool failed)."""


@dataclass(frozen=True, slots=True)
class RestoreDrillResult:
    database: str  # the restored database (dropped afterwards unless kept)
    database_url: str  # to reach a kept one (carries the password of DATABASE_URL: never log it)
    dump_path: str
    exit_code: int  # audit_verify's: 0 ok, 1 failed, 3 unanchored, 4 behind
    report: dict[str, Any]
    summary: str


def _server() -> dict[str, str]:
    db = settings.DATABASES["default"]
    if connection.vendor != "postgresql":
        raise RestoreDrillError("the restore drill needs PostgreSQL (DATABASE_URL=postgres://…)")
    return {
        "host": str(db.get("HOST") or "127.0.0.1"),
        "port": str(db.get("PORT") or 5432),
        "user": str(db.get("USER") or ""),
        "password": str(db.get("PASSWORD") or ""),
        "name": str(db["NAME"]),
    }


def _tool_env(server: dict[str, str]) -> dict[str, str]:
    env = dict(os.environ)
    env.update(PGHOST=server["host"], PGPORT=server["port"], PGUSER=server["user"])
    if server["password"]:
        env["PGPASSWORD"] = server["password"]
    return env


def _run(argv: list[str], env: dict[str, str], what: str) -> None:
    try:
        # A fixed tool name with generated or configured arguments, no shell.
        result = subprocess.run(argv, env=env, capture_output=True, text=True, check=False, timeout=3600)  # noqa: S603
    except FileNotFoundError:
        raise RestoreDrillError(f"{argv[0]} is not installed (PostgreSQL client tools)") from None
    if result.returncode != 0:
        raise RestoreDrillError(f"{what} failed: {result.stderr.strip()[-2000:]}")


def database_dump(path: Path) -> Path:
    """pg_dump of the configured database in the custom format (what docs/operations.md asks for)."""
    server = _server()
    _run(["pg_dump", "--format=custom", "--file", str(path), "--dbname", server["name"]], _tool_env(server), "pg_dump")
    return path


def _database_url(server: dict[str, str], name: str) -> str:
    credentials = quote(server["user"], safe="")
    if server["password"]:
        credentials += ":" + quote(server["password"], safe="")
    return f"postgres://{credentials}@{server['host']}:{server['port']}/{quote(name, safe='')}"


def restore_drill(
    *, dump: Path | None = None, checkpoints: Path | None = None, keep: bool = False
) -> RestoreDrillResult:
    """Restore `dump` (default: a fresh pg_dump of this database) into a new database and run
    `manage.py audit_verify` against it, with the published checkpoints (or `checkpoints`)."""
    server = _server()
    env = _tool_env(server)
    name = f"restore_drill_{uuid.uuid4().hex[:12]}"  # generated: never a caller's string in SQL
    with tempfile.TemporaryDirectory(prefix="restore-drill-") as folder:
        dump_path = dump or database_dump(Path(folder) / "governance.dump")
        _run(["createdb", "--template=template0", name], env, "createdb")
        try:
            _run(["pg_restore", "--no-owner", "--exit-on-error", "--dbname", name, str(dump_path)], env, "pg_restore")
            argv = [sys.executable, str(Path(settings.BASE_DIR) / "manage.py"), "audit_verify", "--json", "--restored"]
            if checkpoints is not None:
                argv += ["--checkpoints", str(checkpoints)]
            verify_env = {
                **os.environ,
                "DATABASE_URL": _database_url(server, name),
                "DJANGO_SETTINGS_MODULE": os.environ.get("DJANGO_SETTINGS_MODULE", "governance.settings"),
                "AUDIT_SIGNING_KEY_PATH": settings.AUDIT_SIGNING_KEY_PATH,
                "AUDIT_CHECKPOINT_PUBLISH_PATH": settings.AUDIT_CHECKPOINT_PUBLISH_PATH,
            }
            verified = subprocess.run(  # noqa: S603 - this interpreter and manage.py, fixed arguments
                argv, env=verify_env, capture_output=True, text=True, check=False, timeout=3600
            )
            try:
                report = json.loads(verified.stdout)
            except ValueError:
                raise RestoreDrillError(f"audit_verify gave no report: {verified.stderr.strip()[-2000:]}") from None
            summary = verified.stderr.strip().removeprefix("CommandError: ") or (
                f"OK: {report.get('events')} events, anchored to seq {report.get('anchored_seq')}"
            )
            return RestoreDrillResult(
                name, verify_env["DATABASE_URL"], str(dump_path), verified.returncode, report, summary
            )
        finally:
            if not keep:
                _run(["dropdb", "--if-exists", name], env, "dropdb")
