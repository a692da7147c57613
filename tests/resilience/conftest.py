"""The load-and-fault stack (issue 18): gunicorn, a Celery worker and beat (each under
scripts/supervise, as `make run` runs them), PostgreSQL (the test database) and a Redis server of
the stack's own on a free loopback port, so a test can stop and restart the broker without touching
the Redis the rest of the suite uses. Leases and beat intervals are shortened (environment below)
so that recovery shows in seconds; the code paths are the production ones."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT, _database_url_for_tests

pytestmark = pytest.mark.fault

HOOKS = "tests.resilience.hooks"  # loaded into the worker only: holds chosen tasks so a test can kill it there


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_until(check: Callable[[], Any], timeout_s: float, what: str, every_s: float = 0.3) -> Any:
    deadline = time.monotonic() + timeout_s
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(every_s)


@dataclass
class Answer:
    status: int
    body: Any


@dataclass
class Stack:
    base_url: str
    redis_port: int
    dir: Path
    env: dict[str, str]
    processes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    # --- HTTP -----------------------------------------------------------------------------------
    def call(self, method: str, path: str, token: str, body: Any = None, timeout: float = 60) -> Answer:
        data = None if body is None else json.dumps(body).encode()
        return self.call_raw(method, path, token, data, timeout)

    def call_raw(self, method: str, path: str, token: str, data: bytes | None, timeout: float = 60) -> Answer:
        request = urllib.request.Request(
            self.base_url + path,
            data=data,
            method=method,
            headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                raw = response.read()
                status = response.status
        except urllib.error.HTTPError as exc:
            raw, status = exc.read(), exc.code
        try:
            parsed = json.loads(raw) if raw else None
        except ValueError:
            parsed = raw[:500].decode(errors="replace")
        return Answer(status, parsed)

    # --- broker ---------------------------------------------------------------------------------
    def redis_start(self) -> None:
        subprocess.run(
            [
                "redis-server",
                "--port",
                str(self.redis_port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--daemonize",
                "yes",
                "--dir",
                str(self.dir),
                "--logfile",
                str(self.dir / "redis.log"),
                "--pidfile",
                str(self.dir / "redis.pid"),
            ],
            check=True,
        )
        wait_until(self.redis_up, 20, "redis to start")

    def redis_stop(self) -> None:
        subprocess.run(
            ["redis-cli", "-p", str(self.redis_port), "shutdown", "nosave"], check=False, capture_output=True
        )
        wait_until(lambda: not self.redis_up(), 20, "redis to stop")

    def redis_up(self) -> bool:
        probe = subprocess.run(["redis-cli", "-p", str(self.redis_port), "ping"], capture_output=True, text=True)
        return probe.stdout.strip() == "PONG"

    # --- worker ---------------------------------------------------------------------------------
    def worker_pid(self) -> int | None:
        """The celery process under the worker's supervisor (None between a death and the restart)."""
        return _child_of(self.processes["worker"].pid)

    def kill_worker(self) -> int:
        """SIGKILL the worker and its pool processes: nothing acknowledged, nothing said."""
        pid = self.worker_pid()
        assert pid is not None, "no worker to kill"
        subprocess.run(["pkill", "-KILL", "-P", str(pid)], check=False)
        os.kill(pid, signal.SIGKILL)
        return pid

    def log(self, name: str) -> str:
        path = self.dir / f"{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def hold(self, *tasks: str) -> None:
        """The next run of each task stops in the worker (tests.resilience.hooks) until killed."""
        for task in tasks:
            (self.dir / "hold" / task).write_text("")

    def holding(self, task: str) -> bool:
        return (self.dir / "hold" / f"{task}.held").exists()


def _start(stack: Stack, name: str, argv: list[str], env: dict[str, str]) -> None:
    log = (stack.dir / f"{name}.log").open("ab")
    stack.processes[name] = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)


# gunicorn as docker/Dockerfile starts it (3 workers, its default 30 s timeout); a test module sets
# DOCKERFILE_GUNICORN = True to get exactly that instead of the suite's longer timeout.
DOCKERFILE_GUNICORN_ARGS = ["--workers", "3"]
SUITE_GUNICORN_ARGS = ["--workers", "3", "--timeout", "120"]


@pytest.fixture(scope="module")
def stack_web_port() -> int:
    """The port gunicorn will listen on, known before the stack starts: a module's `stack_env` can
    name the service's own URLs in something it starts first (an OpenID provider's redirect URI)."""
    return free_port()


@pytest.fixture(scope="module")
def stack_env(request: pytest.FixtureRequest) -> dict[str, str]:
    """A module's own settings for the stack: its STACK_ENV. A module whose settings need something
    started first (tests/resilience/test_sso_races.py: an OpenID provider) overrides this fixture."""
    return dict(getattr(request.module, "STACK_ENV", {}))


@pytest.fixture(scope="module")
def stack(
    request: pytest.FixtureRequest,
    django_db_setup: None,
    django_db_blocker: Any,
    tmp_path_factory: pytest.TempPathFactory,
    stack_web_port: int,
    stack_env: dict[str, str],
) -> Iterator[Stack]:
    if shutil.which("redis-server") is None or shutil.which("pgrep") is None:
        pytest.fail("the fault suite needs redis-server and pgrep (Debian's redis-server, procps)")
    directory = tmp_path_factory.mktemp("fault")
    (directory / "hold").mkdir()
    redis_port, web_port = free_port(), stack_web_port
    env = dict(os.environ)
    env.update(
        DJANGO_SETTINGS_MODULE="governance.settings_tests",
        DATABASE_URL=_database_url_for_tests(),
        CELERY_BROKER_URL=f"redis://127.0.0.1:{redis_port}/0",
        CELERY_RESULT_BACKEND=f"redis://127.0.0.1:{redis_port}/1",
        CELERY_TASK_DEFAULT_QUEUE="celery",
        CELERY_HEAVY_QUEUE="heavy",
        GOVERNANCE_VAR_DIR=str(directory / "var"),
        RESUME_INTERVAL_S="2",
        OUTBOX_LEASE_S="20",
        OUTBOX_SEND_GRACE_S="1",
        CAPACITY_PLAN_LEASE_S="15",
        CAPACITY_PLAN_SEND_GRACE_S="1",
        JOB_POLL_INITIAL_S="1",
        JOB_POLL_MAX_S="2",
        JOB_LOST_GRACE_S="5",
        FAULT_HOLD_DIR=str(directory / "hold"),
        AUDIT_CHECKPOINT_INTERVAL_S="86400",
        API_MAX_BODY_BYTES="1048576",  # a configured maximum the hostile-input test crosses  # the tests checkpoint with their own key
        PYTHONUNBUFFERED="1",
    )
    env.update(stack_env)  # a module's own settings for the stack
    stack = Stack(base_url=f"http://127.0.0.1:{web_port}", redis_port=redis_port, dir=directory, env=env)
    from governance.audit.keys import generate_signing_key

    # The stack's own checkpoint key (a packet render signs a checkpoint in the worker).
    generate_signing_key(directory / "var" / "keys" / "audit-ed25519.pem")
    stack.redis_start()
    bin_dir = Path(sys.executable).parent
    supervise = [sys.executable, str(ROOT / "scripts" / "supervise")]
    celery = [sys.executable, "-m", "celery", "-A", "governance.celery"]
    _start(
        stack,
        "web",
        [
            str(bin_dir / "gunicorn"),
            "governance.wsgi:application",
            "--bind",
            f"127.0.0.1:{web_port}",
            *(
                DOCKERFILE_GUNICORN_ARGS
                if getattr(request.module, "DOCKERFILE_GUNICORN", False)
                else SUITE_GUNICORN_ARGS
            ),
        ],
        env,
    )
    # A module may run the worker at a lower CPU priority (HEAVY_WORKER_NICE), as a deployment runs
    # the heavy queue's renders beside the web workers on the same cores.
    nice = getattr(request.module, "HEAVY_WORKER_NICE", 0)
    _start(
        stack,
        "worker",
        [
            *(["nice", "-n", str(nice)] if nice else []),
            *supervise,
            *celery,
            "worker",
            "-Q",
            "celery,heavy",
            "--concurrency=2",
            "--loglevel=INFO",
            "--without-gossip",
            "--without-mingle",
            "--include",
            HOOKS,
        ],
        env,
    )
    _start(
        stack,
        "beat",
        [*supervise, *celery, "beat", "--loglevel=INFO", "--schedule", str(directory / "beat-schedule")],
        env,
    )

    def web_up() -> bool:
        try:
            with urllib.request.urlopen(stack.base_url + "/healthz", timeout=5) as response:
                return bool(response.status == 200)
        except (OSError, urllib.error.HTTPError):
            return False

    try:
        wait_until(web_up, 90, "gunicorn and the broker (/healthz)")
        wait_until(lambda: "ready." in stack.log("worker"), 90, "the worker")
        yield stack
    finally:
        beat = _child_of(stack.processes["beat"].pid)
        if beat is not None:
            os.kill(beat, signal.SIGCONT)  # a stopped process cannot act on SIGTERM
        for process in stack.processes.values():
            process.send_signal(signal.SIGTERM)
        for process in stack.processes.values():
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
        stack.redis_stop() if stack.redis_up() else None


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random-weight checkpoint the eval job loads by path (no download)."""
    from planner.evaljob.tiny import save_tiny_checkpoint

    return save_tiny_checkpoint(tmp_path_factory.mktemp("models") / "tiny-qwen3-moe")


@pytest.fixture(autouse=True)
def quiet_flush(stack: Stack, transactional_db: None) -> Iterator[None]:
    """Pause beat while pytest-django empties the tables after a test: its resume tasks (every
    RESUME_INTERVAL_S) would otherwise run in the worker against the TRUNCATE and deadlock it.
    Tearing down before `transactional_db` does, this runs first."""
    beat = _child_of(stack.processes["beat"].pid)
    if beat is not None:
        os.kill(beat, signal.SIGCONT)
    yield
    beat = _child_of(stack.processes["beat"].pid)
    if beat is not None:
        os.kill(beat, signal.SIGSTOP)
        time.sleep(2.5)  # the last resume tasks it sent finish in the worker


def _child_of(pid: int) -> int | None:
    found = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout.split()
    return int(found[0]) if found else None
