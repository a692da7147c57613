"""A request's capacity plan is computed for the request's own engine (issue 44): an SGLang or
TensorRT-LLM request is judged by that engine's memory rules, not vLLM's, and the gate, which
compares the engine, checks what the plan judged."""

from __future__ import annotations

from typing import Any

import pytest

from governance.deployments.models import DeploymentRequest
from governance.deployments.services import planner_inputs
from tests.deployments.conftest import SERVING, Flow

# The serving engine a request names -> the memory profile its capacity plan must use.
PLANNED_AS = {"vllm": "vllm", "sglang": "sglang", "tensorrt_llm": "trtllm"}


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
