"""Arrival patterns as a workload input (issue 31). A closed loop of fixed-length requests sent all at
once (`vllm bench serve` / `sglang.bench_serving` with --max-concurrency and an infinite request rate,
their defaults) keeps its waves aligned: the prompts one prefill step holds finish together and come
back together. Clients that spread their requests arrive one at a time instead.

The case is NVIDIA NIM's Llama-3.3-70B FP8 page (TensorRT-LLM on 2 x H100, 1000/1000 tokens at
concurrency 50: https://docs.nvidia.com/nim/benchmarking/llm/1.0.0/performance), whose measured TTFT
(278.6 ms) lies between the two patterns; the corpus lists the planner's two figures as its cause.
"""

from __future__ import annotations

import pytest

from planner.plan import PlanRequest, plan
from tests.planner.cli import planner_cli

NIM = {
    "model": "llama-3.1-70b",  # Llama-3.3-70B has its architecture
    "precision": "fp8",
    "gpu": "h100-80g",
    "tp": 2,
    "pp": 1,
    "ep": 1,
    "dp": 1,
    "kv_dtype": "fp8",
    "engine": "trtllm",
    "max_model_len": 2000,
    "concurrency": 50,
    "input_len": 1000,
    "output_len": 1000,
}


def test_spread_arrivals_wait_for_no_wave() -> None:
    burst = plan(PlanRequest(**NIM)).throughput
    spread = plan(PlanRequest(**NIM, arrival="spread")).throughput
    assert burst.ttft_ms == pytest.approx(370, rel=0.05)  # the waves stay aligned (the default)
    assert spread.ttft_ms == pytest.approx(105, rel=0.05)  # each prompt arrives on its own
    assert spread.ttft_ms < 278.6 < burst.ttft_ms  # the measurement lies between
    assert spread.tpot_ms == pytest.approx(burst.tpot_ms, rel=1e-9)
    contract = plan(PlanRequest(**NIM, arrival="spread")).as_contract()
    assert contract["throughput_estimate"]["inputs"]["arrival"] == "spread"


def test_an_unknown_arrival_pattern_is_refused_naming_the_field() -> None:
    with pytest.raises(ValueError, match=r"^arrival: "):
        plan(PlanRequest(**NIM, arrival="uniform"))
    done = planner_cli("plan", "--model", "llama-3.1-8b", "--gpu", "h100-80g", "--arrival", "uniform")
    assert done.returncode == 2
    assert "--arrival" in done.stderr


def test_the_cli_takes_the_arrival_pattern() -> None:
    args = ["plan", "--model", "llama-3.1-8b", "--gpu", "h100-80g", "--concurrency", "32", "--format", "json"]
    burst, spread = planner_cli(*args), planner_cli(*args, "--arrival", "spread")
    assert burst.returncode == spread.returncode == 0, spread.stderr
    assert '"arrival": "spread"' in spread.stdout
    assert '"arrival": "burst"' in burst.stdout
