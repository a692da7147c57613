"""scripts/gate-check against a live server: allow exits 0, deny 1 (reasons printed), down 2."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.gate.conftest import Gate

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "gate-check"


def run(url: str, token: str, body: dict[str, Any]) -> subprocess.CompletedProcess[str]:
    serving = body["serving"]
    argv = [sys.executable, str(SCRIPT), "--deployment", body["deployment"], "--environment", body["environment"],
            "--artifact-digest", body["artifact_digest"], "--engine", serving["engine"],
            "--engine-version", serving["engine_version"], "--precision",
            serving["precision"], "--gpu", serving["gpu"], "--tp", str(serving["tp"]), "--pp", str(serving["pp"]),
            "--ep", str(serving["ep"]), "--max-model-len", str(serving["max_model_len"]),
            "--gpu-memory-utilization", str(serving["gpu_memory_utilization"]), "--timeout", "30"]  # fmt: skip
    env = {"PATH": os.environ.get("PATH", ""), "GOV_URL": url, "GOV_TOKEN": token}
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60, check=False)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_gate_check_exit_codes_against_a_live_server(gate: Gate, live_server: Any) -> None:
    allow = run(live_server.url, gate.token, gate.body())
    assert allow.returncode == 0, allow.stderr
    assert "allow" in allow.stdout
    deny = run(live_server.url, gate.token, gate.body(serving={"max_model_len": 65536}))
    assert deny.returncode == 1, deny.stderr
    assert "serving.max_model_len_exceeded" in deny.stderr
    assert "fix:" in deny.stderr
    assert run(live_server.url, "gov_" + "x" * 43, gate.body()).returncode == 2  # 401 is not an allow
    down = run(f"http://127.0.0.1:{free_port()}", gate.token, gate.body())
    assert down.returncode == 2
    assert "did not answer" in down.stderr
