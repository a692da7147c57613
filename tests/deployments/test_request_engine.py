"""A request's capacity plan is computed for the request's own engine (issue 44): an SGLang or
TensorRT-LLM request is judged by that engine's memory rules, not vLLM's, and the gate, which
compares the engine, checks what the plan judged."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, cast

import pytest
from django import forms
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rest_framework.fields import ChoiceField

from governance.artifacts.models import ModelArtifact
from governance.capacity.serializers import plan_request_from
from governance.deployments.envelope import approved_envelope
from governance.deployments.models import DeploymentRequest
from governance.deployments.readiness import ReasonCode
from governance.deployments.services import planner_inputs
from governance.gate.conditions import GateCheck, GateState, _serving
from planner.engines import SERVING_ENGINES, ServingEngine, serving_engine
from planner.plan import plan
from planner.specs import precisions
from tests.deployments.conftest import SERVING, Flow

# The serving engine a request names -> the memory profile its capacity plan must use (written out,
# not read from the registry: the registry is what this checks).
PLANNED_AS = {"vllm": "vllm", "sglang": "sglang", "tensorrt_llm": "trtllm", "transformers": "vllm"}


def _planned_engine(flow: Flow, artifacts: dict, engine: str) -> dict[str, Any]:
    code = flow.create(artifacts["apache"], serving_plan={**SERVING, "engine": engine})["code"]
    assert flow.post(flow.p.requester, code, "submit").status_code == 200
    flow.compute_capacity(code)
    evidence = DeploymentRequest.objects.get(code=code).evidence or {}
    plan = evidence["capacity_plan"]
    assert plan["status"] == "done", plan
    return dict(plan["result"]["engine"])


def test_an_sglang_request_gets_an_sglang_plan(flow: Flow, artifacts: dict) -> None:
    assert _planned_engine(flow, artifacts, "sglang")["name"] == "sglang"


def test_a_tensorrt_llm_request_gets_a_trtllm_plan(flow: Flow, artifacts: dict) -> None:
    assert _planned_engine(flow, artifacts, "tensorrt_llm")["name"] == "trtllm"


@pytest.mark.parametrize("engine", sorted(PLANNED_AS))
def test_the_planner_is_asked_for_the_requests_engine(flow: Flow, artifacts: dict, engine: str) -> None:
    code = flow.create(artifacts["apache"], serving_plan={**SERVING, "engine": engine})["code"]
    inputs = planner_inputs(DeploymentRequest.objects.get(code=code))
    assert inputs["engine"] == PLANNED_AS[engine]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    engine=st.sampled_from(SERVING_ENGINES),
    precision=st.sampled_from(sorted(key for key, spec in precisions().items() if spec.engines != ())),
    gpu=st.sampled_from(["h100-80g", "h200", "a100-80g"]),
    kv_dtype=st.sampled_from(["bf16", "fp8"]),
    max_model_len=st.sampled_from([4096, 32768]),
    concurrency=st.integers(min_value=1, max_value=64),
)
def test_for_every_engine_the_capacity_plan_judges_the_requests_engine(
    engine: ServingEngine, precision: str, gpu: str, kv_dtype: str, max_model_len: int, concurrency: int
) -> None:
    """Property (issue 44): whatever the request, its capacity plan is computed with its engine's memory
    profile (or, for an engine with none, its stated stand-in's), and the envelope the gate compares
    names the request's engine."""
    serving: dict[str, Any] = {"engine": engine.name, "precision": precision, "gpu": gpu, "kv_dtype": kv_dtype}
    serving |= {"max_model_len": max_model_len, "concurrency": concurrency}
    artifact = ModelArtifact(name="m", source_repo="org/m", architecture_key="qwen3-30b-a3b")
    deployment = DeploymentRequest(artifact=artifact, serving_plan=serving)
    result = plan(plan_request_from(planner_inputs(deployment))).as_contract()
    assert result["engine"]["name"] == (engine.profile_key or engine.planned_as)
    if engine.profile_key is not None:
        assert serving_engine(result["engine"]["name"]) is engine
    if engine.plan_argv is not None:
        assert engine.name in result["serving"]
        assert engine.name in result["serving_argv"]
    assert approved_envelope({"serving_envelope": serving})["engine"] == engine.name


def test_every_list_of_engines_the_service_offers_is_the_registrys() -> None:
    """The request's, the gate's, the eval API's and the wizard's engines, with their display names."""
    from governance.deployments.api import EvalRequestInputSerializer
    from governance.deployments.serializers import ServingPlanSerializer
    from governance.gate.api import GateServingSerializer
    from governance.web.forms.wizard import WizardForm

    registered = {engine.name: engine.display_name for engine in SERVING_ENGINES}
    assert registered["vllm"] == "vLLM"
    for serializer in (ServingPlanSerializer, GateServingSerializer, EvalRequestInputSerializer):
        field = serializer().fields["engine"]
        assert isinstance(field, ChoiceField)
        assert dict(field.choices) == registered, serializer
    wizard = WizardForm.base_fields["engine"]
    assert isinstance(wizard, forms.ChoiceField)
    assert dict(cast(Any, wizard.choices)) == registered


@settings(max_examples=60, deadline=None)
@given(
    plan_fields=st.fixed_dictionaries(
        {"precision": st.sampled_from(["bf16", "fp8", "w4a16"]), "gpu": st.sampled_from(["h100-80g", "h200"])},
        optional={
            "engine": st.sampled_from([engine.name for engine in SERVING_ENGINES]),
            "kv_dtype": st.sampled_from(["bf16", "fp8"]),
            "gpu_memory_utilization": st.sampled_from([0.8, 0.9, 0.95]),
            "max_model_len": st.sampled_from([4096, 32768]),
            "tp": st.sampled_from([1, 2, 8]),
        },
    ),
    other=st.sampled_from([engine.name for engine in SERVING_ENGINES]),
)
def test_the_gate_compares_with_the_envelope_the_page_and_packet_show(plan_fields: dict, other: str) -> None:
    """Whatever the serving plan leaves out, the gate allows exactly the approved envelope (the one the
    request page and the packet print, with the one set of serving defaults) and denies another engine."""
    evidence = {"serving_envelope": plan_fields, "capacity_plan": {"result": {"parallel": {"tp": 4}}}}
    envelope = approved_envelope(evidence)
    state = cast(GateState, SimpleNamespace(evidence=evidence))
    check = GateCheck(environment="production", artifact_digest="", serving=dict(envelope))
    if envelope["max_model_len"] is None:
        check.serving["max_model_len"] = 1
    reasons = [r.code for r in _serving(state, check, require_engine_version=True)]
    assert reasons == ([] if envelope["max_model_len"] is not None else [ReasonCode.SERVING_MAX_MODEL_LEN])
    moved = GateCheck("production", "", {**check.serving, "engine": other})
    assert (ReasonCode.SERVING_ENGINE in [r.code for r in _serving(state, moved, require_engine_version=True)]) == (
        other != envelope["engine"]
    )


def test_a_request_pins_its_engine_version_and_is_planned_with_that_release(flow: Flow, artifacts: dict) -> None:
    serving = {**SERVING, "engine": "sglang", "engine_version": "0.4.9"}
    code = flow.create(artifacts["apache"], serving_plan=serving)["code"]
    assert planner_inputs(DeploymentRequest.objects.get(code=code))["engine_version"] == "0.4.9"
    response = flow.client(flow.p.requester).post(
        "/api/v1/deployments/",
        {
            "artifact": str(artifacts["apache"].code),
            "product_name": "Acme",
            "facts": DeploymentRequest.objects.get(code=code).facts,
            "serving_plan": {**serving, "engine_version": "0.9"},  # no SGLang 0.9 profile
        },
        format="json",
    )
    assert response.status_code == 400, response.json()
    assert "engine_version" in str(response.json()["extra"]["fields"])
