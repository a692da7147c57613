"""`python -m planner.inspectjob` as the job path runs it on the node: bounded in memory and time,
result.json written atomically with its checksum, a refusal written the same way, never a traceback."""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from planner.cluster import base
from planner.cluster.base import JobOutput, JobSpec, JobState, verify_result
from planner.cluster.local import LocalExecutor
from planner.inspectjob.run import main
from planner.manifest import manifest, weights_digest
from tests.planner import inspect_checkpoints as ckpt

ROOT = Path(__file__).resolve().parents[2]


def _job(*args: str, code: str | None = None) -> tuple[subprocess.CompletedProcess[str], dict[str, Any] | None]:
    command = [sys.executable, "-c", code, *args] if code else [sys.executable, "-m", "planner.inspectjob", *args]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)
    out = Path(args[args.index("--out") + 1])
    raw = out.read_bytes() if out.exists() else None
    checksum = out.with_name(out.name + ".sha256")
    result, problem = verify_result(raw, checksum.read_bytes() if checksum.exists() else None)
    assert problem in ("", "no result.json"), problem
    return done, result


def test_the_job_writes_the_report_with_its_checksum(tmp_path: Path) -> None:
    model = ckpt.w4a16(tmp_path / "m")
    done, result = _job(str(model), "--out", str(tmp_path / "out" / "result.json"))
    assert done.returncode == 0, done.stderr
    assert result is not None
    assert result["format"] == "governance.inspection/1"
    assert result["weights_digest"] == weights_digest(model)
    assert result["precision"]["summary"] == "w4a16 (compressed-tensors, group 32)"
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["result.json", "result.json.sha256"]


def test_a_refusal_is_written_the_same_way_without_a_traceback(tmp_path: Path) -> None:
    model = ckpt.bf16(tmp_path / "m")
    (model / "shard.safetensors").symlink_to("/etc/hostname")
    done, result = _job(str(model), "--out", str(tmp_path / "out" / "result.json"))
    assert done.returncode == 2
    assert "Traceback" not in done.stderr + done.stdout
    assert result == {
        "format": "governance.inspection/1",
        "refused": {
            "file": "shard.safetensors",
            "message": "a symbolic link (to '/etc/hostname'); copy the file in",
            "reason": "checkpoint",
        },
    }


def test_the_registered_manifest_names_the_file_that_changed(tmp_path: Path) -> None:
    model = ckpt.bf16(tmp_path / "m")
    (model / "LICENSE").write_text("Licensed under the terms of the tiny license.\n")
    registered = tmp_path / "manifest.txt"
    registered.write_text("".join(manifest(model)))
    out = str(tmp_path / "out" / "result.json")
    done, result = _job(str(model), "--manifest", str(registered), "--out", out)
    assert done.returncode == 0, done.stderr
    (model / "LICENSE").write_text("Licensed under the terms of the tiny license!\n")  # one byte
    done, result = _job(str(model), "--manifest", str(registered), "--out", out)
    assert done.returncode == 2
    assert result is not None
    assert result["refused"] == {
        "file": "LICENSE",
        "message": "differs from the registered manifest",
        "reason": "manifest",
    }


def test_a_small_memory_limit_refuses_cleanly_naming_the_file(tmp_path: Path) -> None:
    """A 20 MB header of 300,000 tensors needs ~250 MB to parse; under RLIMIT_AS 128 MB the job refuses."""
    model = ckpt.bf16(tmp_path / "m")
    count = 300_000
    entries = ",".join(
        f'"t{i}":{{"dtype":"F32","shape":[1],"data_offsets":[{4 * i},{4 * i + 4}]}}' for i in range(count)
    )
    body = ("{" + entries + "}").encode()
    (model / "big.safetensors").write_bytes(struct.pack("<Q", len(body)) + body)
    done, result = _job(str(model), "--out", str(tmp_path / "out" / "result.json"), "--max-memory-mb", "128")
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert result is not None
    assert result["refused"]["file"] == "big.safetensors"
    assert result["refused"]["reason"] == "memory_limit"


def test_the_time_limit_refuses_naming_the_file_being_hashed(tmp_path: Path) -> None:
    model = ckpt.bf16(tmp_path / "m")
    slow_hash = (
        "import sys, time\n"
        "import planner.inspectjob.checkpoint as c\n"
        "real = c.manifest_line\n"
        "def slow(root, path):\n"
        "    if path.name == 'model.safetensors':\n"
        "        time.sleep(30)\n"
        "    return real(root, path)\n"
        "c.manifest_line = slow\n"
        "from planner.inspectjob.run import main\n"
        "sys.exit(main(sys.argv[1:]))\n"
    )
    out = str(tmp_path / "out" / "result.json")
    done, result = _job(str(model), "--out", out, "--max-seconds", "1", code=slow_hash)
    assert done.returncode == 2, done.stderr
    assert result is not None
    assert result["refused"] == {
        "file": "model.safetensors",
        "message": "the inspection ran out of time while reading it",
        "reason": "time_limit",
    }


def test_result_json_appears_by_rename_from_the_same_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A job killed before the rename leaves the previous state (no result.json), never half a file."""
    model = ckpt.bf16(tmp_path / "m")
    out = tmp_path / "out" / "result.json"
    renames: list[tuple[Path, Path, bytes]] = []
    real_replace = os.replace

    def replace(source: Path, target: Path) -> None:
        renames.append((Path(source), Path(target), Path(source).read_bytes()))
        real_replace(source, target)

    monkeypatch.setattr(base.os, "replace", replace)
    assert main([str(model), "--out", str(out), "--max-seconds", "0", "--max-memory-mb", "0"]) == 0
    (source, target, written), _checksum = renames
    assert target == out
    assert source.parent == out.parent
    assert source != out
    assert json.loads(written)["weights_digest"] == weights_digest(model)

    def killed(source: Path, target: Path) -> None:
        raise KeyboardInterrupt  # the job dies between writing the temporary file and the rename

    out.unlink()
    monkeypatch.setattr(base.os, "replace", killed)
    with pytest.raises(KeyboardInterrupt):
        main([str(model), "--out", str(out), "--max-seconds", "0", "--max-memory-mb", "0"])
    assert not out.exists()


def _through_the_local_executor(tmp_path: Path, model: Path, run_id: str) -> tuple[JobState, JobOutput]:
    executor = LocalExecutor(tmp_path / "runs")
    command = (sys.executable, "-m", "planner.inspectjob", str(model), "--out", "result.json", "--max-seconds", "60")
    spec = JobSpec(run_id=run_id, attempt=1, command=command, time_limit_s=120, setup=(f"export PYTHONPATH={ROOT}",))
    ref = executor.submit(spec)
    deadline = time.monotonic() + 120
    while (state := executor.poll([ref])[ref].state).active and time.monotonic() < deadline:
        time.sleep(0.2)
    return state, executor.fetch(ref)


def test_the_job_path_runs_it_like_the_eval_and_quantize_jobs(tmp_path: Path) -> None:
    """As the service will submit it: an attempt directory, `--out result.json` relative to it, fetched
    with its checksum. A refusal exits 2: the job counts as failed, and its result.json says why."""
    model = ckpt.w4a16(tmp_path / "m")
    state, output = _through_the_local_executor(tmp_path, model, "inspect1")
    assert state == JobState.SUCCEEDED, output.log_tail
    assert output.result is not None
    assert output.result["weights_digest"] == weights_digest(model)
    assert output.result["precision"]["key"] == "w4a16"
    (model / "config.json").write_bytes(b'{"a": "\xff"}')
    state, output = _through_the_local_executor(tmp_path, model, "inspect2")
    assert state == JobState.FAILED
    assert output.result_ok, output.problem
    assert output.result is not None
    assert output.result["refused"]["file"] == "config.json"
    assert "Traceback" not in output.log_tail


def test_a_model_directory_linked_out_of_the_model_roots_is_refused_unread(tmp_path: Path) -> None:
    """`<root>/link` -> a directory elsewhere: the node resolves the path and checks it against the
    resolved roots before reading anything (issue 43); the refusal never says where the link leads."""
    outside = ckpt.w4a16(tmp_path / "elsewhere" / "m")
    roots = tmp_path / "models"
    roots.mkdir()
    (roots / "link").symlink_to(outside, target_is_directory=True)
    out = tmp_path / "out" / "result.json"

    assert main([str(roots / "link"), "--out", str(out), "--within", str(roots), "--job", *LIMITS_OFF]) == 0

    refused = json.loads(out.read_text())["refused"]
    assert refused["file"] == "."
    assert "outside the cluster's model roots" in refused["message"]
    assert str(outside) not in refused["message"]
    inside = ckpt.w4a16(roots / "real")
    assert main([str(inside), "--out", str(out), "--within", str(roots), "--job", *LIMITS_OFF]) == 0
    assert "refused" not in json.loads(out.read_text())


LIMITS_OFF = ["--max-seconds", "0", "--max-memory-mb", "0"]
