"""A startup log of a request's deployment, recorded through the API, is evidence of the request: one whose KV
pool falls outside the capacity plan's interval is flagged to engineering on the request (issue 47). A request
whose target cluster the service knows is planned with that cluster's startup logs."""

from __future__ import annotations

from typing import Any

from governance.audit.models import AuditEvent
from governance.calibration.services import startup_log_record
from governance.deployments.models import DeploymentRequest
from governance.deployments.selectors import latest_capacity_plan
from governance.deployments.services import planner_inputs
from governance.evaluations.models import Cluster, ExecutorKind
from tests.calibration.test_startup_logs import vllm_log
from tests.deployments.conftest import Flow


def _log_for(result: dict[str, Any], kv_gib: float) -> str:
    """A log of the plan's own layout and context (SERVING's max_model_len)."""
    tp = result["parallel"]["tp"]
    return (
        vllm_log(kv_gib)
        .replace("tensor_parallel_size=1", f"tensor_parallel_size={tp}")
        .replace("max_seq_len=8192", "max_seq_len=32768")
    )


def test_a_measured_pool_outside_the_plan_s_interval_is_flagged_on_the_request(
    flow: Flow, artifacts: dict[str, Any], django_capture_on_commit_callbacks: Any
) -> None:
    code = flow.to_review(artifacts["apache"])
    flow.compute_capacity(code)
    before = flow.get(flow.p.legal, code)
    assert not [b for b in before["blockers"] if b["code"] == "capacity.outside_interval"]
    stored = latest_capacity_plan(DeploymentRequest.objects.get(code=code))
    assert stored is not None
    assert stored.result is not None
    result = stored.result
    cluster = Cluster.objects.create(name="gpu-a", executor=ExecutorKind.LOCAL, remote_root="/tmp/gpu-a")
    body = {
        "text": _log_for(result, 1.0),  # far below any interval the plan gives
        "gpu": "h200",
        "model": "qwen3-30b-a3b",
        "precision": "fp8",
        "deployment": code,
    }
    with django_capture_on_commit_callbacks(execute=True):
        answer = flow.client(flow.p.engineer).post(f"/api/v1/clusters/{cluster.code}/startup-logs", body, format="json")
    assert answer.status_code == 201, answer.json()
    assert answer.json()["deployment"] == code
    after = flow.get(flow.p.legal, code)
    [flag] = [b for b in after["blockers"] if b["code"] == "capacity.outside_interval"]
    assert flag["severity"] == "review"
    assert "KV pool per GPU 1.00 GiB measured" in flag["message"]
    assert "on cluster gpu-a" in flag["message"]
    assert after["evidence_digest"] != before["evidence_digest"]
    assert AuditEvent.objects.filter(action=631, object_id=answer.json()["code"]).exists()


def test_a_request_for_a_known_cluster_is_planned_with_its_startup_logs(flow: Flow, artifacts: dict[str, Any]) -> None:
    cluster = Cluster.objects.create(name="gpu-a", executor=ExecutorKind.LOCAL, remote_root="/tmp/gpu-a")
    for offset in (0.40, 0.50, 0.45):  # SERVING's GPU, engine and (default) release line
        startup_log_record(cluster=cluster, text=vllm_log(60.0 + offset), gpu="h200", model="llama-3.1-8b", actor=None)
    code = flow.create(artifacts["apache"], target_cluster="gpu-a")["code"]
    assert flow.post(flow.p.requester, code, "submit").status_code == 200
    flow.compute_capacity(code)
    stored = latest_capacity_plan(DeploymentRequest.objects.get(code=code))
    assert stored is not None
    assert stored.inputs["cluster"] == str(cluster.code)
    assert stored.result is not None
    assert any(n.startswith("KV reserve from 3 of your startup logs on cluster gpu-a") for n in stored.result["notes"])
    assert stored.result["intervals"]["memory_per_gpu.kv_cache"]["n"] == 3
    other = flow.create(artifacts["apache"], target_cluster="somewhere-else")["code"]
    assert "cluster" not in planner_inputs(DeploymentRequest.objects.get(code=other))
