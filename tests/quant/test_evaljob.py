"""The eval job payload: default set, end to end through the LocalExecutor (with resume) and
through the real Slurm test cluster, on CPU with a tiny MoE model and an offline BPE tokenizer."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import sysconfig
import time
from pathlib import Path
from typing import Any

import pytest

from planner.cluster.base import JobSpec, JobState
from planner.cluster.local import LocalExecutor
from planner.evaljob.build_default_set import build
from planner.evaljob.run import DEFAULT_SET, load_cases
from planner.evaljob.tiny import TINY_QWEN3_MOE, random_model_spec, train_tokenizer

ROOT = Path(__file__).resolve().parents[2]


def test_default_set_has_four_categories_of_100_and_is_reproducible(tmp_path: Path) -> None:
    cases, sha = load_cases(None, None)
    categories: dict[str, int] = {}
    for case in cases:
        categories[case["category"]] = categories.get(case["category"], 0) + 1
        assert case["key_items"], case["id"]
    assert categories == {"math": 100, "code": 100, "zh_summary": 100, "multi_turn": 100}
    assert sha == hashlib.sha256(DEFAULT_SET.read_bytes()).hexdigest()
    assert build(tmp_path / "again.jsonl") == sha  # the generator is deterministic
    assert any("营业收入" in case["turns"][0] for case in cases)  # Chinese long documents are in the set


def _job_files(tmp_path: Path, scheme: str = "w4a8", per_category: int = 2) -> dict[str, bytes]:
    tokenizer = train_tokenizer(tmp_path / "tokenizer.json")
    spec = {
        "model": random_model_spec(TINY_QWEN3_MOE, Path("tokenizer.json"), dtype="float32"),
        "scheme": scheme,
        "group_size": 32,
        "max_cases_per_category": per_category,
        "max_new_tokens": 6,
        "device": "cpu",
    }
    return {"spec.json": json.dumps(spec).encode(), "tokenizer.json": tokenizer.read_bytes()}


def _command() -> tuple[str, ...]:
    return (sys.executable, "-m", "planner.evaljob", "run", "--spec", "spec.json", "--out", ".")


def _wait(executor: Any, ref: Any, timeout_s: float = 240) -> JobState:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        state = executor.poll([ref])[ref].state
        if not state.active:
            return state
        time.sleep(0.5)
    raise AssertionError("eval job did not finish")


def _check_result(result: dict[str, Any], cases: int) -> None:
    assert result["overall"]["n"] == cases
    assert set(result["categories"]) == {"math", "code", "zh_summary", "multi_turn"}
    assert 0 <= result["overall"]["top1_agreement"] <= 1
    assert result["overall"]["kl"]["p99"] >= result["overall"]["kl"]["mean"] >= 0
    assert result["overall"]["upper_bound_95"] >= 0.31  # 8 cases: 1 - 0.05^(1/8) = 0.312 at best, never a pass
    assert result["pass"] is False
    assert result["quantization"]["kept_bf16"] == ["lm_head"]
    assert result["versions"]["torch"]


@pytest.mark.slow
def test_job_runs_through_the_local_executor_and_resumes(tmp_path: Path) -> None:
    executor = LocalExecutor(tmp_path / "runs")
    files = _job_files(tmp_path)
    spec = JobSpec(
        run_id="eval1",
        attempt=1,
        command=_command(),
        files=files,
        time_limit_s=600,
        setup=(f"export PYTHONPATH={ROOT}",),
    )
    ref = executor.submit(spec)
    assert _wait(executor, ref) == JobState.SUCCEEDED
    output = executor.fetch(ref)
    assert output.result_ok, output.problem + output.log_tail
    _check_result(output.result or {}, 8)
    assert "progress 8/8" in output.log_tail
    # A requeued job resumes from its cached cases.
    run_dir = Path(ref.run_dir)
    (run_dir / "result.json").unlink()
    completed = subprocess.run(
        list(_command()),
        cwd=run_dir,
        capture_output=True,
        text=True,
        check=False,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.count("(cached") == 8
    assert (run_dir / "result.json.sha256").read_text() == hashlib.sha256(
        (run_dir / "result.json").read_bytes()
    ).hexdigest()


def test_bad_spec_exits_2_with_a_message(tmp_path: Path) -> None:
    (tmp_path / "spec.json").write_text(json.dumps({"scheme": "w3a2", "model": {}}))
    completed = subprocess.run(
        list(_command()),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )
    assert completed.returncode == 2
    assert "evaljob: error" in completed.stderr


@pytest.mark.cluster
def test_job_runs_through_the_slurm_test_cluster(tmp_path: Path, testcluster: dict[str, Any]) -> None:
    from planner.cluster.slurm import SlurmSSHExecutor
    from tests.evaluations.conftest import target

    # The cluster runs the job with its own Python: here Debian's python3.11, with this checkout and
    # the project's site-packages (same CPython minor version) on PYTHONPATH, as the cluster account.
    site_packages = sysconfig.get_paths()["purelib"]
    python_path = f"{ROOT}:{site_packages}"
    probe = subprocess.run(
        [
            "runuser",
            "-u",
            testcluster["user"],
            "--",
            "env",
            f"PYTHONPATH={python_path}",
            "/usr/bin/python3",
            "-c",
            "import planner.evaljob.run, torch, transformers",
        ],
        check=False,
        capture_output=True,
        text=True,
    )
    if probe.returncode != 0:
        pytest.skip(f"the cluster account cannot import this checkout ({ROOT}): {probe.stderr.strip()[-200:]}")
    executor = SlurmSSHExecutor(target(testcluster))
    command = ("/usr/bin/python3", *_command()[1:])
    spec = JobSpec(
        run_id=f"eval{int(time.time())}",
        attempt=1,
        command=command,
        files=_job_files(tmp_path),
        partition=testcluster["partition"],
        time_limit_s=600,
        setup=(f"export PYTHONPATH={python_path}",),
    )
    ref = executor.submit(spec)
    assert _wait(executor, ref) == JobState.SUCCEEDED
    output = executor.fetch(ref)
    assert output.result_ok, output.problem + output.log_tail
    _check_result(output.result or {}, 8)
