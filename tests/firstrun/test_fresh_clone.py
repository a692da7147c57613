"""Acceptance: a fresh clone, the README's `make run`, then every shell example of README.md and
docs/*.md run as written against it (the first-run walkthrough evaluates a license, registers an
artifact, creates and submits a request, computes a plan, completes an eval run on the local
cluster, approves, exports and verifies the audit bundle). Then SIGTERM to make stops everything.

The clone reuses this checkout's virtual environment through a symlink (a full pip install of
torch would take minutes); everything else is the clone's own: its .env, var/, SQLite database,
filesystem broker and local cluster.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCUMENTS = ["README.md", *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)
# The harness itself runs these two: `make run` is the server below, `make test` is what CI runs.
HARNESS_COMMANDS = ("make run", "make test")
# Shown, not run: they need a Docker engine, which the test machines do not have.
NOT_RUN_PREFIXES = ("mkdir -p docker/secrets", "docker ")
DOC_URL = "http://127.0.0.1:8000"


def shell_blocks(document: str) -> list[str]:
    text = (ROOT / document).read_text()
    blocks = []
    for language, body in FENCE.findall(text):
        if language == "sh":
            blocks.append(body)
        elif language == "console":
            for line in body.splitlines():
                assert line.startswith(NOT_RUN_PREFIXES), f"{document}: a console block may only show Docker: {line}"
        else:
            assert language in ("", "json", "text", "yaml"), f"{document}: unknown block language {language!r}"
    return blocks


def test_documents_link_only_inside_the_repository() -> None:
    for document in DOCUMENTS:
        text = (ROOT / document).read_text()
        for target in re.findall(r"\]\(([^)]+)\)", text):
            path = target.split("#", 1)[0]
            assert not re.match(r"^[a-z]+://", target), f"{document} links outside: {target}"
            assert path == "" or (ROOT / document).parent.joinpath(path).resolve().is_relative_to(ROOT), target
            assert path == "" or (ROOT / document).parent.joinpath(path).exists(), f"{document}: broken link {target}"
        assert "../shared" not in text, document


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _session_processes(sid: int) -> list[str]:
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(") ", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[3]) == sid and fields[0] != "Z":
            command = (stat.parent / "cmdline").read_bytes().replace(b"\0", b" ")[:200]
            found.append(f"{stat.parent.name}: {command!r}")
    return found


@pytest.mark.slow
def test_fresh_clone_runs_every_documented_command(tmp_path: Path) -> None:
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "--quiet", str(ROOT), str(clone)], check=True)
    (clone / ".venv").symlink_to(ROOT / ".venv")
    # The shared environment is already installed from this checkout: mark it so for the clone's
    # pyproject.toml, or the clone's `make` would reinstall it (pip upgraded, the editable install
    # pointed at the clone's tmp folder, which is deleted afterwards).
    stamp = hashlib.sha256((clone / "pyproject.toml").read_bytes()).hexdigest()[:16]
    for old in (ROOT / ".venv").glob(".installed-*"):
        old.unlink()
    (ROOT / ".venv" / f".installed-{stamp}").touch()
    port = _free_port()
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("DJANGO_", "DATABASE_", "CELERY_", "GOVERNANCE_", "DEBUG", "SECRET_KEY", "PYTEST"))
    }
    env.update({"PORT": str(port), "HOST": "127.0.0.1"})
    log = (tmp_path / "make-run.log").open("w")
    started = time.monotonic()
    make = subprocess.Popen(
        ["make", "run"], cwd=clone, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
    )
    try:
        deadline = time.monotonic() + 600
        while True:
            assert make.poll() is None, (tmp_path / "make-run.log").read_text()[-3000:]
            assert time.monotonic() < deadline, (tmp_path / "make-run.log").read_text()[-3000:]
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as answer:
                    if answer.status == 200:
                        break
            except OSError:
                time.sleep(1)
        print(f"make run on a fresh clone: serving after {time.monotonic() - started:.1f} s")
        assert "SECRET_KEY=" in (clone / ".env").read_text()
        # The reviewers sign with their passwords, which `make run` printed once: what a reader pastes.
        printed = dict(re.findall(r"^  (legal|engineer)\s+\S+\s+(\S+)$", (tmp_path / "make-run.log").read_text(), re.M))
        assert set(printed) == {"legal", "engineer"}, (tmp_path / "make-run.log").read_text()[-3000:]
        env.update({"LEGAL_PASSWORD": printed["legal"], "ENGINEER_PASSWORD": printed["engineer"]})

        for document in DOCUMENTS:
            blocks = shell_blocks(document)
            script = []
            for block in blocks:
                lines = [line for line in block.splitlines() if line.strip()]
                if lines and all(line.startswith(HARNESS_COMMANDS) for line in lines):
                    continue
                script.append(block.replace(DOC_URL, f"http://127.0.0.1:{port}"))
            if not script:
                continue
            begun = time.monotonic()
            result = subprocess.run(
                ["bash", "-euo", "pipefail", "-c", "\n".join(script)],
                cwd=clone,
                env=env,
                capture_output=True,
                text=True,
                timeout=900,
                check=False,
            )
            assert result.returncode == 0, f"{document}:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
            print(f"{document}: {len(script)} blocks in {time.monotonic() - begun:.1f} s")
            if document == "docs/first-run.md":
                # The walkthrough ended where it promised: approved, and the bundle verified.
                assert "approved" in result.stdout.split()
                assert (clone / "approval.pdf").read_bytes().startswith(b"%PDF")
                assert "OK" in result.stdout or "ok" in result.stdout.lower()
    finally:
        if make.poll() is None:
            make.send_signal(signal.SIGTERM)  # what a service manager (or kill) sends to `make run`
        try:
            make.wait(timeout=60)
        finally:
            log.close()
    time.sleep(2)
    left = _session_processes(make.pid)
    if left:
        os.killpg(make.pid, signal.SIGKILL)
    assert not left, "still running after SIGTERM to make run:\n" + "\n".join(left)
    shutil.rmtree(clone / "var" / "jobs", ignore_errors=True)
