"""The served eval job (planner.evaljob.served): artifacts verified before serving, the engine's health
bounded, answers cached per case (a killed job resumes), baseline answers shared between candidates,
and the real `transformers serve` end to end on the tiny checkpoint."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from governance.artifacts.manifest import manifest_lines, weights_digest
from planner.evaljob.engines import transformers_launch
from planner.evaljob.manifest import ArtifactMismatch, verify_artifact
from tests.quant.conftest import alive_in_group, processes_naming

pytestmark = pytest.mark.usefixtures("no_engine_left")

ROOT = Path(__file__).resolve().parents[2]
FAKE = Path(__file__).resolve().parent / "fake_engine.py"
TASKS = ROOT / "tests" / "data" / "lm_eval_tasks"  # the tiny lm-eval task CI runs


def checkpoint(path: Path, weights: bytes = b"\x01" * 64) -> dict[str, Any]:
    path.mkdir(parents=True, exist_ok=True)
    (path / "config.json").write_text('{"model_type": "tiny"}\n')
    (path / "model.safetensors").write_bytes(weights)
    return {"path": str(path), "digest": weights_digest(path), "manifest": "".join(manifest_lines(path))}


def fake_engine(asked: Path, *flags: str) -> dict[str, Any]:
    return {
        "name": "fake",
        "argv": ["{python}", str(FAKE), "--port", "{port}", "--log", str(asked), *flags],
        "version_argv": ["{python}", "-c", "print('1.0-fake')"],
        "health_path": "/health",
        "health_timeout_s": 60,
        "logprobs": "--logprobs" in flags,
        "served_model_name": "candidate",
    }


def spec_for(tmp_path: Path, engine: dict[str, Any], per_category: int = 2, **changes: Any) -> dict[str, Any]:
    spec = {
        "scheme": "w4a8",
        "artifacts": {
            "baseline": checkpoint(tmp_path / "models" / "base"),
            "candidate": checkpoint(tmp_path / "models" / "w4a8", b"\x02" * 64),
        },
        "engine": engine,
        "serving": {"precision": "w4a8", "tp": 1, "pp": 1, "ep": 1, "dp": 1},
        "generation": {"seed": 0, "max_new_tokens": 8},
        "max_cases_per_category": per_category,
        "concurrency": 2,
        "threshold": 0.05,
        "cache_dir": "../cache",
        "baseline_cache_dir": str(tmp_path / "baseline-cache"),
        "model_roots": [str(tmp_path / "models")],
    }
    spec.update(changes)
    return spec


def run_job(attempt: Path, spec: dict[str, Any], timeout_s: float = 300) -> subprocess.CompletedProcess[str]:
    attempt.mkdir(parents=True, exist_ok=True)
    (attempt / "spec.json").write_text(json.dumps(spec))
    return subprocess.run(
        [sys.executable, "-m", "planner.evaljob.served", "run", "--spec", "spec.json", "--out", "."],
        cwd=attempt,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )


def test_the_payload_verifies_with_the_registry_s_manifest_and_names_a_changed_file(tmp_path: Path) -> None:
    artifact = checkpoint(tmp_path / "m")
    verify_artifact(Path(artifact["path"]), artifact["digest"], artifact["manifest"])  # as registered
    verify_artifact(Path(artifact["path"]), artifact["digest"], None)  # the same digest, computed here
    weights = tmp_path / "m" / "model.safetensors"
    changed = bytearray(weights.read_bytes())
    changed[10] ^= 0x01
    weights.write_bytes(bytes(changed))
    with pytest.raises(ArtifactMismatch, match=r"model\.safetensors differs"):
        verify_artifact(Path(artifact["path"]), artifact["digest"], artifact["manifest"], "candidate")
    with pytest.raises(ArtifactMismatch, match="do not match the registered"):
        verify_artifact(Path(artifact["path"]), artifact["digest"], None)
    (tmp_path / "m" / "extra.bin").write_bytes(b"x")
    with pytest.raises(ArtifactMismatch, match=r"extra\.bin is not in the registered manifest"):
        verify_artifact(Path(artifact["path"]), artifact["digest"], artifact["manifest"])


def test_a_changed_byte_in_the_candidate_refuses_the_job_before_serving(tmp_path: Path) -> None:
    asked = tmp_path / "asked.log"
    spec = spec_for(tmp_path, fake_engine(asked))
    weights = tmp_path / "models" / "w4a8" / "model.safetensors"
    weights.write_bytes(b"\x02" * 63 + b"\x03")  # one byte changed after registration
    done = run_job(tmp_path / "run" / "attempt-1", spec)
    assert done.returncode != 0
    assert "candidate" in done.stderr
    assert "model.safetensors" in done.stderr
    assert not asked.exists()  # no engine was started, nothing was asked
    assert not (tmp_path / "run" / "attempt-1" / "result.json").exists()


@pytest.mark.fault
def test_an_engine_that_never_becomes_healthy_fails_with_its_log_tail_within_the_timeout(tmp_path: Path) -> None:
    engine = {**fake_engine(tmp_path / "asked.log", "--never-healthy"), "health_timeout_s": 4}
    started = time.monotonic()
    done = run_job(tmp_path / "run" / "attempt-1", spec_for(tmp_path, engine), timeout_s=120)
    assert done.returncode != 0
    assert "not healthy" in done.stderr
    assert "after 4 s" in done.stderr
    assert "fake engine listening" in done.stderr  # the engine's own log lines
    assert time.monotonic() - started < 60
    # an engine that dies at start (out of memory) fails at once, with the reason from its log
    crashed = {**fake_engine(tmp_path / "asked.log", "--crash"), "health_timeout_s": 300}
    started = time.monotonic()
    done = run_job(tmp_path / "run2" / "attempt-1", spec_for(tmp_path, crashed), timeout_s=120)
    assert "exited with code 1" in done.stderr
    assert "CUDA out of memory" in done.stderr
    assert time.monotonic() - started < 60


@pytest.mark.fault
def test_a_job_killed_mid_run_resumes_without_re_asking_finished_cases(tmp_path: Path) -> None:
    asked = tmp_path / "asked.log"
    spec = spec_for(tmp_path, fake_engine(asked, "--delay-s", "0.4"), per_category=3, concurrency=1)
    attempt = tmp_path / "run" / "attempt-1"
    attempt.mkdir(parents=True)
    (attempt / "spec.json").write_text(json.dumps(spec))
    job = subprocess.Popen(
        [sys.executable, "-m", "planner.evaljob.served", "run", "--spec", "spec.json", "--out", "."],
        cwd=attempt,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    cache = tmp_path / "run" / "cache"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and len(list(cache.glob("*.json"))) < 3:
        time.sleep(0.1)
    os.killpg(job.pid, signal.SIGKILL)  # the job's whole group, no cleanup of any kind
    job.wait()
    # the engine (a session of its own, out of reach of that signal) is stopped by its tether
    assert wait_until_gone(str(asked)), f"engine processes left: {processes_naming(str(asked))}"
    finished = len(list(cache.glob("*.json")))
    assert 3 <= finished < 12
    asked_before = len(asked.read_text().splitlines())
    # the requeued attempt (Slurm requeue or the service's retry): a new attempt dir, the same run cache
    done = run_job(tmp_path / "run" / "attempt-2", spec)
    assert done.returncode == 0, done.stderr
    asked_after = len(asked.read_text().splitlines())
    assert asked_after - asked_before == 12 - finished  # only the unanswered candidate cases
    assert "baseline: every answer cached, engine not started" in done.stdout
    result = json.loads((tmp_path / "run" / "attempt-2" / "result.json").read_text())
    assert result["overall"]["n"] == 12
    assert result["timing"]["runs"]["candidate"]["asked"] == 12 - finished


def wait_until_gone(marker: str, timeout_s: float = 10) -> bool:
    """No live process names `marker` (the fake engine's log path) within `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while processes_naming(marker) and time.monotonic() < deadline:
        time.sleep(0.1)
    return not processes_naming(marker)


@pytest.mark.fault
def test_cancelling_the_job_on_the_local_executor_stops_its_engine(tmp_path: Path) -> None:
    """The executor's cancel signals the job's process group; the engine runs in a session of its
    own (so that stopping it never signals the job) and used to survive every cancel, keeping its
    port and memory. Its tether stops it as soon as the job is gone."""
    from planner.cluster.base import JobSpec
    from planner.cluster.local import LocalExecutor

    asked = tmp_path / "asked.log"
    spec = spec_for(tmp_path, fake_engine(asked, "--delay-s", "0.5"), per_category=3, concurrency=1)
    executor = LocalExecutor(tmp_path / "runs")
    ref = executor.submit(
        JobSpec(
            run_id="cancelme",
            attempt=1,
            command=(sys.executable, "-m", "planner.evaljob.served", "run", "--spec", "spec.json", "--out", "."),
            files={"spec.json": json.dumps(spec).encode()},
            time_limit_s=300,
            setup=(f"export PYTHONPATH={ROOT}",),
        )
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not (asked.exists() and asked.read_text()):
        time.sleep(0.1)
    assert asked.exists(), (Path(ref.run_dir) / "job.log").read_text()
    assert processes_naming(str(asked))  # the engine is serving, mid-run
    executor.cancel(ref)
    assert wait_until_gone(str(asked)), f"engine processes left: {processes_naming(str(asked))}"
    assert "tether: the eval job is gone" in (Path(ref.run_dir) / "engine-baseline.log").read_text()
    engine_group = int((Path(ref.run_dir) / "engine-baseline.pgid").read_text())  # recorded for operators
    assert not alive_in_group(engine_group)


def test_baseline_answers_are_shared_by_a_second_candidate_and_logprobs_give_token_metrics(tmp_path: Path) -> None:
    asked = tmp_path / "asked.log"
    spec = spec_for(tmp_path, fake_engine(asked, "--logprobs"))
    first = run_job(tmp_path / "one" / "attempt-1", spec)
    assert first.returncode == 0, first.stderr
    second_candidate = checkpoint(tmp_path / "models" / "w4a8-v2", b"\x04" * 64)
    second_spec = {**spec, "artifacts": {**spec["artifacts"], "candidate": second_candidate}}
    second = run_job(tmp_path / "two" / "attempt-1", second_spec)
    assert second.returncode == 0, second.stderr
    assert "baseline: every answer cached, engine not started" in second.stdout
    assert len(asked.read_text().splitlines()) == 3 * 8  # baseline once, each candidate once
    result = json.loads((tmp_path / "two" / "attempt-1" / "result.json").read_text())
    assert result["candidate"]["digest"] == second_candidate["digest"]
    assert result["baseline"]["digest"] == spec["artifacts"]["baseline"]["digest"]
    assert result["engine"]["version"] == "1.0-fake"
    assert result["overall"]["top1_agreement"] == 1.0
    assert result["overall"]["kl"]["mean"] == pytest.approx(0.0)
    # the candidate's own answers are kept: a canary of these weights must answer alike (issue 45)
    assert len(result["candidate_answers"]) == 8
    assert all(isinstance(text, str) and text for text in result["candidate_answers"].values())
    # another engine version is another baseline: its answers are not reused
    other = {**spec, "engine": {**spec["engine"], "version_argv": ["{python}", "-c", "print('1.1-fake')"]}}
    assert run_job(tmp_path / "three" / "attempt-1", other).returncode == 0
    assert len(asked.read_text().splitlines()) == 5 * 8


def test_standard_tasks_run_through_lm_eval_against_the_served_engine(tmp_path: Path) -> None:
    """lm-eval's local-chat-completions model against the engine the eval serves, offline, on the
    repository's tiny task: per task and metric the baseline's and candidate's values with their
    standard errors; the baseline's results are cached with its answers like them."""
    asked = tmp_path / "asked.log"
    standard = {"tasks": ["tiny_copy"], "dir": str(TASKS), "concurrency": 2}
    spec = spec_for(tmp_path, fake_engine(asked, "--model", "{model}"), per_category=1, lm_eval=standard)
    done = run_job(tmp_path / "one" / "attempt-1", spec, timeout_s=600)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads((tmp_path / "one" / "attempt-1" / "result.json").read_text())
    tasks = result["standard_tasks"]
    assert tasks["harness"] == "lm-eval"
    assert tasks["model"] == "local-chat-completions"
    assert len(tasks["tasks_dir_sha256"]) == 64
    exact = tasks["tasks"]["tiny_copy"]["metrics"]["exact_match"]
    assert tasks["tasks"]["tiny_copy"]["n"] == 6
    assert exact["baseline"] == 1.0
    assert exact["candidate"] == pytest.approx(5 / 6)  # the w4a8 stand-in gets "apple" wrong
    assert exact["candidate_stderr"] == pytest.approx(((5 / 6) * (1 / 6) / 5) ** 0.5)  # lm-eval's sample stderr
    assert exact["delta"] == pytest.approx(-1 / 6)
    assert exact["delta_stderr"] == pytest.approx(exact["candidate_stderr"])  # the baseline's is 0
    assert set(result["overall"]) & {"tiny_copy", "standard_tasks"} == set()  # beside the verdict, not in it
    # a second candidate: the baseline's answers and task results are reused, its engine not started
    other = checkpoint(tmp_path / "models" / "w4a8-v2", b"\x05" * 64)
    second = run_job(tmp_path / "two" / "attempt-1", {**spec, "artifacts": {**spec["artifacts"], "candidate": other}})
    assert second.returncode == 0, second.stderr[-3000:]
    assert "baseline: every answer cached, engine not started" in second.stdout
    # the task directory is configuration: no job writes into it (a datasets cache there once did)
    assert sorted(p.name for p in TASKS.iterdir()) == ["tiny_copy.jsonl", "tiny_copy.yaml"]


def test_online_quantization_serves_one_artifact_twice_with_the_flag_only_for_the_candidate(tmp_path: Path) -> None:
    """A plan that quantizes base weights at load (vLLM `--quantization fp8` on BF16): the candidate
    is the base artifact served with the flag, the baseline the same artifact without it; the
    baseline's answers are keyed without the online quantization, so they are shared."""
    asked = tmp_path / "asked.log"
    base = checkpoint(tmp_path / "models" / "base")
    engine = {**fake_engine(asked), "candidate_argv": ["--quantization", "fp8"]}
    spec = spec_for(tmp_path, engine, per_category=1)
    spec["artifacts"] = {"baseline": base, "candidate": base}
    spec["serving"] = {**spec["serving"], "precision": "fp8", "online_quantization": "fp8"}
    done = run_job(tmp_path / "run" / "attempt-1", spec)
    assert done.returncode == 0, done.stderr[-3000:]
    attempt = tmp_path / "run" / "attempt-1"
    assert "--quantization fp8" in (attempt / "engine-candidate.log").read_text()
    assert "--quantization" not in (attempt / "engine-baseline.log").read_text()
    result = json.loads((attempt / "result.json").read_text())
    assert result["candidate"]["digest"] == result["baseline"]["digest"] == base["digest"]
    assert result["engine"]["candidate_argv"] == ["--quantization", "fp8"]
    assert result["serving"]["online_quantization"] == "fp8"
    # the same artifact's unquantized answers serve a plain (not online-quantized) eval's baseline
    plain = {**spec, "engine": fake_engine(asked), "serving": {**spec["serving"]}}
    del plain["serving"]["online_quantization"]
    again = run_job(tmp_path / "plain" / "attempt-1", plain)
    assert "baseline: every answer cached, engine not started" in again.stdout


def test_a_missing_task_directory_fails_the_job_before_anything_is_served(tmp_path: Path) -> None:
    asked = tmp_path / "asked.log"
    standard = {"tasks": ["tiny_copy"], "dir": str(tmp_path / "no-such-dir")}
    done = run_job(tmp_path / "run" / "attempt-1", spec_for(tmp_path, fake_engine(asked), lm_eval=standard))
    assert done.returncode != 0
    assert "lm_eval.dir" in done.stderr
    assert not asked.exists()


@pytest.mark.slow
def test_transformers_serve_answers_the_eval_on_the_tiny_checkpoint(tmp_path: Path, tiny_checkpoint: Path) -> None:
    """The real engine: `transformers serve` on CPU starts, answers through the chat API, stops."""
    import transformers

    base = tmp_path / "real" / "base"
    shutil.copytree(tiny_checkpoint, base)
    candidate = tmp_path / "real" / "w4a8"
    shutil.copytree(tiny_checkpoint, candidate)
    (candidate / "NOTICE").write_text("same weights, another artifact\n")  # another digest, same answers
    engine = transformers_launch().as_spec(health_timeout_s=240)
    spec = spec_for(tmp_path, engine, per_category=1, concurrency=2)
    spec["artifacts"] = {
        role: {"path": str(path), "digest": weights_digest(path), "manifest": "".join(manifest_lines(path))}
        for role, path in (("baseline", base), ("candidate", candidate))
    }
    spec["model_roots"] = [str(tmp_path / "real")]
    done = run_job(tmp_path / "run" / "attempt-1", spec, timeout_s=600)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads((tmp_path / "run" / "attempt-1" / "result.json").read_text())
    assert result["engine"]["name"] == "transformers"
    assert result["engine"]["version"] == transformers.__version__
    assert result["overall"]["n"] == 4
    assert result["overall"]["failures"] == 0  # the same weights answer the same, greedy and seeded
    assert result["overall"]["top1_agreement"] is None  # transformers serve returns no logprobs: absent
    assert result["overall"]["kl"] is None
    assert result["token_metrics"].startswith("absent")
    assert result["client"]["peak_rss_mib"] < 200  # the job is a client; the model lived in the engine
    # the engines were stopped: nothing listens any more and no engine process is left
    assert "healthy after" in done.stdout


@pytest.mark.cluster
def test_served_job_through_slurm_with_a_one_node_multinode_launch(tmp_path: Path, testcluster: dict[str, Any]) -> None:
    """The same job through sshd + Slurm: the artifacts verified on the node, the engine started by
    the multi-node script (one allocation, `srun` one task per node, here one node), answers cached
    in the run directory, result.json fetched over SFTP."""
    import sysconfig

    from planner.cluster.base import JobSpec, JobState
    from planner.cluster.slurm import SlurmSSHExecutor
    from tests.evaluations.conftest import target

    python_path = f"{ROOT}:{sysconfig.get_paths()['purelib']}"
    shared = Path(f"/var/tmp/gov-served-{os.getpid()}-{int(time.time())}")  # readable by the cluster account
    shared.mkdir(mode=0o755)
    try:
        asked = shared / "asked.log"
        asked.touch(mode=0o666)
        asked.chmod(0o666)
        engine = {**fake_engine(asked), "name": "vllm", "multinode": {"nnodes": 1, "gpus_per_node": 0}}
        spec = spec_for(shared, engine, per_category=1)
        run_id = f"served{int(time.time())}"
        spec["baseline_cache_dir"] = f"{testcluster['remote_root']}/{run_id}/baseline-answers"
        for path in shared.rglob("*"):
            path.chmod(0o755 if path.is_dir() else 0o644)
        asked.chmod(0o666)
        executor = SlurmSSHExecutor(target(testcluster))
        job = JobSpec(
            run_id=run_id,
            attempt=1,
            command=("/usr/bin/python3", "-m", "planner.evaljob.served", "run", "--spec", "spec.json", "--out", "."),
            files={"spec.json": json.dumps(spec).encode()},
            partition=testcluster["partition"],
            time_limit_s=300,
            setup=(f"export PYTHONPATH={python_path}",),
        )
        ref = executor.submit(job)
        deadline = time.monotonic() + 240
        state = JobState.PENDING
        while time.monotonic() < deadline:
            state = executor.poll([ref])[ref].state
            if not state.active:
                break
            time.sleep(1)
        output = executor.fetch(ref)
        assert state == JobState.SUCCEEDED, output.log_tail
        assert output.result_ok, output.problem + output.log_tail
        result = output.result or {}
        assert result["candidate"]["digest"] == spec["artifacts"]["candidate"]["digest"]
        assert result["overall"]["n"] == 4
        assert len(asked.read_text().splitlines()) == 8  # baseline and candidate, each case once
        assert "candidate: healthy after" in output.log_tail
        # the engine was started by srun with the rank and head Slurm gave it (the loopback cluster
        # shares this host's filesystem, so its log is readable here)
        engine_log = (Path(ref.run_dir) / "engine-candidate.log").read_text()
        assert "--nnodes 1 --node-rank 0 --master-addr" in engine_log
    finally:
        shutil.rmtree(shared, ignore_errors=True)


def test_a_candidate_of_another_precision_reuses_the_baseline_answers(tmp_path: Path) -> None:
    """The baseline is served as it is whatever the candidate's format (a derivative's precision is in
    its own weights; online quantization is the candidate's flag alone), so a W2A16 and a W4A16
    derivative of one baseline share its answers. The key held the candidate's precision: each
    derivative of another format served the baseline again (20 s of the careless/good gate test)."""
    asked = tmp_path / "asked.log"
    spec = spec_for(tmp_path, fake_engine(asked))
    assert run_job(tmp_path / "one" / "attempt-1", spec).returncode == 0
    other_format = {
        **spec,
        "scheme": "w2a16",
        "artifacts": {**spec["artifacts"], "candidate": checkpoint(tmp_path / "models" / "w2a16", b"\x05" * 64)},
        "serving": {**spec["serving"], "precision": "w2a16"},
    }
    second = run_job(tmp_path / "two" / "attempt-1", other_format)
    assert second.returncode == 0, second.stderr
    assert "baseline: every answer cached, engine not started" in second.stdout
    assert len(asked.read_text().splitlines()) == 3 * 8  # baseline once, each candidate once
    # what the baseline is served with still counts: another layout is another set of answers
    wider = {**spec, "serving": {**spec["serving"], "tp": 2}}
    third = run_job(tmp_path / "three" / "attempt-1", wider)
    assert third.returncode == 0, third.stderr
    assert "baseline: every answer cached" not in third.stdout
