"""A cluster's own startup logs (issue 47): recorded through the API (engineering), each held against the plan of
its own settings, and a plan for that cluster, GPU, engine and release line uses them ahead of the catalog: its
reserve follows them, its KV intervals narrow to their spread and it says so."""

from __future__ import annotations

from typing import Any

import pytest

from governance.audit.models import AuditEvent
from governance.calibration.models import StartupLog
from governance.evaluations.models import Cluster, ExecutorKind
from planner.checklog import log_request, parse_log
from planner.plan import plan
from tests.conftest import Personas

GIB = 1 << 30
PLAN = {
    "model": "llama-3.1-8b",
    "precision": "bf16",
    "gpu": "h100-80g",
    "engine": "vllm",
    "engine_version": "0.11.0",
    "tp": 1,
    "max_model_len": 8192,
    "concurrency": 8,
}


def vllm_log(kv_gib: float, loading_gib: float = 14.99, version: str = "0.11.0") -> str:
    """A vLLM V1 startup log's lines the planner reads (a real log's wording, figures of our choosing)."""
    return (
        f"INFO 12-05 08:00:00 [api_server.py:1] vLLM API server version {version}\n"
        "INFO 12-05 08:00:01 [core.py:1] Initializing a V1 LLM engine with config: "
        "model='meta-llama/Llama-3.1-8B-Instruct', tensor_parallel_size=1, pipeline_parallel_size=1, "
        "max_seq_len=8192, gpu_memory_utilization=0.9\n"
        f"INFO 12-05 08:00:30 [gpu_model_runner.py:1] Model loading took {loading_gib:.4f} GiB and 20.1 seconds\n"
        f"INFO 12-05 08:00:40 [gpu_worker.py:1] Available KV cache memory: {kv_gib:.2f} GiB\n"
    )


def planned_pool_gib(text: str) -> float:
    """What the catalog alone plans for the log's own settings (the residual's reference)."""
    request = log_request(parse_log(text), model="llama-3.1-8b", precision="bf16", gpu="h100-80g")
    return plan(request).chosen.memory.kv_pool_bytes / GIB


@pytest.fixture
def gpu_a(db: None) -> Cluster:
    return Cluster.objects.create(name="gpu-a", executor=ExecutorKind.LOCAL, remote_root="/tmp/gpu-a")


def _record(client: Any, cluster: Cluster, text: str, **extra: Any) -> Any:
    body = {"text": text, "gpu": "h100-80g", "model": "llama-3.1-8b", "precision": "bf16", **extra}
    return client.post(f"/api/v1/clusters/{cluster.code}/startup-logs", body, format="json")


def test_a_plan_with_three_stored_startup_logs_narrows_and_names_them(gpu_a: Cluster, personas: Personas) -> None:
    engineer = personas.client(personas.engineer)
    reference = planned_pool_gib(vllm_log(60.0))
    before = engineer.post("/api/v1/planner/plan", {**PLAN, "cluster": str(gpu_a.code)}, format="json").json()
    for offset in (0.40, 0.50, 0.45):
        answer = _record(engineer, gpu_a, vllm_log(reference + offset))
        assert answer.status_code == 201, answer.json()
        assert abs(answer.json()["kv_pool_residual_bytes"] / GIB - offset) < 0.01
        assert answer.json()["release_line"] == "0.11"
    assert AuditEvent.objects.filter(action=631).count() == 3
    after = engineer.post("/api/v1/planner/plan", {**PLAN, "cluster": str(gpu_a.code)}, format="json").json()
    assert any(note.startswith("KV reserve from 3 of your startup logs on cluster gpu-a") for note in after["notes"])
    assert not any("your startup logs" in note for note in before["notes"])
    assert after["memory_per_gpu"]["kv_cache"] > before["memory_per_gpu"]["kv_cache"] + 0.4 * GIB
    for path in ("memory_per_gpu.kv_cache", "kv_cache.capacity_tokens"):
        narrow, wide = after["intervals"][path], before["intervals"][path]
        assert narrow["high"] - narrow["low"] < wide["high"] - wide["low"], path
        assert narrow["n"] == 3
        assert "3 of your startup logs on cluster gpu-a" in narrow["basis"]
    # Another release line, or no cluster: the catalog's.
    other = engineer.post(
        "/api/v1/planner/plan", {**PLAN, "engine_version": "0.10.1", "cluster": str(gpu_a.code)}, format="json"
    ).json()
    assert not any("your startup logs" in note for note in other["notes"])
    plain = engineer.post("/api/v1/planner/plan", PLAN, format="json").json()
    assert plain["intervals"] == before["intervals"]
    listed = personas.client(personas.auditor).get(f"/api/v1/clusters/{gpu_a.code}/startup-logs")
    assert listed.status_code == 200
    assert len(listed.json()) == 3
    assert "text" not in listed.json()[0]  # the log's text is not kept: its digest is


def test_recording_is_engineering_s_and_a_log_without_a_pool_or_version_is_refused(
    gpu_a: Cluster, personas: Personas
) -> None:
    text = vllm_log(60.0)
    assert _record(personas.client(personas.requester), gpu_a, text).status_code == 403
    assert personas.client(personas.outsider).get(f"/api/v1/clusters/{gpu_a.code}/startup-logs").status_code == 403
    engineer = personas.client(personas.engineer)
    no_pool = _record(engineer, gpu_a, text.replace("Available KV cache memory", "Something"))
    assert no_pool.status_code == 400
    assert "text" in no_pool.json()["extra"]["fields"]
    no_version = _record(engineer, gpu_a, text.replace("vLLM API server version 0.11.0", "started"))
    assert no_version.status_code == 400
    assert "engine_version" in no_version.json()["extra"]["fields"]
    # a version that is not a release is refused saying what one looks like (not "does not match the pattern")
    not_a_release = _record(engineer, gpu_a, text, engine_version="latest")
    assert not_a_release.status_code == 400
    [message] = not_a_release.json()["extra"]["fields"]["engine_version"]
    assert "0.11.0" in message, message
    unknown = _record(engineer, gpu_a, text, model="no-such-model")
    assert unknown.status_code == 400
    assert StartupLog.objects.count() == 0
