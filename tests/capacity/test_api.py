import json
import math
import time
from pathlib import Path

import pytest
from django.utils import timezone

from governance.audit.actions import AuditAction
from governance.audit.models import AuditEvent
from governance.capacity.models import CapacityPlan, CapacityPlanStatus
from governance.capacity.services import capacity_plan_compute
from governance.deployments.readiness import ReadinessState, readiness
from planner.plan import PlanRequest, plan
from tests.conftest import Personas
from tests.planner.requests import PlanArgs, plan_request

CONFIGS = Path(__file__).resolve().parents[1] / "planner" / "configs"


def test_plan_endpoint_returns_the_library_contract(personas: Personas) -> None:
    body: PlanArgs = {"model": "deepseek-v3", "precision": "fp8", "gpu": "h200", "max_model_len": 131072}
    response = personas.client(personas.engineer).post("/api/v1/planner/plan", body, format="json")
    assert response.status_code == 200, response.json()
    expected = plan(PlanRequest(model="deepseek-v3", precision="fp8", gpu="h200", max_model_len=131072)).as_contract()
    assert response.json() == json.loads(json.dumps(expected))


def test_plan_endpoint_accepts_an_inline_config(personas: Personas) -> None:
    config = json.loads((CONFIGS / "qwen3-30b-a3b.json").read_text())
    body: PlanArgs = {"model": config, "precision": "w4a8", "gpu": "l40s", "kv_dtype": "fp8"}
    response = personas.client(personas.requester).post("/api/v1/planner/plan", body, format="json")
    assert response.status_code == 200, response.json()
    assert response.json()["params"]["total"] == pytest.approx(30.5e9, rel=0.01)


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"model": "deepseek-v3", "precision": "fp9", "gpu": "h200"}, "precision"),
        ({"model": "deepseek-v3", "precision": "fp8", "gpu": "h200", "tp": 3}, "tp"),
        ({"model": "deepseek-v3", "precision": "fp8", "gpu": "h200", "tp": 16}, "tp"),
        ({"model": "deepseek-v3", "precision": "fp8", "gpu": "h200", "bananas": 1}, "bananas"),
        ({"model": "nope", "precision": "fp8", "gpu": "h200"}, "model"),
        ({"model": 5, "precision": "fp8", "gpu": "h200"}, "model"),
        ({"model": {"architectures": ["BertModel"]}, "precision": "fp8", "gpu": "h200"}, "config.architectures"),
        (
            {"model": "deepseek-v3", "precision": "fp8", "gpu": "h200", "gpu_memory_utilization": 2},
            "gpu_memory_utilization",
        ),
        ({"model": "deepseek-v3", "precision": "fp8", "gpu": "h200", "group_size": 64}, "group_size"),
        (
            {"model": "deepseek-v3", "precision": "fp8", "gpu": "h200", "input_len": 2048, "cached_prefix_len": 2048},
            "cached_prefix_len",
        ),
        (
            {"model": "deepseek-v3", "precision": "fp8", "gpu": "h200", "input_len": 2048, "cached_prefix_len": -1},
            "cached_prefix_len",
        ),
        ({"model": "deepseek-v3", "precision": "fp8", "gpu": "h200", "cached_prefix_len": 512}, "cached_prefix_len"),
        (
            {
                "model": "deepseek-v3",
                "precision": "fp8",
                "gpu": "h200",
                "engine": "sglang",
                "scheduler_recv_interval": 0,
            },
            "scheduler_recv_interval",
        ),
        (
            {"model": "deepseek-v3", "precision": "fp8", "gpu": "h200", "scheduler_recv_interval": "ten"},
            "scheduler_recv_interval",
        ),
        (  # an SGLang option: a vLLM plan does not take it
            {"model": "deepseek-v3", "precision": "fp8", "gpu": "h200", "scheduler_recv_interval": 10},
            "scheduler_recv_interval",
        ),
    ],
)
def test_bad_input_is_400_naming_the_field(personas: Personas, body: dict, field: str) -> None:
    response = personas.client(personas.engineer).post("/api/v1/planner/plan", body, format="json")
    assert response.status_code == 400
    assert field in response.json()["extra"]["fields"], response.json()


def test_2_bit_weights_are_a_known_precision_no_engine_serves(personas: Personas) -> None:
    body = {"model": "llama-3.1-8b", "precision": "w2a16", "gpu": "h200", "engine": "sglang"}
    response = personas.client(personas.engineer).post("/api/v1/planner/plan", body, format="json")
    assert response.status_code == 400
    [message] = response.json()["extra"]["fields"]["precision"]
    assert message.startswith("w2a16 cannot be served by sglang"), message
    assert "2-bit weight kernel" in message


@pytest.mark.parametrize("endpoint", ["/api/v1/planner/plan", "/api/v1/capacity/plans"])
def test_plan_apis_take_a_cached_prefix(personas: Personas, endpoint: str) -> None:
    """cached_prefix_len: prompt tokens already in the engine's prefix cache (below input_len)."""
    body: PlanArgs = {"model": "qwen3-30b-a3b", "precision": "fp8", "gpu": "h200", "tp": 1, "input_len": 4096}
    response = personas.client(personas.engineer).post(endpoint, {**body, "cached_prefix_len": 3072}, format="json")
    assert response.status_code in (200, 202), response.json()
    if endpoint == "/api/v1/planner/plan":
        request = PlanRequest(
            model="qwen3-30b-a3b", precision="fp8", gpu="h200", tp=1, input_len=4096, cached_prefix_len=3072
        )
        assert response.json() == json.loads(json.dumps(plan(request).as_contract()))
        assert response.json()["throughput_estimate"]["inputs"]["cached_prefix_len"] == 3072
    else:
        assert CapacityPlan.objects.get(code=response.json()["code"]).inputs["cached_prefix_len"] == 3072


@pytest.mark.parametrize("endpoint", ["/api/v1/planner/plan", "/api/v1/capacity/plans"])
def test_plan_apis_take_a_scheduler_recv_interval(personas: Personas, endpoint: str) -> None:
    """scheduler_recv_interval: SGLang's --scheduler-recv-interval, as the CLI takes it."""
    body: PlanArgs = {"model": "qwen3-30b-a3b", "precision": "fp8", "gpu": "h200", "tp": 1, "engine": "sglang"}
    body |= {"concurrency": 8, "input_len": 1024, "output_len": 1024, "scheduler_recv_interval": 10}
    response = personas.client(personas.engineer).post(endpoint, body, format="json")
    assert response.status_code in (200, 202), response.json()
    if endpoint == "/api/v1/planner/plan":
        request = plan_request(body)
        assert response.json() == json.loads(json.dumps(plan(request).as_contract()))
        assert response.json()["throughput_estimate"]["inputs"]["scheduler_recv_interval"] == 10
        every_step = plan(plan_request(body, {"scheduler_recv_interval": 1})).as_contract()
        assert response.json()["throughput_estimate"]["ttft_ms"] > every_step["throughput_estimate"]["ttft_ms"]
    else:
        assert CapacityPlan.objects.get(code=response.json()["code"]).inputs["scheduler_recv_interval"] == 10


def test_outsider_is_refused(personas: Personas) -> None:
    body: PlanArgs = {"model": "deepseek-v3", "precision": "fp8", "gpu": "h200"}
    assert personas.client(personas.outsider).post("/api/v1/planner/plan", body, format="json").status_code == 403


def test_compute_is_idempotent_and_audited(personas: Personas) -> None:
    stored = CapacityPlan.objects.create(
        inputs={"model": "kimi-k2", "precision": "bf16", "gpu": "a100-80g", "tp": 8, "pp": 1, "dp": 1, "ep": 8}
    )
    done = capacity_plan_compute(plan_id=stored.pk)
    assert done.status == CapacityPlanStatus.DONE
    assert done.fits is False
    evidence = {"capacity_plan": {"status": done.status, "fits": done.fits, "result": done.result}}
    reasons = readiness(ReadinessState(evidence=evidence, evidence_digest="d", signatures={}), timezone.now())
    assert [r.code for r in reasons if r.code.startswith("capacity.")] == ["capacity.does_not_fit"]
    assert capacity_plan_compute(plan_id=stored.pk).computed_at == done.computed_at  # not recomputed
    assert AuditEvent.objects.filter(action=AuditAction.CAPACITY_PLAN_COMPUTED).count() == 1


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_stored_plan_is_computed_by_a_real_worker(celery_worker, settings) -> None:
    from governance.celery import app

    settings.CELERY_HEAVY_QUEUE = celery_worker.queue  # the heavy route, to this test's worker too
    previous_queue = app.conf.task_default_queue
    app.conf.task_default_queue = celery_worker.queue  # route .delay() to this test's worker
    try:
        _run_stored_plan_through_worker()
    finally:
        app.conf.task_default_queue = previous_queue


def _run_stored_plan_through_worker() -> None:
    from django.contrib.auth.models import Group, User
    from rest_framework.test import APIClient

    user = User.objects.create_user("eng-worker")
    user.groups.add(Group.objects.get_or_create(name="engineering_reviewer")[0])
    client = APIClient()
    client.force_authenticate(user)
    body: PlanArgs = {"model": "qwen3-235b-a22b", "precision": "fp8", "gpu": "h200", "max_model_len": 32768}
    response = client.post("/api/v1/capacity/plans", body, format="json")
    assert response.status_code == 202
    code = response.json()["code"]
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        detail = client.get(f"/api/v1/capacity/plans/{code}").json()
        if detail["status"] != "pending":
            break
        time.sleep(0.3)
    assert detail["status"] == "done", detail
    assert detail["fits"] is True
    expected = plan(PlanRequest(model="qwen3-235b-a22b", precision="fp8", gpu="h200", max_model_len=32768))
    assert detail["result"]["parallel"] == expected.as_contract()["parallel"]
    assert AuditEvent.objects.filter(action=AuditAction.CAPACITY_PLAN_COMPUTED).count() == 1


@pytest.mark.parametrize("endpoint", ["/api/v1/planner/plan", "/api/v1/capacity/plans"])
def test_an_unknown_engine_release_is_400_naming_the_field(personas: Personas, endpoint: str) -> None:
    """Refused when asked, not in the worker: the planner has no memory profile for vLLM 9.0 (newer than every
    profile; an older release is planned with the oldest, issue 47: test_an_old_engine_release_is_planned_wide)."""
    body: PlanArgs = {"model": "qwen3-30b-a3b", "precision": "fp8", "gpu": "h200", "engine_version": "9.0.0"}
    response = personas.client(personas.engineer).post(endpoint, body, format="json")
    assert response.status_code == 400, response.json()
    assert "engine_version" in response.json()["extra"]["fields"], response.json()
    assert not CapacityPlan.objects.exists()


def test_an_old_engine_release_is_planned_wide(personas: Personas) -> None:
    """vLLM 0.2.4, older than every profile: an answer with the oldest profile, a note and wide intervals."""
    body: PlanArgs = {"model": "llama-3.1-8b", "precision": "bf16", "gpu": "h100-80g", "engine_version": "0.2.4"}
    response = personas.client(personas.engineer).post("/api/v1/planner/plan", body, format="json")
    assert response.status_code == 200, response.json()
    result = response.json()
    assert result["engine"]["version"] == "0.2.4"
    assert any("older than every memory profile" in note for note in result["notes"])
    assert "older than every profile" in result["intervals"]["throughput.tpot_ms"]["basis"]


@pytest.mark.parametrize("endpoint", ["/api/v1/planner/plan", "/api/v1/capacity/plans"])
@pytest.mark.parametrize("version", ["latest", "vllm 0.11.0", "0.11.0 ; rm -rf /", "0.11.0\nINFO forged"])
def test_an_engine_version_that_is_not_a_release_is_400_saying_what_one_is(
    personas: Personas, endpoint: str, version: str
) -> None:
    """The pattern matched a release's start only: "0.11.0 ; rm -rf /" was planned, and echoed in the
    plan's notes and `engine.version`; "latest" got "does not match the required pattern"."""
    body: PlanArgs = {"model": "llama-3.1-8b", "precision": "bf16", "gpu": "h100-80g", "engine_version": version}
    response = personas.client(personas.engineer).post(endpoint, body, format="json")
    assert response.status_code == 400, response.json()
    [message] = response.json()["extra"]["fields"]["engine_version"]
    assert "0.11.0" in message, message  # what a release looks like
    assert not CapacityPlan.objects.exists()


@pytest.mark.parametrize("version", ["v0.8.0rc1", "0.6.3.post1", "0.11.0+cu128"])
def test_a_release_with_a_pre_post_or_local_part_is_planned(personas: Personas, version: str) -> None:
    body: PlanArgs = {"model": "llama-3.1-8b", "precision": "bf16", "gpu": "h100-80g", "engine_version": version}
    response = personas.client(personas.engineer).post("/api/v1/planner/plan", body, format="json")
    assert response.status_code == 200, response.json()
    assert response.json()["engine"]["version"] == version


@pytest.mark.parametrize("endpoint", ["/api/v1/planner/plan", "/api/v1/capacity/plans"])
def test_plan_apis_take_the_arrival_pattern(personas: Personas, endpoint: str) -> None:
    body: PlanArgs = {
        "model": "llama-3.1-8b",
        "precision": "bf16",
        "gpu": "h100-80g",
        "concurrency": 32,
        "arrival": "spread",
    }
    response = personas.client(personas.engineer).post(endpoint, body, format="json")
    assert response.status_code in (200, 202), response.json()
    if endpoint == "/api/v1/planner/plan":
        assert response.json() == json.loads(json.dumps(plan(plan_request(body)).as_contract()))
        assert response.json()["throughput_estimate"]["inputs"]["arrival"] == "spread"
    else:
        assert CapacityPlan.objects.get(code=response.json()["code"]).inputs["arrival"] == "spread"
    bad = personas.client(personas.engineer).post(endpoint, {**body, "arrival": "uniform"}, format="json")
    assert bad.status_code == 400
    assert "arrival" in bad.json()["extra"]["fields"]


@pytest.mark.parametrize("endpoint", ["/api/v1/planner/plan", "/api/v1/capacity/plans"])
def test_plan_apis_take_a_poisson_rate_and_refuse_it_without_poisson(personas: Personas, endpoint: str) -> None:
    body: PlanArgs = {"model": "llama-3.1-8b", "precision": "bf16", "gpu": "h100-80g", "concurrency": 64}
    client = personas.client(personas.engineer)
    good = client.post(endpoint, {**body, "arrival": "poisson", "request_rate": 4.0}, format="json")
    assert good.status_code in (200, 202), good.json()
    if endpoint == "/api/v1/planner/plan":
        assert good.json()["throughput_estimate"]["inputs"]["request_rate"] == 4.0
    for bad_body in ({**body, "request_rate": 4.0}, {**body, "arrival": "poisson"}):
        bad = client.post(endpoint, bad_body, format="json")
        assert bad.status_code == 400, bad.json()
        assert "request_rate" in bad.json()["extra"]["fields"]


@pytest.mark.parametrize("endpoint", ["/api/v1/planner/plan", "/api/v1/capacity/plans"])
def test_plan_apis_take_a_length_spread_and_refuse_one_outside_0_1(personas: Personas, endpoint: str) -> None:
    """Lengths drawn from [range_ratio x len, len] as the benchmark client draws them (issue 31); 0 is
    sglang.bench_serving's own default."""
    body: PlanArgs = {"model": "llama-3.1-8b", "precision": "bf16", "gpu": "h100-80g", "concurrency": 32}
    body |= {"input_len": 1024, "output_len": 1024, "range_ratio": 0.8}
    client = personas.client(personas.engineer)
    good = client.post(endpoint, body, format="json")
    assert good.status_code in (200, 202), good.json()
    if endpoint == "/api/v1/planner/plan":
        assert good.json() == json.loads(json.dumps(plan(plan_request(body)).as_contract()))
        assert good.json()["throughput_estimate"]["inputs"]["range_ratio"] == 0.8
        # 0 is planned as 0 (not read as "unset", which would mean fixed lengths)
        zero = client.post(endpoint, {**body, "range_ratio": 0}, format="json")
        assert zero.status_code == 200, zero.json()
        assert zero.json()["throughput_estimate"]["inputs"]["range_ratio"] == 0
        negative_zero = client.post(endpoint, {**body, "range_ratio": -0.0}, format="json").json()
        assert math.copysign(1, negative_zero["throughput_estimate"]["inputs"]["range_ratio"]) == 1  # not -0.0
    for ratio in (-0.1, 1.5, False, True, "0.5"):  # a JSON boolean or string is not a number (no coercion)
        bad = client.post(endpoint, {**body, "range_ratio": ratio}, format="json")
        assert bad.status_code == 400, bad.json()
        assert "range_ratio" in bad.json()["extra"]["fields"]
