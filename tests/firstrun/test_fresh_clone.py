"""Acceptance: a fresh clone, the README's `make run`, then every shell example of README.md and
docs/*.md run as written against it (the first-run walkthrough evaluates a license, registers an
artifact, creates and submits a request, computes a plan, completes an eval run on the local
cluster, approves, exports and verifies the audit bundle). Then SIGTERM to make stops everything.

Two recipes ride along, as a reader follows them: docs/access.md's single sign-on through
scripts/oidc-provider (its commands run and its `.env` lines written before `make run`, which
rewrites the file; then a sign-in as `lena` gets the mapped role), and the /metrics scrape that
`make run` prints once its services are up (run as printed).

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
import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import urlparse

import pytest
import requests

from tests.firstrun.test_local_env import sso_recipe

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


def sso_provider_commands() -> str:
    """docs/access.md's commands that start the loopback provider for `make run`."""
    blocks = re.findall(r"^```\n(.*?)^```", (ROOT / "docs" / "access.md").read_text(), re.S | re.M)
    found = [b for b in blocks if "scripts/oidc-provider" in b]
    assert len(found) == 1, "docs/access.md: one block starts the provider for make run"
    return found[0]


def start_sso_provider(clone: Path, port: int, provider_port: int) -> tuple[subprocess.Popen[bytes], str]:
    """The recipe's commands in the clone, on free ports; its `.env` lines in the clone's .env."""
    issuer = f"https://127.0.0.1:{provider_port}"
    commands = sso_provider_commands().replace(DOC_URL, f"http://127.0.0.1:{port}").replace("8950", str(provider_port))
    provider = subprocess.Popen(["bash", "-euo", "pipefail", "-c", commands], cwd=clone, start_new_session=True)
    certificate = clone / "var" / "oidc" / "provider.pem"
    deadline = time.monotonic() + 60
    while True:
        try:
            if certificate.exists():
                requests.get(f"{issuer}/.well-known/openid-configuration", verify=str(certificate), timeout=2)
                break
        except requests.RequestException:
            pass
        assert time.monotonic() < deadline, "the documented oidc-provider did not answer"
        time.sleep(0.5)
    lines = [line.replace("8950", str(provider_port)) for line in sso_recipe()]
    (clone / ".env").write_text("\n".join(lines) + "\n")
    return provider, issuer


def sign_in_through_the_provider(base: str, issuer: str, certificate: Path) -> dict[str, object]:
    """The browser's round trip, as docs/access.md's recipe user `lena`: what /api/v1/me then says."""
    service, at_provider = requests.Session(), requests.Session()
    start = service.get(f"{base}/oidc/authenticate/", allow_redirects=False, timeout=30)
    assert start.status_code == 302, start.text[-2000:]
    authorize = start.headers["Location"]
    assert authorize.startswith(issuer), authorize
    form = at_provider.get(authorize, verify=str(certificate), allow_redirects=False, timeout=30)
    assert form.status_code == 200, form.text[-2000:]
    signed_in = at_provider.post(
        f"{issuer}/login",
        data={"query": urlparse(authorize).query, "username": "lena", "password": "lena-pw"},
        verify=str(certificate),
        allow_redirects=False,
        timeout=30,
    )
    assert signed_in.status_code == 302, signed_in.text[-2000:]
    callback = service.get(signed_in.headers["Location"], allow_redirects=False, timeout=60)
    assert callback.status_code == 302, callback.text[-2000:]
    me = service.get(f"{base}/api/v1/me", timeout=30)
    assert me.status_code == 200, me.text[-2000:]
    return dict(me.json())


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


def _start_up_notes(log_path: Path, make: subprocess.Popen[bytes]) -> str:
    """The notes `make run` prints once the web server and the worker answer: after the worker's
    `ready.` line, the last of the services' start-up."""
    deadline = time.monotonic() + 300
    while True:
        text = log_path.read_text()
        blocks = re.findall(r"^(=+\nServing .*?^=+)$", text, re.S | re.M)
        if blocks:
            break
        assert make.poll() is None, text[-3000:]
        assert time.monotonic() < deadline, text[-3000:]
        time.sleep(1)
    assert len(blocks) == 1, text[-3000:]
    ready = re.search(r"celery@\S+ ready\.", text)
    assert ready is not None, text[-3000:]
    assert ready.start() < text.index(blocks[0]), "the notes came before the worker's start-up lines"
    return str(blocks[0])


@pytest.mark.slow
@pytest.mark.fresh_clone
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
        if not k.startswith(
            ("DJANGO_", "DATABASE_", "CELERY_", "GOVERNANCE_", "DEBUG", "SECRET_KEY", "PYTEST", "OIDC_", "METRICS_")
        )
    }
    env.update({"PORT": str(port), "HOST": "127.0.0.1"})
    provider, issuer = start_sso_provider(clone, port, _free_port())
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
        notes = _start_up_notes(tmp_path / "make-run.log", make)
        # The reviewers sign with their passwords, which `make run` printed at its first start, and
        # again at the end of its start-up, below the services' own lines: what a reader pastes.
        printed = dict(re.findall(r"^  (legal|engineer)\s+\S+\s+(\S+)$", notes, re.M))
        assert set(printed) == {"legal", "engineer"}, notes
        env.update({"LEGAL_PASSWORD": printed["legal"], "ENGINEER_PASSWORD": printed["engineer"]})
        assert not (clone / "var" / "demo-passwords").exists()  # shown: not kept on disk

        # The metrics recipe: the scrape as printed answers; without the token, nothing.
        scrape = re.search(r"^  (curl -H \"Authorization: Bearer \S+\" \S+/metrics)$", notes, re.M)
        assert scrape is not None, notes
        scraped = subprocess.run(["bash", "-c", f"{scrape.group(1)} -fsS"], capture_output=True, text=True, check=False)
        assert scraped.returncode == 0, scraped.stderr
        assert "governance_metrics_source_up" in scraped.stdout
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10)
        assert refused.value.code in (401, 403)

        # The SSO recipe: the service kept its JSON role map through make run's rewrite of .env.
        me = sign_in_through_the_provider(f"http://127.0.0.1:{port}", issuer, clone / "var" / "oidc" / "provider.pem")
        assert me["username"] == "lena"
        assert me["roles"] == ["legal_reviewer"]

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
            os.killpg(provider.pid, signal.SIGTERM)  # the recipe's provider, started with `&`
    run_log = (tmp_path / "make-run.log").read_text()
    # The idle loops (every 15 s while the docs ran) wrote nothing at INFO.
    assert "Sending due task" not in run_log, run_log[-3000:]
    assert not re.search(r"INFO/\w+\] Task (core\.outbox_flush|jobs\.resume)\[", run_log), run_log[-3000:]
    time.sleep(2)
    left = _session_processes(make.pid)
    if left:
        os.killpg(make.pid, signal.SIGKILL)
    assert not left, "still running after SIGTERM to make run:\n" + "\n".join(left)
    shutil.rmtree(clone / "var" / "jobs", ignore_errors=True)
