"""UI benchmark: each page's median server time with 1,000 deployment requests in the database,
as a ratio to Django's bare login page measured in the same run (target <= 3x), and the number
of SQL queries each page takes. Each page twice: served from the page cache (what a reload costs
while nothing it shows has changed; `hits` counts the requests the cache answered) and rendered
(the page cache off: what the first view after any write costs, with its query count).

    .venv/bin/python bench/ui.py [--requests 1000] [--repeat 40] [--database-name NAME]

Runs in a scratch database: `governance_bench_ui` or --database-name (created and dropped here) on the PostgreSQL
server of DATABASE_URL when that is postgres://, else SQLite in a temporary folder. Server time
is the full Django request cycle (middleware, view, template) through the test client, without
a network hop, so the ratio compares the pages' own work. The environment's settings apply: with
CACHE_URL (Redis), as production sets it, sessions are read from the cache (cached_db) rather than
queried, and cached fragments (a computed capacity plan's section) are shared there; each page is
measured warm (after three requests).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlparse, urlunparse

BENCH_DB = "governance_bench_ui"
ROOT = Path(__file__).resolve().parent.parent


# An obligation's own columns, copied onto each cloned request.
COPIED = ("license_key", "finding_code", "clause", "params", "message", "fingerprint")


def _scratch_database(folder: Path, name: str = BENCH_DB) -> tuple[str, str | None]:
    """(URL of the scratch database, the maintenance URL to drop it with, or None for SQLite)."""
    url = os.environ.get("DATABASE_URL", "")
    if not url.startswith("postgres"):
        return f"sqlite:///{folder / 'bench.sqlite3'}", None
    import psycopg

    parts = urlparse(url)
    admin = urlunparse(parts._replace(path="/postgres"))
    with psycopg.connect(admin, autocommit=True) as connection:
        connection.execute(f"DROP DATABASE IF EXISTS {name}")
        connection.execute(f"CREATE DATABASE {name}")
    return urlunparse(parts._replace(path=f"/{name}")), admin


def _drop(admin: str | None, name: str = BENCH_DB) -> None:
    if admin is None:
        return
    import psycopg
    from django.db import connections

    if "django" in sys.modules and os.environ.get("DJANGO_SETTINGS_MODULE"):
        connections.close_all()
    with psycopg.connect(admin, autocommit=True) as connection:
        connection.execute(f"DROP DATABASE IF EXISTS {name}")


def _setup(database_url: str) -> None:
    os.environ["DATABASE_URL"] = database_url
    os.environ["DJANGO_SETTINGS_MODULE"] = "governance.settings_tests"
    subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, env=dict(os.environ), check=True)
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()


def _populate(count: int) -> dict[str, str]:
    """One request made through the services (real evidence, findings, obligations, plan), then
    `count - 1` copies of it in varied states, as a busy instance would hold."""
    from django.contrib.auth.models import Group, User

    from governance.capacity.services import capacity_plan_compute
    from governance.core.models import Team
    from governance.core.roles import Role
    from governance.deployments import services
    from governance.deployments.choices import Status
    from governance.deployments.models import DeploymentRequest, ObligationItem
    from governance.deployments.selectors import latest_capacity_plan
    from governance.licenses.services import license_catalog_load

    sys.path.insert(0, str(ROOT))
    from bench.seeding import COMMERCIAL_FACTS, register_artifact

    license_catalog_load(actor="system:bench")
    team = Team.objects.create(name="platform")
    users = {}
    for name, role in (
        ("req", Role.REQUESTER),
        ("legal", Role.LEGAL_REVIEWER),
        ("eng", Role.ENGINEERING_REVIEWER),
        ("aud", Role.AUDITOR),
    ):
        user = User.objects.create_user(username=name, password="bench-" + name)
        user.groups.add(Group.objects.get_or_create(name=role)[0])
        team.members.add(user)
        users[name] = user
    team.leads.add(users["req"])  # the tokens page: a team lead's view
    from datetime import timedelta

    from django.utils import timezone

    from governance.gate.services import ci_token_issue

    for index in range(20):
        ci_token_issue(
            actor=users["req"],
            team=team,
            name=f"deploy-{index}",
            environments=["production"],
            expires_at=timezone.now() + timedelta(days=90),
        )
    artifact = register_artifact(
        users["req"], team, "Kimi-K2-Instruct", "moonshotai/Kimi-K2-Instruct", "kimi-k2-modified-mit", "kimi-k2", "cd"
    )
    facts = {**COMMERCIAL_FACTS, "monthly_revenue": {"amount": 25_000_000, "currency": "USD"}}
    serving = {"engine": "vllm", "precision": "w4a8", "gpu": "h200", "max_model_len": 131072, "concurrency": 8}
    first = services.deployment_create(
        actor=users["req"],
        data={"team": team, "artifact": artifact, "product_name": "Product 0", "facts": facts, "serving_plan": serving},
    )
    first = services.deployment_submit(deployment=first, actor=users["req"])
    plan = latest_capacity_plan(first)
    assert plan is not None
    capacity_plan_compute(plan_id=plan.pk)
    first.refresh_from_db()
    statuses = [Status.DRAFT, Status.SUBMITTED, Status.IN_REVIEW, Status.APPROVED, Status.REJECTED]
    copies = [
        DeploymentRequest(
            team=team,
            requester=users["req"],
            artifact=artifact,
            product_name=f"Product {i}",
            facts=first.facts,
            serving_plan=first.serving_plan,
            status=statuses[i % len(statuses)],
            evidence=first.evidence,
            evidence_digest=first.evidence_digest,
            flagged=i % 97 == 0,
            flag_reason="usage crossed a threshold" if i % 97 == 0 else "",
        )
        for i in range(1, count)
    ]
    DeploymentRequest.objects.bulk_create(copies, batch_size=500)
    template = list(first.obligations.all())
    ObligationItem.objects.bulk_create(
        [
            ObligationItem(request=r, **{name: getattr(o, name) for name in COPIED})
            for r in DeploymentRequest.objects.exclude(pk=first.pk)
            for o in template
        ],
        batch_size=500,
    )
    return {"code": str(first.code)}


def _analyze() -> None:
    """Planner statistics, as autovacuum keeps them on a live instance: the bulk insert above
    would otherwise leave the planner guessing (a few rows per table) for the whole run."""
    from django.db import connection

    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE")


def _measure(client: object, url: str, repeat: int) -> tuple[float, int]:
    from django.db import connection

    get = client.get  # type: ignore[attr-defined]
    for _ in range(3):  # warm caches (templates, license specs, connection)
        assert get(url).status_code == 200, url
    executed: list[str] = []

    def count(execute, sql, params, many, context):  # type: ignore[no-untyped-def]
        executed.append(sql)
        return execute(sql, params, many, context)

    with connection.execute_wrapper(count):
        get(url)
    timings = []
    for _ in range(repeat):
        started = time.perf_counter()
        response = get(url)
        timings.append(time.perf_counter() - started)
        assert response.status_code == 200, url
    return statistics.median(timings) * 1000, len(executed)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=40)
    parser.add_argument("--profile", metavar="PAGE", help="print a cProfile of one page (by name) instead")
    parser.add_argument(
        "--database-name",
        default=BENCH_DB,
        help="the scratch PostgreSQL database's name (so two runs on one server do not share it)",
    )
    args = parser.parse_args()
    if not args.database_name.isidentifier():
        parser.error("--database-name must be a plain identifier")
    with tempfile.TemporaryDirectory() as folder:
        database_url, admin = _scratch_database(Path(folder), args.database_name)
        try:
            _run(database_url, args.requests, args.repeat, args.profile)
        finally:
            _drop(admin, args.database_name)


def _run(database_url: str, count: int, repeat: int, profile: str | None = None) -> None:
    _setup(database_url)
    from django.contrib.auth.models import User
    from django.core import signals
    from django.db import close_old_connections
    from django.test import Client

    started = time.perf_counter()
    ids = _populate(count)
    _analyze()
    print(f"populated {count} requests in {time.perf_counter() - started:.1f} s")
    # One connection for the whole run, as CONN_MAX_AGE keeps it in production, so each
    # page's queries are counted on it.
    signals.request_finished.disconnect(close_old_connections)
    anonymous = Client()
    baseline, baseline_queries = _measure(anonymous, "/accounts/login/", repeat)
    pages = [
        ("req", "/", "dashboard"),
        ("legal", "/", "dashboard (reviewer)"),
        ("req", "/requests/", "request list"),
        ("req", "/requests/new", "request wizard"),
        ("legal", f"/requests/{ids['code']}/", "request page"),
        ("req", "/licenses/", "license catalog"),
        ("req", "/licenses/kimi-k2-modified-mit/", "license detail"),
        ("req", "/clusters/", "clusters"),
        ("aud", "/audit/", "audit"),
        ("req", "/tokens/", "CI tokens (20)"),
        ("req", "/verify/", "verify a PDF (form)"),
    ]
    from django.test import override_settings

    from governance.web import pagecache

    hits = _HitCounter(pagecache.cache)
    pagecache.cache = hits  # the page cache's reads, counted
    print(f"{'page':<22} {'cached ms':>10} {'ratio':>7} {'hits':>6} {'rendered ms':>12} {'ratio':>7} {'queries':>8}")
    print(
        f"{'login (baseline)':<22} {baseline:>10.2f} {1.0:>7.2f} {'':>6} {baseline:>12.2f} {1.0:>7.2f} {baseline_queries:>8}"
    )
    worst = worst_rendered = 0.0
    for username, url, name in pages:
        client = Client()
        client.force_login(User.objects.get(username=username))
        if profile == name:
            import cProfile
            import pstats

            with override_settings(WEB_PAGE_CACHE_SECONDS=0):
                client.get(url)
                profiler = cProfile.Profile()
                profiler.runcall(client.get, url)
            pstats.Stats(profiler).sort_stats("cumulative").print_stats(40)
            return
        with override_settings(WEB_PAGE_CACHE_SECONDS=0):  # every request renders the page
            rendered, queries = _measure(client, url, repeat)
        hits.found = 0
        cached, _cached_queries = _measure(client, url, repeat)
        ratio, rendered_ratio = cached / baseline, rendered / baseline
        worst, worst_rendered = max(worst, ratio), max(worst_rendered, rendered_ratio)
        share = f"{hits.found}/{repeat + 4}"  # the timed requests, the counted one and three to warm
        print(
            f"{name:<22} {cached:>10.2f} {ratio:>7.2f} {share:>6} {rendered:>12.2f} {rendered_ratio:>7.2f} {queries:>8}"
        )
    print(f"worst ratio {worst:.2f} cached (target <= 3.00); {worst_rendered:.2f} when the page is rendered")


class _HitCounter:
    """The cache, with the page cache's reads that found a page counted (a miss renders; any write
    to the database between two requests makes one)."""

    def __init__(self, cache: object) -> None:
        self._cache = cache
        self.found = 0

    def get(self, key: str) -> object:
        value = self._cache.get(key)  # type: ignore[attr-defined]
        self.found += value is not None
        return value

    def __getattr__(self, name: str) -> object:  # set, add, incr: as the cache does
        return getattr(self._cache, name)


if __name__ == "__main__":
    main()
