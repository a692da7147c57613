"""Startup logs as an attacker sends them: a log's figures are text the service converts (a 400 naming
`text` when they are not numbers, never a 500), and a cluster's log list, which any reader gets, does
not tell a requester of another team which request's deployment printed it."""

from __future__ import annotations

import time
from typing import Any

import pytest

from governance.calibration.models import StartupLog
from governance.evaluations.models import Cluster, ExecutorKind
from planner.checklog import parse_log
from tests.calibration.test_startup_logs import vllm_log
from tests.deployments.conftest import Flow

BODY = {"gpu": "h100-80g", "model": "llama-3.1-8b", "precision": "bf16"}


@pytest.fixture
def gpu_a(db: None) -> Cluster:
    return Cluster.objects.create(name="gpu-a", executor=ExecutorKind.LOCAL, remote_root="/tmp/gpu-a")


@pytest.mark.parametrize(
    ("find", "replace"),
    [
        ("Available KV cache memory: 60.00 GiB", "Available KV cache memory: 1.2.3 GiB"),
        ("Available KV cache memory: 60.00 GiB", "Available KV cache memory: . GiB"),
        ("Model loading took 14.9900 GiB", "Model loading took " + "9" * 400 + " GiB"),  # inf
        ("gpu_memory_utilization=0.9", "gpu_memory_utilization=0.9.9"),
        ("max_seq_len=8192", "max_seq_len=" + "9" * 5000),  # beyond int()'s 4,300 digits
        ("tensor_parallel_size=1", "tensor_parallel_size=0"),
    ],
)
def test_a_log_with_figures_that_are_not_numbers_is_a_400(gpu_a: Cluster, flow: Flow, find: str, replace: str) -> None:
    text = vllm_log(60.0)
    assert find in text
    answer = flow.client(flow.p.engineer).post(
        f"/api/v1/clusters/{gpu_a.code}/startup-logs", {**BODY, "text": text.replace(find, replace)}, format="json"
    )
    assert answer.status_code == 400, answer.content[:300]
    assert StartupLog.objects.count() == 0


@pytest.mark.parametrize(
    ("find", "replace"),
    [
        # beyond a bigint: the row was refused by PostgreSQL (a 500)
        ("Available KV cache memory: 60.00 GiB", "Available KV cache memory: 99999999999.00 GiB"),
        ("Available KV cache memory: 60.00 GiB", "Available KV cache memory: -99999999999.00 GiB"),
        # more than the GPU holds: stored, and three of them moved the cluster's plans (a weights interval
        # of 10^20 bytes, a reserve of nothing)
        ("Available KV cache memory: 60.00 GiB", "Available KV cache memory: 500.00 GiB"),
        ("Model loading took 14.9900 GiB", "Model loading took 99999999999.0 GiB"),
    ],
)
def test_a_log_with_figures_no_gpu_of_its_kind_holds_is_a_400_naming_text(
    gpu_a: Cluster, flow: Flow, find: str, replace: str
) -> None:
    text = vllm_log(60.0)
    assert find in text
    answer = flow.client(flow.p.engineer).post(
        f"/api/v1/clusters/{gpu_a.code}/startup-logs", {**BODY, "text": text.replace(find, replace)}, format="json"
    )
    assert answer.status_code == 400, answer.content[:300]
    [message] = answer.json()["extra"]["fields"]["text"]
    assert "h100-80g" in message, message
    assert "GiB" in message, message
    assert StartupLog.objects.count() == 0


def test_another_team_s_requester_does_not_learn_which_request_printed_a_log(
    gpu_a: Cluster, flow: Flow, artifacts: dict[str, Any]
) -> None:
    code = flow.create(artifacts["apache"])["code"]
    assert flow.post(flow.p.requester, code, "submit").status_code == 200  # reviewers see it from now
    answer = flow.client(flow.p.engineer).post(
        f"/api/v1/clusters/{gpu_a.code}/startup-logs",
        {**BODY, "text": vllm_log(60.0), "deployment": code},
        format="json",
    )
    assert answer.status_code == 201, answer.json()
    path = f"/api/v1/clusters/{gpu_a.code}/startup-logs"
    [theirs] = flow.client(flow.p.other_requester).get(path).json()
    assert theirs["deployment"] is None
    assert code not in str(theirs)
    [own] = flow.client(flow.p.requester).get(path).json()
    assert own["deployment"] == code
    [reviewer] = flow.client(flow.p.legal).get(path).json()
    assert reviewer["deployment"] == code


def test_a_log_of_one_phrase_repeated_is_read_in_linear_time() -> None:
    """SGLang's "Load weight end. ... mem usage=" was matched with ".*?" from every occurrence to the
    end of the line: 120,000 characters took ~20 s, the 2,000,000 the API takes, hours of a worker."""
    text = "Load weight end." * 7_500
    started = time.perf_counter()
    assert "model_loading" not in parse_log(text).figures
    assert time.perf_counter() - started < 3
    sglang = "Load weight end. type=LlamaForCausalLM, dtype=torch.bfloat16, avail mem=63.74 GB, mem usage=14.99 GB."
    assert parse_log(sglang).figures["model_loading"] == 14.99 * (1 << 30)


def test_a_log_naming_no_request_is_a_400_naming_deployment(gpu_a: Cluster, flow: Flow) -> None:
    """A mistyped `deployment` was stored as the evidence of no request: nothing flagged, nothing said."""
    answer = flow.client(flow.p.engineer).post(
        f"/api/v1/clusters/{gpu_a.code}/startup-logs",
        {**BODY, "text": vllm_log(60.0), "deployment": "00000000-0000-4000-8000-000000000000"},
        format="json",
    )
    assert answer.status_code == 400, answer.content[:300]
    [message] = answer.json()["extra"]["fields"]["deployment"]
    assert "no such deployment request" in message, message
    assert StartupLog.objects.count() == 0


def test_the_log_s_model_path_is_not_kept_nor_shown_to_any_reader(gpu_a: Cluster, flow: Flow) -> None:
    """The text is not kept because it names hosts and paths, but the path the engine loaded the model
    from was kept in log_settings, and every reader of the cluster (another team's requester too) got it."""
    path = "/mnt/team-b/checkpoints/secret-finetune-v2"
    text = vllm_log(60.0).replace("model='meta-llama/Llama-3.1-8B-Instruct'", f"model='{path}'")
    assert path in text
    answer = flow.client(flow.p.engineer).post(
        f"/api/v1/clusters/{gpu_a.code}/startup-logs", {**BODY, "text": text}, format="json"
    )
    assert answer.status_code == 201, answer.json()
    assert path not in str(answer.json())
    [listed] = flow.client(flow.p.other_requester).get(f"/api/v1/clusters/{gpu_a.code}/startup-logs").json()
    assert path not in str(listed)
    assert listed["log_settings"]["max_model_len"] == 8192  # the settings the plan was made with stay
    assert path not in str(StartupLog.objects.get().log_settings)
