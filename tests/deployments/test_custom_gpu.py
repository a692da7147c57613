"""A request accepts what the planner CLI accepts: a GPU outside the catalog (`serving_plan.gpu_spec`,
the fields of `--gpu-spec`). Bad specs answer 400 naming the field and the expected names; a good
one is stored with the request, bound into its evidence and used by its capacity plan."""

from __future__ import annotations

from typing import Any

import pytest

from governance.capacity.models import CapacityPlan
from governance.capacity.services import capacity_plan_compute
from governance.deployments.models import DeploymentRequest
from planner.plan import PlanRequest, plan
from planner.specs import GPU_REQUIRED_FIELDS, gpu_from_dict
from tests.conftest import Personas
from tests.deployments.conftest import SERVING, Flow

# A GPU no catalog has: twice an H200's memory and bandwidth.
SPEC: dict[str, Any] = {
    "key": "lab-x2",
    "name": "Lab accelerator X2",
    "memory_mib": 2 * 143771,
    "hbm_bandwidth_gb_per_s": 9600,
    "bf16_tflops": 989,
    "fp8_tflops": 1979,
}
CUSTOM = {**{k: v for k, v in SERVING.items() if k != "gpu"}, "gpu_spec": SPEC}


def _create(flow: Flow, personas: Personas, artifact: Any, serving: dict[str, Any]) -> Any:
    body = {
        "artifact": str(artifact.code),
        "product_name": "Acme Assistant",
        "environments": ["production"],
        "facts": {"use_case": "internal"},
        "serving_plan": serving,
    }
    return flow.client(personas.requester).post("/api/v1/deployments/", body, format="json")


@pytest.mark.parametrize(
    ("spec", "field", "says"),
    [
        ({**SPEC, "memory_gb": 80}, "serving_plan.gpu_spec", "memory_gb"),
        ({k: v for k, v in SPEC.items() if k != "hbm_bandwidth_gb_per_s"}, "serving_plan.gpu_spec", "required"),
        ({**SPEC, "memory_mib": -1}, "serving_plan.gpu_spec", "memory_mib"),
        ({**SPEC, "memory_mib": 10**12}, "serving_plan.gpu_spec", "memory_mib"),
        ({**SPEC, "key": "h200"}, "serving_plan.gpu_spec", "catalog"),
        ({**SPEC, "key": "Lab X2; rm -rf"}, "serving_plan.gpu_spec", "key"),
        ([1, 2], "serving_plan.gpu_spec", "object"),
    ],
    ids=["unknown-field", "missing-field", "negative", "huge", "catalog-key", "bad-key", "not-object"],
)
def test_a_bad_gpu_spec_answers_400_naming_the_field(
    flow: Flow, personas: Personas, artifacts: dict[str, Any], spec: Any, field: str, says: str
) -> None:
    response = _create(flow, personas, artifacts["qwen"], {**CUSTOM, "gpu_spec": spec})
    assert response.status_code == 400, response.json()
    fields = response.json()["extra"]["fields"]
    assert field in fields, fields
    assert says in str(fields[field])


def test_an_unknown_field_lists_the_expected_names(flow: Flow, personas: Personas, artifacts: dict[str, Any]) -> None:
    response = _create(flow, personas, artifacts["qwen"], {**CUSTOM, "gpu_spec": {**SPEC, "memory_gb": 80}})
    message = str(response.json()["extra"]["fields"]["serving_plan.gpu_spec"])
    assert all(name in message for name in GPU_REQUIRED_FIELDS)


def test_neither_gpu_nor_spec_names_gpu(flow: Flow, personas: Personas, artifacts: dict[str, Any]) -> None:
    serving = {k: v for k, v in SERVING.items() if k != "gpu"}
    response = _create(flow, personas, artifacts["qwen"], serving)
    assert response.status_code == 400
    assert "serving_plan.gpu" in response.json()["extra"]["fields"]


def test_a_gpu_that_differs_from_the_spec_key_is_refused(
    flow: Flow, personas: Personas, artifacts: dict[str, Any]
) -> None:
    response = _create(flow, personas, artifacts["qwen"], {**CUSTOM, "gpu": "h100-80g"})
    assert response.status_code == 400
    assert "serving_plan.gpu" in response.json()["extra"]["fields"]


def test_the_capacity_plan_uses_the_custom_gpu(flow: Flow, personas: Personas, artifacts: dict[str, Any]) -> None:
    response = _create(flow, personas, artifacts["qwen"], CUSTOM)
    assert response.status_code == 201, response.json()
    code = response.json()["code"]
    stored = response.json()["serving_plan"]
    assert stored["gpu"] == "lab-x2"
    assert stored["gpu_spec"]["memory_mib"] == SPEC["memory_mib"]
    assert flow.post(personas.requester, code, "submit").status_code == 200
    deployment = DeploymentRequest.objects.get(code=code)
    pending = CapacityPlan.objects.filter(deployment__code=code).latest("created_at")
    computed = capacity_plan_compute(plan_id=pending.pk)
    assert computed.status == "done", computed.error
    result = computed.result
    assert result is not None
    expected = plan(
        PlanRequest(
            model="qwen3-30b-a3b",
            precision="fp8",
            gpu=gpu_from_dict(SPEC),
            max_model_len=SERVING["max_model_len"],
            concurrency=SERVING["concurrency"],
            model_path="org/Qwen2.5-72B-Instruct",
        )
    ).as_contract()
    assert result["memory_per_gpu"]["capacity"] == expected["memory_per_gpu"]["capacity"]
    assert result["throughput"]["decode_tokens_per_s"] == pytest.approx(expected["throughput"]["decode_tokens_per_s"])
    # the custom memory, not an H200's: twice as much room
    on_h200 = plan(PlanRequest(model="qwen3-30b-a3b", precision="fp8", gpu="h200", max_model_len=32768, concurrency=4))
    assert result["memory_per_gpu"]["capacity"] > 1.9 * on_h200.as_contract()["memory_per_gpu"]["capacity"]
    assert result["throughput"]["decode_tokens_per_s"] > on_h200.as_contract()["throughput"]["decode_tokens_per_s"]
    # the spec is evidence: a reviewer signs the GPU the plan was made for
    deployment.refresh_from_db()
    assert (deployment.evidence or {})["serving_envelope"]["gpu_spec"] == SPEC


def test_the_planner_api_takes_a_gpu_spec(personas: Personas) -> None:
    body = {"model": "qwen3-30b-a3b", "precision": "fp8", "gpu_spec": SPEC, "max_model_len": 32768}
    response = personas.client(personas.engineer).post("/api/v1/planner/plan", body, format="json")
    assert response.status_code == 200, response.json()
    assert response.json()["gpu"]["total_memory_bytes"] == SPEC["memory_mib"] * 1024 * 1024
    bad = personas.client(personas.engineer).post(
        "/api/v1/planner/plan", {**body, "gpu_spec": {"name": "x"}}, format="json"
    )
    assert bad.status_code == 400
    assert "gpu_spec" in bad.json()["extra"]["fields"]
