"""Shared fixtures: personas (one per role, a second team, an outsider) and a real Celery worker."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from django.contrib.auth.models import Group, User
from django.db import connection
from rest_framework.test import APIClient

from governance.approvals import pki
from governance.approvals.models import Authority
from governance.core.models import Team
from governance.core.roles import Role

ROOT = Path(__file__).resolve().parent.parent


def pytest_configure(config: pytest.Config) -> None:
    # Registered here rather than in pyproject.toml, whose digest keys the environment .ci/run caches.
    config.addinivalue_line(
        "markers",
        "cpu_bound: busy on the CPU for tens of seconds (the planner's leave-one-source-out refits); "
        "scripts/test-suite runs them in a serial lane, beside suites that mostly wait",
    )
    config.addinivalue_line(
        "markers",
        "fresh_clone: a fresh clone's `make run` and every documented command, waited on for ~2 minutes; "
        "scripts/test-suite runs it in the fault suite's lane, which ends minutes before the workers",
    )


_DB_FIXTURES = frozenset(
    {"db", "transactional_db", "live_server", "django_db_reset_sequences", "django_db_serialized_rollback"}
)


def _uses_no_database(item: pytest.Item) -> bool:
    return item.get_closest_marker("django_db") is None and not _DB_FIXTURES & set(getattr(item, "fixturenames", ()))


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The tests of a module holding a `slow` test that use no database run first; everything else
    keeps pytest-django's order (database tests, then transactional ones, whose flush empties the
    tables, e.g. the roles' groups a migration made; then the rest). A long test that needs no
    database of the suite's (the real engines' jobs, the gloo profile; the fresh clone, in its lane)
    is last in that order, started when everything else was done and ran alone, one core idle;
    started first, the other worker takes the short tests meanwhile."""
    slow = {item.nodeid.split("::", 1)[0] for item in items if item.get_closest_marker("slow") is not None}
    items.sort(key=lambda item: not (item.nodeid.split("::", 1)[0] in slow and _uses_no_database(item)))


@pytest.fixture(scope="session")
def django_db_modify_db_settings(django_db_modify_db_settings_parallel_suffix: None) -> None:
    """scripts/test-suite runs the serial suites in lanes side by side (GOVERNANCE_TEST_LANE): each
    on a test database of its own, test_<name>_<lane>, as pytest-django names the xdist workers'
    (test_<name>_gw0) with the same helper."""
    lane = os.environ.get("GOVERNANCE_TEST_LANE")
    if lane:
        from pytest_django.fixtures import _set_suffix_to_test_databases

        _set_suffix_to_test_databases(suffix=lane)


def pytest_runtest_setup(item: pytest.Item) -> None:
    """`@pytest.mark.postgres`: the test needs PostgreSQL (row locks, triggers, the fault suite's
    concurrent writers); on the embedded SQLite default it is skipped, saying why."""
    if item.get_closest_marker("postgres") is not None and connection.vendor != "postgresql":
        pytest.skip("needs PostgreSQL: set DATABASE_URL=postgres://… (.ci/run does)")


# Under pytest-xdist (`make test`, scripts/test-suite) each worker has a test database of its own
# (pytest-django suffixes its name: test_<name>_gw0, var/test.sqlite3_gw0), which every URL handed
# to a subprocess is derived from (`_database_url_for_tests`). The fault, cluster and browser suites
# run alongside the workers in two lanes of their own (scripts/test-suite), on `test_<name>_<lane>`.


def compile_messages() -> None:
    """`compilemessages` for the zh_Hans catalog, once per machine at a time: two xdist workers
    writing the same .mo file would let one read the other's half-written file. The second one in
    finds the .mo up to date and leaves it alone."""
    from django.core.management import call_command

    lock_path = ROOT / "var" / "compilemessages.lock"
    lock_path.parent.mkdir(exist_ok=True)
    with lock_path.open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        call_command(
            "compilemessages", locale=["zh_Hans"], ignore_patterns=[".venv", "var", "node_modules"], verbosity=0
        )


def _flush_with_audit_triggers_suspended() -> None:
    """Transactional tests end with a table flush (TRUNCATE/DELETE), which the append-only
    audit triggers rightly refuse; the suite flushes as a superuser would."""
    from django.db import connections
    from django.test import TransactionTestCase

    from governance.audit.triggers import triggers_suspended

    original = TransactionTestCase._fixture_teardown  # type: ignore[attr-defined]  # private: not in django-stubs

    def _fixture_teardown(self: TransactionTestCase) -> None:
        with triggers_suspended(connections["default"]):
            original(self)

    TransactionTestCase._fixture_teardown = _fixture_teardown  # type: ignore[attr-defined]


_flush_with_audit_triggers_suspended()


@pytest.fixture(scope="session", autouse=True)
def compiled_messages() -> None:
    """Every test process compiles the zh_Hans catalog before its first test: a process that reads a
    stale or missing .mo keeps it (gettext caches catalogs per process), so compiling it when the first
    web test starts, after other tests already translated, failed their zh-Hans assertions in a fresh
    worktree. Compiling an up-to-date catalog is a file-time check."""
    compile_messages()


@pytest.fixture(autouse=True)
def fresh_local_cache() -> None:
    """Each test starts with an empty in-process cache: throttle budgets (10 sign-offs a minute per
    reviewer) are kept there, keyed by user id, and a fast module spent one test's budget in the
    next (429 on a sign-off in a fixture). A shared Redis cache is left alone: other processes use it."""
    from django.core.cache import caches
    from django.core.cache.backends.locmem import LocMemCache

    for cache in caches.all():
        if isinstance(cache, LocMemCache):
            cache.clear()


@pytest.fixture(autouse=True)
def audit_signing_key(settings: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every test signs checkpoints with a throwaway key, never the developer's var/ key."""
    from governance.audit.keys import generate_signing_key

    folder = tmp_path_factory.mktemp("audit-key")
    settings.AUDIT_SIGNING_KEY_PATH = str(folder / "audit-ed25519.pem")
    settings.AUDIT_CHECKPOINT_PUBLISH_PATH = str(folder / "published-checkpoints.jsonl")
    generate_signing_key(Path(settings.AUDIT_SIGNING_KEY_PATH))
    return Path(settings.AUDIT_SIGNING_KEY_PATH)


@dataclass
class Personas:
    requester: User
    other_requester: User
    legal: User
    engineer: User
    auditor: User
    admin: User
    outsider: User
    team: Team
    other_team: Team

    def client(self, user: User | None) -> APIClient:
        client = APIClient()
        if user is not None:
            client.force_authenticate(user)
        return client


def make_user(username: str, *roles: str, team: Team | None = None) -> User:
    user = User.objects.create_user(username=username, password="pw-" + username)
    for role in roles:
        # get_or_create: a transactional test's flush removes the groups the migration made.
        user.groups.add(Group.objects.get_or_create(name=role)[0])
    if team is not None:
        team.members.add(user)
    return user


@pytest.fixture
def personas(db: None) -> Personas:
    team = Team.objects.create(name="platform")
    other_team = Team.objects.create(name="research")
    return Personas(
        requester=make_user("req", Role.REQUESTER, team=team),
        other_requester=make_user("req2", Role.REQUESTER, team=other_team),
        legal=make_user("legal", Role.LEGAL_REVIEWER),
        engineer=make_user("eng", Role.ENGINEERING_REVIEWER),
        auditor=make_user("aud", Role.AUDITOR),
        admin=make_user("adm", Role.ADMIN),
        outsider=make_user("outsider"),
        team=team,
        other_team=other_team,
    )


def _database_url_for_tests() -> str:
    """A URL for the test database pytest-django created, for processes we start."""
    settings_dict = connection.settings_dict
    if settings_dict["ENGINE"].endswith("sqlite3"):
        return f"sqlite:///{settings_dict['NAME']}"
    user = settings_dict.get("USER") or ""
    password = f":{settings_dict['PASSWORD']}" if settings_dict.get("PASSWORD") else ""
    host = settings_dict.get("HOST") or "127.0.0.1"
    port = settings_dict.get("PORT") or 5432
    return f"postgres://{user}{password}@{host}:{port}/{settings_dict['NAME']}"


@dataclass
class WorkerHandle:
    queue: str
    process: subprocess.Popen[bytes]
    log_path: Path
    audit_key_path: Path | None = None  # the worker signs audit checkpoints with this key (packets)


def start_worker(
    queue: str,
    log_path: Path,
    audit_key_path: Path | None = None,
    *,
    pool: str = "solo",
    extra_env: dict[str, str] | None = None,
    include: tuple[str, ...] = (),
) -> subprocess.Popen[bytes]:
    """A real `celery worker` process consuming `queue`, against the test database. Task time
    limits are enforced by the prefork pool only (`pool="prefork"`, one process), not by solo."""
    env = dict(os.environ)
    if audit_key_path is not None:  # a packet render signs a checkpoint in the worker
        env["AUDIT_SIGNING_KEY_PATH"] = str(audit_key_path)
        # No published log in the worker: it outlives each test's database, and a log kept across
        # them would name checkpoints beyond a fresh trail's head (refused as events removed).
        env["AUDIT_CHECKPOINT_PUBLISH_PATH"] = ""
    env.update(
        DJANGO_SETTINGS_MODULE="governance.settings_tests",
        DATABASE_URL=_database_url_for_tests(),
        CELERY_TASK_DEFAULT_QUEUE=queue,  # tasks the worker sends go to its own queue too
        CELERY_HEAVY_QUEUE=queue,  # heavy tasks as well (production gives them a worker of their own)
        JOB_POLL_INITIAL_S="1",
        JOB_POLL_MAX_S="2",
        JOB_LOST_GRACE_S="5",
    )
    env.update(extra_env or {})
    with log_path.open("ab") as log:
        return subprocess.Popen(
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "governance.celery",
                "worker",
                "-Q",
                queue,
                f"--pool={pool}",
                *(["--concurrency=1"] if pool == "prefork" else []),
                *(arg for module in include for arg in ("--include", module)),
                "--loglevel=INFO",
                "--without-heartbeat",
                "--without-gossip",
                "--without-mingle",
            ],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )


def wait_for_worker(process: subprocess.Popen[bytes], queue: str, log_path: Path) -> None:
    from governance.core.tasks import ping

    deadline = time.monotonic() + 90
    while True:
        if process.poll() is not None:
            raise RuntimeError("celery worker exited:\n" + log_path.read_text(errors="replace"))
        try:
            ping.apply_async(args=["ready"], queue=queue).get(timeout=5)
            return
        except Exception:
            if time.monotonic() > deadline:
                raise RuntimeError("celery worker did not answer:\n" + log_path.read_text(errors="replace")) from None


def stop_worker(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    try:
        process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        process.kill()


@pytest.fixture(scope="session")
def celery_worker(
    django_db_setup: None, django_db_blocker: object, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[WorkerHandle]:
    """A real worker on the configured broker, on a queue of its own, against the test database.
    Tests using it need `transaction=True` (the worker only sees committed rows)."""
    from governance.audit.keys import generate_signing_key

    queue = f"test-{uuid.uuid4().hex[:12]}"
    folder = tmp_path_factory.mktemp("celery")
    log_path = folder / "worker.log"
    audit_key_path = folder / "audit-ed25519.pem"
    generate_signing_key(audit_key_path)
    process = start_worker(queue, log_path, audit_key_path)
    handle = WorkerHandle(queue=queue, process=process, log_path=log_path, audit_key_path=audit_key_path)
    try:
        wait_for_worker(process, queue, log_path)
        yield handle
    finally:
        stop_worker(process)


# RSA 3072 keys, generated once per session: generation is the slow part of the PKI and says
# nothing about the code under test.
_POOL: list[rsa.RSAPrivateKey] = []


@pytest.fixture
def key_pool(monkeypatch: pytest.MonkeyPatch) -> None:
    """Hand out RSA 3072 keys from a per-session pool, each key at most once per test."""
    used = iter(range(1_000))

    def next_key() -> rsa.RSAPrivateKey:
        index = next(used)
        while len(_POOL) <= index:
            _POOL.append(rsa.generate_private_key(public_exponent=65537, key_size=pki.RSA_KEY_BITS))
        return _POOL[index]

    monkeypatch.setattr(pki, "new_rsa_key", next_key)


@pytest.fixture
def org_pki(db: None, key_pool: None) -> Authority:
    """The organisation's approvals PKI (root CA, TSA, CRL), as `manage.py pki_init` makes it."""
    from governance.approvals.services import pki_init

    root, created = pki_init(actor="system:test")
    assert created
    return root


@pytest.fixture(scope="session")
def quantize_python(tmp_path_factory: pytest.TempPathFactory) -> str:
    """An interpreter in which llm-compressor is found, for quantize runs that stop at the job record:
    this python with an empty `llmcompressor` package first on its path. The submit check only looks the
    package up (the real one needs its own environment, var/quantenv; tests/quantization/*e2e* use it)."""
    folder = tmp_path_factory.mktemp("quantize-python")
    (folder / "site" / "llmcompressor").mkdir(parents=True)
    (folder / "site" / "llmcompressor" / "__init__.py").write_text('"""A stand-in: found, never imported."""\n')
    wrapper = folder / "python"
    wrapper.write_text(f'#!/bin/sh\nPYTHONPATH="{folder / "site"}" exec "{sys.executable}" "$@"\n')
    wrapper.chmod(0o755)
    return str(wrapper)
