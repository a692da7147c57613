"""The throughput model's behaviour (issue 17): prefill inside decode steps, whole-prompt TTFT, per-model
overheads, the delivered fraction, a batch-1 bound that is one, and every figure labelled an estimate."""

import itertools
from typing import Any, Unpack

import pytest

from planner.perf import Throughput
from planner.plan import PlanRequest, plan
from planner.specs import models
from tests.planner.requests import PlanArgs, plan_request


def _throughput(**fields: Unpack[PlanArgs]) -> Throughput:
    base: PlanArgs = {"model": "qwen3-30b-a3b", "precision": "fp8", "gpu": "h100-80g", "tp": 2, "max_model_len": 16384}
    return plan(plan_request(base, **fields)).throughput


def test_long_prompts_at_high_concurrency_slow_every_token() -> None:
    short = _throughput(concurrency=64, input_len=128, output_len=512)
    long = _throughput(concurrency=64, input_len=8192, output_len=512)
    assert long.prefill_tokens_per_step > 10 * short.prefill_tokens_per_step
    assert long.tpot_ms > 1.3 * short.tpot_ms
    # The step without prefill is not what slows it: the other requests' prefill chunks are.
    assert long.tpot_ms > 1.2 * long.decode_step_ms
    assert short.tpot_ms < 1.05 * short.decode_step_ms
    alone_short = _throughput(concurrency=1, input_len=128, output_len=512)
    alone_long = _throughput(concurrency=1, input_len=8192, output_len=512)
    assert alone_long.prefill_tokens_per_step == 0  # nobody else's prompt arrives at concurrency 1
    assert alone_long.tpot_ms < 1.2 * alone_short.tpot_ms


def test_ttft_counts_the_whole_prompt_and_the_queue() -> None:
    ttft = {n: _throughput(concurrency=1, input_len=n, output_len=64).ttft_ms for n in (1024, 4096, 12000)}
    assert ttft[4096] > 1.5 * ttft[1024]
    assert ttft[12000] > 3 * ttft[4096]  # the whole prompt: no 2048-token cap
    # A closed loop of 32 prompts of 4096 tokens, two to an 8192-token step: each waits for its
    # group's other prompt and for the other groups' prefills still queued when it arrives.
    crowded = _throughput(concurrency=32, input_len=4096, output_len=64).ttft_ms
    assert crowded > 1.5 * ttft[4096]
    # The shorter the request cycle, the more prefill work: near saturation more prompt tokens arrive a
    # step than one prompt's chunk, and every step carries them all (up to its budget), so the others'
    # prefills slow each token as well as the first (a reviewer's find: one chunk was charged a step, so
    # TPOT stopped growing with the load). The cycle is then the prefill work's: 131k tokens of
    # Qwen3-30B-A3B, about 0.8 s on two H100s.
    saturated = _throughput(concurrency=32, input_len=4096, output_len=16)
    assert saturated.prefill_tokens_per_step == pytest.approx(31 * 4096 / 16)
    assert saturated.ttft_ms > 2 * crowded
    assert saturated.tpot_ms > 2 * _throughput(concurrency=32, input_len=4096, output_len=64).tpot_ms
    assert saturated.ttft_ms + 15 * saturated.tpot_ms > 800
    # Prompts that all fit in one step come back together and share that step.
    together = _throughput(concurrency=8, input_len=1024, output_len=512).ttft_ms
    assert together > 1.5 * _throughput(concurrency=1, input_len=1024, output_len=512).ttft_ms


def test_closed_loop_wait() -> None:
    """Mean value analysis of the prefill queue: no wait for a lone group, a small one under light
    load, and at saturation a wait for every other group (the one in service half done)."""
    from planner.perf import _closed_loop_wait_s

    assert _closed_loop_wait_s(1, 1.0, 0.0) == 0.0
    assert _closed_loop_wait_s(10, 1.0, 1000.0) < 0.01
    assert _closed_loop_wait_s(10, 1.0, 0.0) == pytest.approx(8.5, abs=0.1)
    light, heavy = _closed_loop_wait_s(10, 1.0, 20.0), _closed_loop_wait_s(10, 1.0, 5.0)
    assert 0 < light < heavy


def test_tokens_per_second_carry_the_delivered_fraction() -> None:
    figures = _throughput(concurrency=32, input_len=2048, output_len=128)
    ideal = 32 / (figures.tpot_ms / 1000)
    assert 0.3 < figures.delivered_fraction < 1.0
    assert figures.decode_tokens_per_s == pytest.approx(ideal * figures.delivered_fraction, rel=0.01)


def test_overheads_follow_the_model() -> None:
    deepseek = plan(PlanRequest(model="deepseek-v3", precision="fp8", gpu="h200", tp=8, max_model_len=4096)).throughput
    mixtral = plan(PlanRequest(model="mixtral-8x7b", precision="fp8", gpu="h200", tp=8, max_model_len=4096)).throughput
    per_layer_deepseek = deepseek.breakdown_ms["kernels"] / 61
    per_layer_mixtral = mixtral.breakdown_ms["kernels"] / 32
    assert per_layer_deepseek > 1.2 * per_layer_mixtral  # MLA + shared expert launch more kernels per layer
    assert deepseek.breakdown_ms["collectives"] > 0


@pytest.mark.parametrize("gpu", ["h100-80g", "h200", "b200", "mi300x"])
def test_batch1_bound_is_an_upper_bound(gpu: str) -> None:
    for key, spec in models().items():
        if spec.vision:
            continue
        result = plan(
            PlanRequest(model=key, precision="fp8", gpu=gpu, max_model_len=8192, input_len=512, output_len=512)
        )
        if not result.chosen.fits:
            continue
        one = result.throughput
        assert one.batch1_tokens_per_s_upper_bound >= 1000 / one.tpot_ms, key


def test_every_figure_is_labelled_an_estimate_with_its_inputs() -> None:
    contract = plan(
        PlanRequest(
            model="gpt-oss-120b",
            precision="mxfp4",
            gpu="h200",
            concurrency=16,
            input_len=3000,
            output_len=300,
            engine="sglang",
            max_num_batched_tokens=4096,
        )
    ).as_contract()
    estimate = contract["throughput_estimate"]
    assert estimate["estimate"] is True
    assert estimate["inputs"] == {
        "input_len": 3000,
        "output_len": 300,
        "sequences_per_replica": 16,
        "engine": "sglang",
        "max_num_batched_tokens": 4096,
        "keep_bf16": ["attention", "dense_mlp", "shared_experts"],  # MXFP4 quantizes the routed experts
        "arrival": "burst",
    }
    assert estimate["tpot_ms"] == contract["throughput"]["tpot_ms"]
    assert set(estimate["decode_step_breakdown_ms"]) >= {"dense_gemm", "experts", "attention", "kernels"}
    assert any("estimate" in note and "3000-token prompts" in note for note in contract["notes"])


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("input_len", 0, "input_len"),
        ("output_len", -1, "output_len"),
        ("engine", "tgi", "engine"),
        ("max_num_batched_tokens", 4, "max_num_batched_tokens"),
        ("cached_prefix_len", -1, "cached_prefix_len"),
    ],
)
def test_bad_workload_inputs_name_the_field(field: str, value: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        plan(PlanRequest(model="qwen3-30b-a3b", precision="bf16", gpu="h200", **{field: value}))  # type: ignore[arg-type]


def test_a_cached_prefix_is_not_prefilled_again() -> None:
    """Prompt tokens already in the engine's prefix cache (vLLM V1 caches by default) skip the prefill:
    TTFT falls towards a prompt of the new tokens alone, but stays above it because the new tokens
    attend to the cached ones; the arriving prompts of other requests slow decode steps less."""
    fresh = _throughput(concurrency=1, input_len=8192, output_len=128)
    cached = _throughput(concurrency=1, input_len=8192, output_len=128, cached_prefix_len=4096)
    short = _throughput(concurrency=1, input_len=4096, output_len=128)
    assert cached.ttft_ms < 0.75 * fresh.ttft_ms
    assert cached.ttft_ms > short.ttft_ms  # 4096 new tokens over an 8192-token context
    assert cached.tpot_ms == pytest.approx(fresh.tpot_ms, rel=1e-6)  # decode still reads the whole context
    assert cached.as_estimate()["inputs"]["cached_prefix_len"] == 4096
    assert "cached_prefix_len" not in fresh.as_estimate()["inputs"]
    busy_fresh = _throughput(concurrency=32, input_len=8192, output_len=256)
    busy_cached = _throughput(concurrency=32, input_len=8192, output_len=256, cached_prefix_len=6144)
    assert busy_cached.prefill_tokens_per_step < 0.3 * busy_fresh.prefill_tokens_per_step
    assert busy_cached.tpot_ms < busy_fresh.tpot_ms
    # A whole prompt in the cache still computes its last token: the TTFT is one short prefill.
    whole = _throughput(concurrency=1, input_len=4096, output_len=128, cached_prefix_len=4096)
    assert whole.cached_prefix_len == 4095
    assert whole.tpot_ms < whole.ttft_ms < 0.3 * short.ttft_ms  # about one decode-sized forward


def test_one_sequence_arrives_at_an_idle_engine() -> None:
    """At one sequence per replica (closed loop) nobody else is decoding when a prompt arrives: its
    TTFT is its own prefill, not half a decode step more. A long output makes the decode step slower
    (more KV to read) but leaves the TTFT of a lone request alone."""
    short, long = (_throughput(concurrency=1, input_len=2048, output_len=n) for n in (64, 14000))
    assert long.tpot_ms > short.tpot_ms + 0.1
    assert long.ttft_ms == pytest.approx(short.ttft_ms, rel=1e-6)
    # Long outputs: few prefills queue ahead; the slower step in flight is waited for.
    busy_short, busy_long = (_throughput(concurrency=8, input_len=2048, output_len=n) for n in (4000, 14000))
    assert busy_long.ttft_ms > busy_short.ttft_ms


def test_a_gemm_at_the_ridge_point_reaches_neither_peak() -> None:
    """The H200 profile's BF16 cuBLAS GEMM at M = 256 ran at 0.51 of compute and 0.41 of HBM at once:
    the default path adds the two bounds where they meet, and keeps the bound far from the ridge."""
    from planner.efficiency import _roofline

    assert _roofline(1.0, 1.0) > 1.5
    assert _roofline(1.0, 0.02) == pytest.approx(1.0, abs=0.01)
    assert _roofline(0.02, 1.0) == pytest.approx(1.0, abs=0.01)


def test_w4a16_decode_gains_what_hopper_measured_not_the_byte_ratio() -> None:
    """Torch's INT4 GEMM at M = 1 on the H200 ran 1.3-2.1x BF16 (mean 1.73), not the 3.85x of its bytes."""
    base: dict[str, Any] = {"model": "llama-3.1-8b", "gpu": "h100-80g", "tp": 1, "max_model_len": 4096}
    bf16 = plan(PlanRequest(precision="bf16", **base, input_len=512, output_len=512)).throughput
    w4 = plan(PlanRequest(precision="w4a16", **base, input_len=512, output_len=512)).throughput
    gemm = {name: t.breakdown_ms["dense_gemm"] for name, t in (("bf16", bf16), ("w4a16", w4))}
    assert 1.3 < gemm["bf16"] / gemm["w4a16"] < 2.1


def test_experts_split_inside_a_replica_need_no_all_to_all() -> None:
    """With ep = tp and one replica, every rank already holds every token after the attention
    all-reduce: each runs its own experts and the MoE output all-reduce (one of the two per layer)
    combines them, as vLLM and SGLang do without DP attention. An all-to-all is only needed when
    the experts are shared across DP replicas (ep = tp x dp, dp > 1)."""
    base: dict[str, Any] = {"model": "deepseek-v3", "precision": "fp8", "gpu": "h200", "max_model_len": 4096}
    split = plan(PlanRequest(tp=8, ep=8, dp=1, concurrency=16, **base)).throughput
    sharded = plan(PlanRequest(tp=8, ep=1, dp=1, concurrency=16, **base)).throughput
    assert split.breakdown_ms["collectives"] == pytest.approx(sharded.breakdown_ms["collectives"], rel=1e-6)
    shared, inside = (plan(PlanRequest(tp=4, ep=ep, dp=2, concurrency=32, **base)).throughput for ep in (8, 4))
    assert shared.breakdown_ms["collectives"] > 1.2 * inside.breakdown_ms["collectives"]


def test_sglang_scheduler_recv_interval_delays_the_first_token() -> None:
    """SGLang's `--scheduler-recv-interval N` polls for new requests once every N decode steps (the
    skipper weighs a decode step 1, a prefill step the whole interval): a request arriving while
    others decode waits N/2 steps on average instead of half of the step in flight. Nothing changes
    for a lone request (an idle engine polls at once) or for TPOT."""
    base: dict[str, Any] = {
        "model": "qwen3-30b-a3b",
        "precision": "fp8",
        "gpu": "h200",
        "max_model_len": 4096,
        "engine": "sglang",
        "input_len": 1024,
        "output_len": 1024,
    }
    every = plan(PlanRequest(concurrency=16, **base)).throughput
    thirty = plan(PlanRequest(concurrency=16, scheduler_recv_interval=30, **base)).throughput
    assert thirty.tpot_ms == pytest.approx(every.tpot_ms)
    assert thirty.ttft_ms - every.ttft_ms == pytest.approx(29 * every.tpot_ms / 2, rel=0.02)
    alone = [plan(PlanRequest(concurrency=1, scheduler_recv_interval=n, **base)).throughput for n in (1, 30)]
    assert alone[0].ttft_ms == pytest.approx(alone[1].ttft_ms)
    assert thirty.as_estimate()["inputs"]["scheduler_recv_interval"] == 30
    with pytest.raises(ValueError, match="scheduler_recv_interval"):
        plan(PlanRequest(concurrency=16, scheduler_recv_interval=10, **{**base, "engine": "vllm"}))


def test_the_recv_interval_reaches_the_sglang_command_and_the_cli() -> None:
    """The interval the TTFT assumed is the one the SGLang command line starts the server with."""
    from tests.planner.cli import planner_cli

    contract = plan(
        PlanRequest(
            model="qwen3-30b-a3b",
            precision="fp8",
            gpu="h200",
            concurrency=16,
            engine="sglang",
            scheduler_recv_interval=10,
        )
    ).as_contract()
    assert "--scheduler-recv-interval 10" in contract["serving"]["sglang"]
    plain = plan(PlanRequest(model="qwen3-30b-a3b", precision="fp8", gpu="h200", engine="sglang")).as_contract()
    assert "--scheduler-recv-interval" not in plain["serving"]["sglang"]
    run = planner_cli(
        "plan",
        "--model",
        "qwen3-30b-a3b",
        "--precision",
        "fp8",
        "--gpu",
        "h200",
        "--engine",
        "sglang",
        "--concurrency",
        "16",
        "--scheduler-recv-interval",
        "10",
        "--format",
        "json",
    )
    assert run.returncode == 0, run.stderr
    assert '"scheduler_recv_interval": 10' in run.stdout


def test_tied_embeddings_still_read_the_output_projection() -> None:
    """A model whose LM head shares the input embedding (Qwen3-0.6B) still multiplies every decoded
    token by that vocab x hidden matrix: the step reads it whether or not the weights are tied."""
    config: dict[str, Any] = {
        "architectures": ["Qwen3ForCausalLM"],
        "hidden_size": 1024,
        "intermediate_size": 3072,
        "num_hidden_layers": 28,
        "num_attention_heads": 16,
        "num_key_value_heads": 8,
        "head_dim": 128,
        "vocab_size": 151936,
        "max_position_embeddings": 40960,
    }
    figures = {
        tied: plan(
            PlanRequest(
                model={**config, "tie_word_embeddings": tied},
                precision="bf16",
                gpu="a100-80g",
                tp=1,
                max_model_len=4096,
                input_len=128,
                output_len=128,
            )
        ).throughput
        for tied in (True, False)
    }
    assert figures[True].breakdown_ms["lm_head"] > 0.1  # 311 MB of BF16 weights at ~1.5 TB/s
    assert figures[True].breakdown_ms["lm_head"] == pytest.approx(figures[False].breakdown_ms["lm_head"])
    assert figures[True].tpot_ms == pytest.approx(figures[False].tpot_ms)


def test_the_step_budget_is_the_one_the_engine_takes_on_that_gpu() -> None:
    """vLLM V1 serves with max_num_batched_tokens 2048 on an A100 (8192 on an H100): the memory model
    reserved activations for that budget, and the throughput model must prefill in steps of it too."""
    base: dict[str, Any] = {"model": "qwen3-30b-a3b", "precision": "bf16", "tp": 1, "max_model_len": 9216}
    a100 = plan(PlanRequest(gpu="a100-80g", input_len=8192, output_len=128, **base))
    h100 = plan(PlanRequest(gpu="h100-80g", input_len=8192, output_len=128, **base))
    assert a100.chosen.memory.max_num_batched_tokens == 2048
    assert a100.throughput.max_num_batched_tokens == 2048
    assert h100.throughput.max_num_batched_tokens == 8192
    # Four chunks each stream every expert again: the whole prompt costs more than in one step.
    one_step = plan(PlanRequest(gpu="a100-80g", input_len=8192, output_len=128, max_num_batched_tokens=8192, **base))
    assert a100.throughput.ttft_ms > 1.1 * one_step.throughput.ttft_ms
    assert "2048 tokens a step" in " ".join(a100.notes)


def test_bf16_attention_of_an_mxfp4_checkpoint_costs_bf16_flops() -> None:
    """gpt-oss quantizes only its routed experts: its attention GEMMs multiply BF16 weights, and their
    FLOPs are those of the BF16 weights, not of 4.25-bit ones (which would count 3.8x the math)."""
    from planner.efficiency import Rates
    from planner.memory import Layout
    from planner.perf import step_s
    from planner.plan import PlanSetup

    def dense_prefill_ms(precision: str) -> float:
        setup = PlanSetup.resolve(PlanRequest(model="gpt-oss-120b", precision=precision, gpu="h100-80g"))
        _, parts = step_s(
            model=setup.model,
            params=setup.params,
            precision=setup.precision,
            layout=Layout(tp=4, pp=1, ep=1, dp=1),
            rates=Rates(setup.gpu, setup.precision, None),
            keep=setup.keep_bf16,
            kv_dtype="bf16",
            decode_tokens=0,
            decode_context=0,
            prefill_tokens=8192,
            prefill_context=4096,
        )
        return parts["dense_gemm"]

    assert dense_prefill_ms("mxfp4") == pytest.approx(dense_prefill_ms("bf16"), rel=1e-6)


def test_a_compute_bound_gemm_ramps_up_with_its_rows() -> None:
    """The H200 profile: a BF16 GEMM reaches its large-M efficiency only from a few thousand rows
    (attn_o 2048 x 4096: 0.68 of peak at M = 1024, 0.81 at 16384); small shapes need more rows.
    Below the ridge point a GEMM streams its weights, and the ramp leaves that time alone."""
    from planner.efficiency import Rates
    from planner.specs import gpu, precision

    rates = Rates(gpu("h200"), precision("bf16"), None)

    def rate(rows: int, n: int, k: int) -> float:  # FLOP/s
        return 2.0 * rows * n * k / rates.gemm_s(n * k * 2.0, rows, n, k)

    assert 0.75 < rate(1024, 2048, 4096) / rate(16384, 2048, 4096) < 0.92
    assert rate(1024, 768, 2048) / rate(16384, 768, 2048) < rate(1024, 2048, 4096) / rate(16384, 2048, 4096)
    assert rate(16384, 8192, 8192) / rate(65536, 8192, 8192) > 0.98
    # Decode: one row streams the weights; the time is the bandwidth-bound one, continuous in M.
    one = rates.gemm_s(2048 * 4096 * 2.0, 1, 2048, 4096)
    assert one == pytest.approx(2048 * 4096 * 2.0 / (rates.bandwidth * rates.factors.memory), rel=0.02)
    times = [rates.gemm_s(2048 * 4096 * 2.0, m, 2048, 4096) for m in range(1, 4097)]
    assert all(b >= a for a, b in itertools.pairwise(times))
    assert max(b / a for a, b in itertools.pairwise(times)) < 1.01


def test_a_lone_prompt_of_the_whole_budget_is_one_step() -> None:
    """At one sequence nobody else decodes while the prompt is prefilled: a prompt of exactly
    max_num_batched_tokens is one step (the budget reserves no decode slot for it)."""
    ttft = {
        n: _throughput(concurrency=1, input_len=n, output_len=64, max_num_batched_tokens=2048).ttft_ms
        for n in (2047, 2048, 2049)
    }
    assert ttft[2048] < 1.01 * ttft[2047]
    assert ttft[2049] > 1.03 * ttft[2048]


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"scheduler_recv_interval": 0, "engine": "sglang"}, "scheduler_recv_interval: must be >= 1"),
        ({"input_len": 8000, "output_len": 128, "max_model_len": 4096}, "input_len"),
        ({"input_len": 4000, "output_len": 200, "max_model_len": 4096}, "output_len"),
    ],
)
def test_workloads_the_engine_would_refuse_name_the_field(fields: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        _throughput(**fields)


def test_a_zero_prompt_is_named_before_its_cached_prefix() -> None:
    from planner.plan import check_cached_prefix

    with pytest.raises(ValueError, match=r"^input_len: must be >= 1"):
        check_cached_prefix(0, 0)


def test_int4_weights_stream_at_bf16_speed_through_marlin_on_ampere() -> None:
    """vLLM serves AWQ/GPTQ INT4 checkpoints through Marlin on the A100, whose authors give close to the
    ideal 4x over FP16 at small batches (https://github.com/IST-DASLab/marlin); the 0.45 multiplier was
    measured on the H200 with torch's tinygemm kernel. Qwen2.5-32B-AWQ on one A100 (the Qwen team's speed
    benchmark, vLLM 0.6.3: 51.92 tokens/s at batch 1, 19.26 ms a token) planned 84% slow with it."""
    from planner import corpus
    from planner.efficiency import default_factors

    assert default_factors("a100-80g", "w4a16").memory == default_factors("a100-80g").memory
    assert default_factors("h200", "w4a16").memory == pytest.approx(0.45 * default_factors("h200").memory)
    case = next(c for c in corpus.cases() if c["id"] == "qwen2.5-32b-awq-a100-vllm-1-2048")
    assert case["measured"]["tpot_ms"] == 19.26
    assert abs(corpus.run_case(case).errors["tpot_ms"]) < 0.10
