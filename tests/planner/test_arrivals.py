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

from planner.plan import plan
from tests.planner.cli import planner_cli
from tests.planner.requests import PlanArgs, plan_request

NIM: PlanArgs = {
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
    burst = plan(plan_request(NIM)).throughput
    spread = plan(plan_request(NIM, arrival="spread")).throughput
    assert burst.ttft_ms == pytest.approx(370, rel=0.05)  # the waves stay aligned (the default)
    assert spread.ttft_ms == pytest.approx(105, rel=0.05)  # each prompt arrives on its own
    assert spread.ttft_ms < 278.6 < burst.ttft_ms  # the measurement lies between
    assert spread.tpot_ms == pytest.approx(burst.tpot_ms, rel=1e-9)
    contract = plan(plan_request(NIM, arrival="spread")).as_contract()
    assert contract["throughput_estimate"]["inputs"]["arrival"] == "spread"


def test_an_unknown_arrival_pattern_is_refused_naming_the_field() -> None:
    with pytest.raises(ValueError, match=r"^arrival: "):
        plan(plan_request(NIM, arrival="uniform"))
    done = planner_cli("plan", "--model", "llama-3.1-8b", "--gpu", "h100-80g", "--arrival", "uniform")
    assert done.returncode == 2
    assert "--arrival" in done.stderr


def test_the_cli_takes_the_arrival_pattern() -> None:
    args = ["plan", "--model", "llama-3.1-8b", "--gpu", "h100-80g", "--concurrency", "32", "--format", "json"]
    burst, spread = planner_cli(*args), planner_cli(*args, "--arrival", "spread")
    assert burst.returncode == spread.returncode == 0, spread.stderr
    assert '"arrival": "spread"' in spread.stdout
    assert '"arrival": "burst"' in burst.stdout


LLAMA: PlanArgs = {
    "model": "llama-3.1-8b",
    "precision": "bf16",
    "gpu": "h100-80g",
    "tp": 1,
    "dp": 1,
    "max_model_len": 4096,
}
WORK: PlanArgs = {"input_len": 1024, "output_len": 256, "concurrency": 64}


def test_poisson_arrivals_at_a_trickle_meet_an_idle_engine() -> None:
    """`vllm bench serve --request-rate R` sends a Poisson stream: at a rate far below capacity a request
    finds the engine nearly idle, as a lone client does."""
    trickle = plan(plan_request(LLAMA, WORK, arrival="poisson", request_rate=0.01)).throughput
    alone = plan(plan_request(LLAMA, WORK, {"concurrency": 1})).throughput
    assert trickle.ttft_ms == pytest.approx(alone.ttft_ms, rel=0.05)
    assert trickle.tpot_ms == pytest.approx(alone.tpot_ms, rel=0.05)
    assert trickle.decode_tokens_per_s == pytest.approx(0.01 * 256, rel=1e-6)  # what arrives is served


def test_poisson_arrivals_fill_the_batch_by_littles_law() -> None:
    result = plan(plan_request(LLAMA, WORK, arrival="poisson", request_rate=4.0)).throughput
    latency_s = (result.ttft_ms + 255 * result.tpot_ms) / 1e3
    assert result.batch == pytest.approx(4.0 * latency_s, abs=1.0)  # sequences in flight = rate x latency
    assert result.decode_tokens_per_s == pytest.approx(4.0 * 256, rel=1e-6)
    slower = plan(plan_request(LLAMA, WORK, arrival="poisson", request_rate=1.0)).throughput
    assert slower.ttft_ms < result.ttft_ms
    assert slower.tpot_ms < result.tpot_ms


def test_a_rate_beyond_the_deployment_is_refused_naming_it() -> None:
    with pytest.raises(ValueError, match=r"^request_rate: .* exceeds"):
        plan(plan_request(LLAMA, WORK, arrival="poisson", request_rate=10_000.0))
    with pytest.raises(ValueError, match=r"^request_rate: "):
        plan(plan_request(LLAMA, WORK, arrival="poisson"))  # a Poisson stream needs its rate
    with pytest.raises(ValueError, match=r"^request_rate: "):
        plan(plan_request(LLAMA, WORK, request_rate=2.0))  # a closed loop has none


def test_the_cli_takes_a_request_rate() -> None:
    args = ["plan", "--model", "llama-3.1-8b", "--gpu", "h100-80g", "--concurrency", "64", "--format", "json"]
    done = planner_cli(*args, "--arrival", "poisson", "--request-rate", "4")
    assert done.returncode == 0, done.stderr
    assert '"request_rate": 4.0' in done.stdout
    refused = planner_cli(*args, "--request-rate", "4")
    assert refused.returncode == 2
    assert "--request-rate" in refused.stderr


def test_lengths_drawn_from_a_range_are_planned_as_the_client_draws_them() -> None:
    """InferenceX's client draws each request's input and output length uniformly from [0.8 x len, len]
    (RANDOM_RANGE_RATIO 0.8 in its .github/workflows/benchmark-tmpl.yml; sample_uniform in
    utils/bench_serving/benchmark_serving.py, as sglang.bench_serving's --random-range-ratio does): the
    mean request is 0.9 of the nominal one, and outputs of unequal length finish apart, so the closed
    loop's requests stop coming back in waves. Before, only fixed lengths could be planned."""
    drawn = plan(plan_request(NIM, range_ratio=0.8))
    # The mean of 800..1000 is 900 tokens in and out, arriving one at a time.
    same = plan(plan_request(NIM, {"input_len": 900, "output_len": 900}, arrival="spread")).throughput
    assert drawn.throughput.ttft_ms == pytest.approx(same.ttft_ms, rel=1e-9)
    assert drawn.throughput.tpot_ms == pytest.approx(same.tpot_ms, rel=1e-9)
    assert drawn.throughput.ttft_ms < plan(plan_request(NIM)).throughput.ttft_ms  # no aligned waves
    inputs = drawn.as_contract()["throughput_estimate"]["inputs"]
    assert (inputs["input_len"], inputs["output_len"], inputs["range_ratio"]) == (1000, 1000, 0.8)
    # The plan still holds the longest request: the memory model sizes max_model_len, not the mean.
    assert drawn.chosen.fits


@pytest.mark.parametrize("ratio", [-0.001, -0.5, 1.5])
def test_a_range_ratio_outside_0_1_is_refused_naming_the_field(ratio: float) -> None:
    with pytest.raises(ValueError, match=r"^range_ratio: "):
        plan(plan_request(NIM, range_ratio=ratio))
    done = planner_cli("plan", "--model", "llama-3.1-8b", "--gpu", "h100-80g", "--range-ratio", str(ratio))
    assert done.returncode == 2
    assert "--range-ratio" in done.stderr


def test_the_cli_takes_the_range_ratio() -> None:
    args = ["plan", "--model", "llama-3.1-8b", "--gpu", "h100-80g", "--concurrency", "32", "--format", "json"]
    done = planner_cli(*args, "--input-len", "1024", "--output-len", "1024", "--range-ratio", "0.8")
    assert done.returncode == 0, done.stderr
    assert '"range_ratio": 0.8' in done.stdout


def test_a_cached_prefix_with_drawn_lengths_prefills_the_drawn_prompts_new_tokens() -> None:
    """Prompts drawn from [1, 4096] (sglang.bench_serving's default range ratio, 0) past a 3072-token cached
    prefix: a quarter of them run past it, and the mean new tokens are about 129, not the 1 token the mean
    prompt (2048) would leave (a reviewer's find: TTFT fell from 137 to 18 ms)."""
    from planner.perf import mean_new_tokens

    assert mean_new_tokens(4096, 0.0, 3072) == pytest.approx((1024 * 1025 / 2 + 3072) / 4096)
    assert mean_new_tokens(4096, 1.0, 3072) == 1024  # fixed lengths: the prompt past the prefix
    assert mean_new_tokens(4096, 1.0, 5000) == 1  # the last token is recomputed
    assert mean_new_tokens(1000, 0.8, 0) == 900  # no prefix: the mean prompt
    drawn = plan(plan_request(NIM, input_len=4096, cached_prefix_len=3072, range_ratio=0.0, max_model_len=6000))
    assert drawn.as_contract()["throughput_estimate"]["inputs"]["cached_prefix_len"] == 2048 - 129
