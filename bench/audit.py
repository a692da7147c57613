"""Audit-chain benchmark (PostgreSQL): append throughput with 1 and 8 writer processes, as a ratio
against plain inserts of the same rows into an unchained table in the same run; verifier speed.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres .venv/bin/python bench/audit.py [--events 4000]

Runs in a scratch database (`governance_bench`, created and dropped here).
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlparse, urlunparse

ROOT = Path(__file__).resolve().parent.parent
BENCH_DB = "governance_bench"

PLAIN_TABLE = """
CREATE TABLE IF NOT EXISTS bench_plain_event (
    id bigserial PRIMARY KEY, occurred_at timestamptz NOT NULL, actor_name varchar(150) NOT NULL,
    action smallint NOT NULL, object_type varchar(64) NOT NULL, object_id varchar(64) NOT NULL,
    request_id varchar(64) NOT NULL, data jsonb NOT NULL, body text NOT NULL)
"""


def _setup_django(database_url: str) -> None:
    os.environ["DATABASE_URL"] = database_url
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "governance.settings_tests")
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()


def _writer(database_url: str, mode: str, count: int, writer: int, start: multiprocessing.synchronize.Event) -> None:
    _setup_django(database_url)
    import json

    from django.db import connection, transaction
    from django.utils import timezone

    from governance.audit.actions import AuditAction
    from governance.audit.services import audit_record
    from governance.core.canonical import canonical_json

    start.wait()
    for n in range(count):
        data = {"writer": writer, "n": n, "state": "RUNNING"}
        if mode == "chained":
            with transaction.atomic():
                audit_record(actor=f"system:bench-{writer}", action=AuditAction.JOB_STATE_CHANGED, data=data)
        else:
            # Same columns and the same canonical body, one transaction per row, no chain.
            body = canonical_json({"v": 1, "actor": f"system:bench-{writer}", "data": data}).decode()
            with transaction.atomic(), connection.cursor() as cursor:
                cursor.execute(
                    "INSERT INTO bench_plain_event (occurred_at, actor_name, action, object_type, object_id,"
                    " request_id, data, body) VALUES (%s, %s, %s, '', '', '', %s, %s)",
                    [
                        timezone.now(),
                        f"system:bench-{writer}",
                        int(AuditAction.JOB_STATE_CHANGED),
                        json.dumps(data),
                        body,
                    ],
                )


def _run(database_url: str, mode: str, writers: int, total: int) -> float:
    context = multiprocessing.get_context("spawn")
    start = context.Event()
    per_writer = total // writers
    processes = [
        context.Process(target=_writer, args=(database_url, mode, per_writer, w, start)) for w in range(writers)
    ]
    for process in processes:
        process.start()
    time.sleep(3)  # let every process finish Django setup before the clock starts
    began = time.perf_counter()
    start.set()
    for process in processes:
        process.join()
        if process.exitcode != 0:
            raise SystemExit(f"{mode} writer failed")
    return per_writer * writers / (time.perf_counter() - began)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--events", type=int, default=4000, help="events per append measurement")
    parser.add_argument("--verify-events", type=int, default=200_000)
    args = parser.parse_args()
    base_url = os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/postgres")
    if not base_url.startswith("postgres"):
        raise SystemExit("bench/audit.py measures PostgreSQL: set DATABASE_URL=postgres://…")
    import psycopg

    admin_url = urlunparse(urlparse(base_url)._replace(path="/postgres"))
    bench_url = urlunparse(urlparse(base_url)._replace(path=f"/{BENCH_DB}"))
    with psycopg.connect(admin_url, autocommit=True) as admin:
        admin.execute(f"DROP DATABASE IF EXISTS {BENCH_DB} WITH (FORCE)")
        admin.execute(f"CREATE DATABASE {BENCH_DB}")
    try:
        env = dict(os.environ, DATABASE_URL=bench_url, DJANGO_SETTINGS_MODULE="governance.settings_tests")
        subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, env=env, check=True)
        with psycopg.connect(bench_url, autocommit=True) as conn:
            conn.execute(PLAIN_TABLE)
        results = {}
        for writers in (1, 8):
            plain = _run(bench_url, "plain", writers, args.events)
            chained = _run(bench_url, "chained", writers, args.events)
            results[writers] = (plain, chained)
            print(
                f"append, {writers} writer(s): chained {chained:,.0f} events/s, plain insert {plain:,.0f} rows/s, "
                f"ratio {chained / plain:.2f}"
            )
        _verifier_speed(bench_url, args.verify_events)
    finally:
        with psycopg.connect(admin_url, autocommit=True) as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {BENCH_DB} WITH (FORCE)")


def _verifier_speed(database_url: str, count: int) -> None:
    _setup_django(database_url)
    import hashlib

    from governance.audit.keys import generate_signing_key
    from governance.audit.services import audit_checkpoint_create
    from governance.audit.verify import verify_bundle
    from tests.audit.helpers import bulk_chain

    with tempfile.TemporaryDirectory() as folder:
        from django.conf import settings

        settings.AUDIT_SIGNING_KEY_PATH = str(Path(folder) / "key.pem")
        settings.AUDIT_CHECKPOINT_PUBLISH_PATH = ""
        generate_signing_key(Path(settings.AUDIT_SIGNING_KEY_PATH))
        bulk_chain(count)
        audit_checkpoint_create()
        from governance.audit.exports import write_bundle

        bundle = Path(folder) / "bundle.zip"
        with bundle.open("wb") as handle:
            write_bundle(handle)
        began = time.perf_counter()
        report = verify_bundle(str(bundle))
        elapsed = time.perf_counter() - began
        assert report.ok, report.errors
        # Baseline: just reading the same lines and hashing each twice, no parsing or checks.
        import zipfile

        began = time.perf_counter()
        with zipfile.ZipFile(bundle) as archive, archive.open("events.jsonl") as lines:
            for line in lines:
                hashlib.sha256(hashlib.sha256(line).digest()).digest()
        floor = time.perf_counter() - began
        print(
            f"verifier: {report.events / elapsed:,.0f} events/s over {report.events:,} events "
            f"({elapsed:.2f} s); read+2xsha256 floor {report.events / floor:,.0f} lines/s, ratio {floor / elapsed:.2f}"
        )


if __name__ == "__main__":
    main()
