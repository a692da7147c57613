"""SGLang's eager prefill (issue 31). Before 0.5.10 SGLang graphs its decode steps only: a prefill step
launches every kernel of the forward from Python, so it takes that host time however few tokens it
holds (sglang pull 12160: an 82.6 ms forward for a 1-token DeepSeek-V3 prefill, 23.1 ms graphed).

The case is the SGLang Cookbook's Qwen3 page (a source the corpus did not use before this test):
Qwen3-235B-A22B on 8 x B200, SGLang 0.5.6, `--tp 8`, one client, 1000/1000-token random prompts drawn
with sglang.bench_serving's default range ratio 0: median TTFT 92.18 ms, where the planner without
the eager prefill gave 23.5 ms (-75%).
https://github.com/sgl-project/sgl-cookbook/blob/7b5bd9c05e3d86da5161ac2be9b91c19a34bf49d/docs/autoregressive/Qwen/Qwen3.md
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from planner import corpus, perf
from planner.efficiency import efficiency_catalog, engine_settings, substituted
from planner.memory import Layout
from planner.plan import plan
from planner.specs import model
from tests.planner.requests import PlanArgs, plan_request

COOKBOOK: PlanArgs = {
    "model": "qwen3-235b-a22b",
    "precision": "bf16",
    "gpu": "b200",
    "tp": 8,
    "pp": 1,
    "ep": 1,
    "dp": 1,
    "engine": "sglang",
    "engine_version": "0.5.6",
    "max_model_len": 2000,
    "concurrency": 1,
    "input_len": 1000,
    "output_len": 1000,
    "range_ratio": 0.0,
}
MEASURED_TTFT_MS = 92.18


def _case(ident: str) -> dict[str, Any]:
    return next(case for case in corpus.cases() if case["id"] == ident)


def test_a_prefill_step_takes_the_forwards_host_time_on_sglang_before_0_5_10() -> None:
    eager = plan(plan_request(COOKBOOK)).throughput
    kernels = perf.forward_kernels(model("qwen3-235b-a22b"), plan(plan_request(COOKBOOK)).params, eager_layout())
    # BF16 and GQA: an eager prefill launches the decode step's kernels, nothing more
    assert kernels == 1598
    per_kernel = engine_settings("sglang").eager_prefill_kernel_us
    assert per_kernel > 0
    assert eager.eager_prefill_ms == pytest.approx(kernels * per_kernel / 1e3)
    assert eager.ttft_ms >= eager.eager_prefill_ms
    assert eager.ttft_ms == pytest.approx(MEASURED_TTFT_MS, rel=0.15)
    # 0.5.10 graphs prefill by default (piecewise CUDA graphs): on the H200 the floor goes, and so does the
    # note. On the B200 its server_args keep them off for a Qwen3 MoE (the FlashInfer TRT-LLM MoE backend it
    # picks on SM100), as on ROCm and with DP attention.
    hopper = plan_request(COOKBOOK, gpu="h200")
    before = plan(hopper).throughput
    graphed = plan(plan_request(COOKBOOK, gpu="h200", engine_version="0.5.10"))
    assert before.eager_prefill_ms > 0
    assert graphed.throughput.eager_prefill_ms == 0
    assert graphed.throughput.ttft_ms < before.ttft_ms / 2
    assert not any("prefill steps eagerly" in note for note in graphed.notes)
    assert any("prefill steps eagerly" in note for note in plan(plan_request(COOKBOOK)).notes)
    assert plan(plan_request(COOKBOOK, engine_version="0.5.10")).throughput.eager_prefill_ms > 0  # B200, MoE
    rocm = plan(plan_request(COOKBOOK, gpu="mi300x", engine_version="0.5.10"))
    assert rocm.throughput.eager_prefill_ms > 0
    dense = {"model": "qwen3-32b", "gpu": "h200", "tp": 1, "engine_version": "0.5.10", "input_len": 128}
    assert plan(plan_request(COOKBOOK, **dense)).throughput.eager_prefill_ms == 0  # type: ignore[arg-type]
    dp_attention = plan(plan_request(COOKBOOK, **{**dense, "dp": 2, "concurrency": 2}))  # type: ignore[arg-type]
    assert dp_attention.throughput.eager_prefill_ms > 0
    assert (
        plan(
            plan_request(COOKBOOK, gpu="b200", model="qwen3-32b", tp=1, engine_version="0.5.10")
        ).throughput.eager_prefill_ms
        == 0
    )
    # vLLM compiles and graphs its prefill steps: no floor there.
    vllm = plan(plan_request(COOKBOOK, engine="vllm", engine_version=None)).throughput
    assert vllm.eager_prefill_ms == 0
    assert "eager_prefill_ms" in plan(plan_request(COOKBOOK)).as_contract()["throughput_estimate"]["inputs"]


def eager_layout() -> Layout:
    return plan(plan_request(COOKBOOK)).chosen.layout


def test_the_cookbook_case_misses_by_three_quarters_without_it() -> None:
    case = _case("qwen3-235b-a22b-bf16-b200x8-sglang-i1000-o1000-c1")
    assert abs(corpus.run_case(case).errors["ttft_ms"]) <= 0.15
    catalog = copy.deepcopy(efficiency_catalog())
    del catalog["engines"]["sglang"]["eager_prefill_kernel_us"]
    with substituted(catalog):
        assert corpus.run_case(case).errors["ttft_ms"] < -0.6


def test_the_release_gate_reads_the_version_as_numbers() -> None:
    assert engine_settings("sglang", release=(0, 5, 9)).eager_prefill_kernel_us > 0
    assert engine_settings("sglang", release=(0, 5, 10)).eager_prefill_kernel_us == 0
    assert engine_settings("sglang", release=(0, 6, 0)).eager_prefill_kernel_us == 0
    assert engine_settings("sglang").eager_prefill_kernel_us > 0  # the default release, 0.5
    assert engine_settings("vllm", release=(0, 5, 0)).eager_prefill_kernel_us == 0


def test_host_bound_prefill_steps_take_the_waiting_prompts_together() -> None:
    # One client never waits; the wait is at most half a step however many clients there are.
    assert perf._batched_wait_s(1, 0.1, 1.0) == 0
    assert perf._batched_wait_s(4, 0.1, 1.0) == pytest.approx(3 / 1.1 * 0.1 * 0.1 / 2)
    assert perf._batched_wait_s(10_000, 0.1, 1.0) == pytest.approx(0.05)
    # Each prompt queued behind each other prompt's own step instead (the fixed-service loop) would
    # wait far longer at 100 clients.
    assert perf._closed_loop_wait_s(100, 0.1, 5.0) > 10 * perf._batched_wait_s(100, 0.1, 5.0)
    wide = plan(plan_request(COOKBOOK, concurrency=100, max_model_len=2000)).throughput
    assert wide.ttft_ms < 2 * plan(plan_request(COOKBOOK)).throughput.ttft_ms


def test_sglang_bench_servings_default_range_ratio_0_is_planned() -> None:
    # Prompts from [1, len], outputs from [0, len] (numpy's randint as the client calls it).
    assert perf.mean_length(1000, 0.0, least=1) == 500.5
    assert perf.mean_length(1000, 0.0) == 500
    assert perf.mean_length(1000, 0.8) == 900
    drawn = plan(plan_request(COOKBOOK)).as_contract()["throughput_estimate"]["inputs"]
    assert drawn["range_ratio"] == 0.0


def test_a_median_is_compared_with_the_steady_state_not_the_first_wave() -> None:
    """A finite run's first wave (concurrency / num_prompts of its requests) moves its mean, not its median:
    the corpus plans median cases without it."""
    case = _case("qwen3-235b-a22b-bf16-b200x8-sglang-i8000-o1000-c64")
    assert case["statistic"] == "median"
    assert case["num_prompts"]
    steady = corpus.run_case(case).planned["ttft_ms"]
    with_wave = corpus.run_case({**case, "statistic": "mean"}).planned["ttft_ms"]
    assert with_wave > 1.5 * steady


def test_an_eager_forward_quantizes_each_gemms_input_in_a_kernel_of_its_own() -> None:
    """DeepSeek-R1 FP8 (block-scaled): SGLang quantizes each GEMM's activations (per_token_group_quant_fp8)
    before the GEMM, and MLA prefills with kv_b_proj as a GEMM of its own. The cookbook's batch-1 DeepSeek
    rows (SGLang 0.5.6.post1, 8 x B200: median TTFT 126-155 ms) were 26-40% fast without these kernels."""
    request = plan_request(COOKBOOK, model="deepseek-v3", precision="fp8")
    result = plan(request)
    spec, params, layout = model("deepseek-v3"), result.params, result.chosen.layout
    base = perf.forward_kernels(spec, params, layout)
    fp8 = perf.eager_prefill_kernels(spec, params, layout, result.precision, frozenset())
    # 58 MoE layers: q_a, q_b, kv_a, kv_b, o, two shared-expert and two grouped expert GEMMs quantize
    # their inputs, plus kv_b's own GEMM (10); 3 dense layers: 5 + 2 + 1 (8)
    assert fp8 - base == 58 * 10 + 3 * 8
    bf16 = plan(plan_request(COOKBOOK, model="deepseek-v3", precision="bf16", max_model_len=2000))
    assert perf.eager_prefill_kernels(spec, bf16.params, layout, bf16.precision, frozenset()) - base == 61
    for ident in (
        "deepseek-r1-0528-fp8-b200x8-sglang-i1000-o1000-c1",
        "deepseek-r1-0528-fp8-b200x8-sglang-i1000-o8000-c1",
        "deepseek-r1-0528-fp8-b200x8-sglang-i8000-o1000-c1",
    ):
        assert abs(corpus.run_case(_case(ident)).errors["ttft_ms"]) <= 0.2, ident


def test_a_lone_prompt_crosses_every_pipeline_stages_host_time() -> None:
    """Each stage launches its own layers, one after another for a prompt: two stages do not halve the floor."""
    one = plan(plan_request(COOKBOOK)).throughput
    two = plan(plan_request(COOKBOOK, pp=2)).throughput
    assert two.eager_prefill_ms == pytest.approx(one.eager_prefill_ms, rel=0.01)
    assert two.ttft_ms >= two.eager_prefill_ms


def test_a_poisson_stream_is_not_refused_for_the_host_bound_prefill() -> None:
    """Prompts that arrive while a host-bound prefill step runs are prefilled together in the next, in an
    open loop as in the closed one: 11 requests/s of 128-token prompts is not 'more than the prefill serves'."""
    stream = {"concurrency": 512, "input_len": 128, "output_len": 16, "max_model_len": 4096}
    served = plan(plan_request(COOKBOOK, **stream, arrival="poisson", request_rate=11.0)).throughput  # type: ignore[arg-type]
    assert served.eager_prefill_ms > 0
    assert served.ttft_ms < 3 * served.eager_prefill_ms  # its own step and at most the rest of one in flight


def test_an_eager_engine_never_takes_in_more_than_a_graphed_one() -> None:
    """A reviewer's find: with the batched wait alone, SGLang 0.5.9 accepted 1000 requests/s of 256-token
    prompts on one H100 (4 PFLOP/s of prefill) while 0.5.10 refused 80. The rate is bounded by the GPU time
    of a prompt's prefill in full steps, whatever the host time: about 160 requests/s here for both."""
    stream: PlanArgs = {"model": "llama-3.1-8b", "precision": "bf16", "gpu": "h100-80g", "tp": 1, "engine": "sglang"}
    stream |= {"max_model_len": 512}
    stream |= {"input_len": 256, "output_len": 16, "concurrency": 800, "arrival": "poisson", "request_rate": 80.0}
    eager = plan(plan_request(stream, engine_version="0.5.9")).throughput
    graphed = plan(plan_request(stream, engine_version="0.5.10")).throughput
    assert eager.ttft_ms >= graphed.ttft_ms
    assert eager.batched_prefill_ms == pytest.approx(graphed.batched_prefill_ms, rel=1e-3)
    most = 1e3 / eager.batched_prefill_ms
    assert 100 < most < 250
    for version in ("0.5.9", "0.5.10"):
        with pytest.raises(ValueError, match=r"^request_rate: .* exceeds what the prefill serves"):
            plan(plan_request(stream, engine_version=version, request_rate=1.1 * most))
