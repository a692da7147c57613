"""KV cache and weights per GPU: golden values and the pitfalls of the planner reference."""

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from planner import specs
from planner.hf_config import parse_config
from planner.memory import Layout, kv_bytes_per_token_layer, weights_per_stage, weights_total_bytes
from planner.params import count_params
from planner.plan import PlanRequest, plan
from tests.planner.requests import PlanArgs, plan_request

FIXTURES = Path(__file__).parent / "configs"


def test_mla_kv_per_token_is_the_latent_and_not_divided_by_tp() -> None:
    deepseek = specs.model("deepseek-v3")
    # 61 layers x (kv_lora_rank 512 + rope 64) x 2 bytes = 70,272 bytes per token.
    for tp in (1, 8):
        per_token = kv_bytes_per_token_layer(deepseek, "bf16", tp) * deepseek.num_layers
        assert per_token == 61 * 576 * 2 == 70_272
    result = plan(
        PlanRequest(model="kimi-k2", precision="w4a8", gpu="h200", max_model_len=131072, tp=8, ep=8)
    ).as_contract()
    assert result["kv_cache"]["bytes_per_token"] == 70_272
    assert result["kv_cache"]["bytes_per_token_per_gpu"] == 70_272  # every TP rank holds the whole latent
    # Treating Kimi K2 as GQA (64 heads x 128 dims K and V) would overstate it many times over.
    assert 2 * 64 * 128 * 2 * 61 / 70_272 > 6


def test_gqa_kv_splits_heads_over_tp_but_never_below_one_head() -> None:
    qwen = specs.model("qwen3-235b-a22b")  # 4 KV heads, head_dim 128 (not hidden/heads = 64)
    assert kv_bytes_per_token_layer(qwen, "bf16", 1) * 94 == 2 * 94 * 4 * 128 * 2 == 192_512
    assert kv_bytes_per_token_layer(qwen, "bf16", 4) * 94 == 48_128
    assert kv_bytes_per_token_layer(qwen, "bf16", 8) * 94 == 48_128  # heads replicate past 4
    assert kv_bytes_per_token_layer(qwen, "fp8", 4) * 94 == 24_064


def test_sliding_window_layers_are_charged_as_vllm_hybrid_allocator_does() -> None:
    # vLLM V1 charges a window layer min(window - 1 + max_num_batched_tokens, max_model_len) + one block:
    # a prefill chunk attends back a whole window. gpt-oss: 18 of 36 layers slide over 128 tokens.
    per_layer = kv_bytes_per_token_layer(specs.model("gpt-oss-120b"), "bf16", 1)
    for max_len in (131072, 65536):
        result = plan(
            PlanRequest(
                model="gpt-oss-120b",
                precision="mxfp4",
                gpu="h200",
                max_model_len=max_len,
                tp=1,
                max_num_batched_tokens=8192,
            )
        )
        expected = per_layer * (18 * max_len + 18 * (min(128 - 1 + 8192, max_len) + 16))
        assert result.chosen.memory.kv_bytes_per_sequence_per_gpu == expected
    # V0 had no hybrid allocator: every layer pays the whole context (V0 has no MXFP4 kernel: INT4 weights).
    v0 = plan(
        PlanRequest(
            model="gpt-oss-120b", precision="w4a16", gpu="h200", max_model_len=65536, tp=1, engine_version="0.6.4"
        )
    )
    assert v0.chosen.memory.kv_bytes_per_sequence_per_gpu == per_layer * 36 * 65536


def test_four_bit_checkpoint_size_from_its_config() -> None:
    # openai/gpt-oss-120b ships MXFP4 experts, everything else BF16: ~65 GB of safetensors.
    config = json.loads((FIXTURES / "gpt-oss-120b.json").read_text())
    spec = parse_config(config)
    assert spec.checkpoint_precision == "mxfp4"
    size = weights_total_bytes(
        count_params(spec), spec, specs.precision("mxfp4"), frozenset({"attention", "dense_mlp", "shared_experts"})
    )
    assert size == pytest.approx(65.3e9, rel=0.02)


def test_hf_config_parsing_matches_the_catalog() -> None:
    config = json.loads((FIXTURES / "deepseek-v3.json").read_text())
    parsed = parse_config(config)
    assert count_params(parsed).total == count_params(specs.model("deepseek-v3")).total
    assert parsed.checkpoint_precision == "fp8"
    qwen = json.loads((FIXTURES / "qwen3-30b-a3b.json").read_text())
    assert count_params(parse_config(qwen)).total == count_params(specs.model("qwen3-30b-a3b")).total
    with pytest.raises(ValueError, match=r"config\.num_hidden_layers"):
        parse_config({**qwen, "num_hidden_layers": -1})
    with pytest.raises(ValueError, match="not a decoder"):
        parse_config({"architectures": ["BertModel"]})
    with pytest.raises(ValueError, match=r"^config\.hidden_size: missing"):
        parse_config({k: v for k, v in qwen.items() if k != "hidden_size"})


def test_per_stage_weights_sum_to_the_total() -> None:
    for key in ("deepseek-v3", "llama-4-maverick", "qwen3-30b-a3b"):
        model = specs.model(key)
        params = count_params(model)
        total = weights_total_bytes(params, model, specs.precision("fp8"), frozenset())
        for pp in (1, 2, 4):
            stages = weights_per_stage(params, model, specs.precision("fp8"), Layout(1, pp, 1, 1), frozenset())
            assert sum(stages) == pytest.approx(total, rel=1e-9)


LAYOUTS = st.sampled_from([(1, 1, 1, 1), (2, 1, 1, 1), (4, 1, 4, 1), (8, 1, 8, 1), (8, 2, 8, 1), (4, 1, 1, 2)])


@settings(max_examples=30, deadline=None)
@given(
    key=st.sampled_from(["qwen3-30b-a3b", "mixtral-8x7b", "gpt-oss-20b", "deepseek-v3"]),
    layout=LAYOUTS,
    short=st.integers(min_value=1024, max_value=32768),
    extra=st.integers(min_value=1, max_value=65536),
)
def test_memory_is_monotone_in_context(key: str, layout: tuple[int, int, int, int], short: int, extra: int) -> None:
    tp, pp, ep, dp = layout
    common: PlanArgs = {"model": key, "precision": "bf16", "gpu": "h200", "tp": tp, "pp": pp, "ep": ep, "dp": dp}
    a = plan(plan_request(common, max_model_len=short)).chosen
    b = plan(plan_request(common, max_model_len=short + extra)).chosen
    assert b.memory.kv_bytes_per_sequence_per_gpu >= a.memory.kv_bytes_per_sequence_per_gpu
    assert b.max_concurrency <= a.max_concurrency


@settings(max_examples=30, deadline=None)
@given(
    key=st.sampled_from(["qwen3-235b-a22b", "mixtral-8x22b", "deepseek-v3", "llama-4-scout"]),
    concurrency=st.integers(min_value=1, max_value=64),
    more=st.sampled_from([2, 4]),
)
def test_more_gpus_never_stop_a_fitting_plan_fitting(key: str, concurrency: int, more: int) -> None:
    base = plan(
        PlanRequest(
            model=key, precision="fp8", gpu="h200", max_model_len=32768, tp=8, pp=1, ep=1, dp=1, concurrency=concurrency
        )
    )
    wider = plan(
        PlanRequest(
            model=key,
            precision="fp8",
            gpu="h200",
            max_model_len=32768,
            tp=8,
            pp=1,
            ep=1,
            dp=more,
            concurrency=concurrency,
        )
    )
    deeper = plan(
        PlanRequest(
            model=key, precision="fp8", gpu="h200", max_model_len=32768, tp=8, pp=2, ep=1, dp=1, concurrency=concurrency
        )
    )
    if base.chosen.fits:
        assert wider.chosen.fits
        assert deeper.chosen.fits
    assert wider.chosen.max_concurrency >= base.chosen.max_concurrency


@settings(max_examples=20, deadline=None)
@given(concurrency=st.integers(min_value=1, max_value=256))
def test_memory_is_monotone_in_concurrency_and_fits_only_within_capacity(concurrency: int) -> None:
    result = plan(
        PlanRequest(
            model="qwen3-30b-a3b", precision="bf16", gpu="h100-80g", max_model_len=32768, concurrency=concurrency
        )
    )
    contract = result.as_contract()
    memory = contract["memory_per_gpu"]
    assert memory["total"] <= memory["capacity"]
    assert memory["weights"] + memory["kv_cache"] + memory["activations"] + memory["overhead"] == memory["total"]
    if contract["fits"]:
        assert contract["max_concurrency"] >= concurrency


def test_a_reserve_fitted_to_a_single_log_says_so_in_the_plan() -> None:
    """Issue 31: a reserve read off one startup log may be that run's, not the engine's; the plan says
    which of its reserves stand on a single log and which on none."""
    from planner.engines import engine_profile

    for name in ("vllm", "sglang", "trtllm"):
        assert engine_profile(name).provenance, name
    result = plan(PlanRequest(model="llama-3.1-8b", precision="bf16", gpu="h200", tp=2, engine="sglang"))
    note = next(n for n in result.notes if n.startswith("Reserves of the sglang"))
    assert "fitted to a single log (H100 TP4" in note


def test_a_plan_says_where_its_commands_data_parallelism_shards_weights_across_replicas() -> None:
    """vLLM's --data-parallel-size without expert parallelism shards an MoE model's experts over all tp x dp
    GPUs, and SGLang's DP attention its MLP and experts; the memory model sizes each replica as a whole
    copy (an upper bound), which the plan states. Independent replicas (a dense model on vLLM, or EP) say
    nothing."""
    from planner.plan import PlanRequest, plan

    def notes(dp: int, ep: int = 1, engine: str = "vllm") -> list[str]:
        request = PlanRequest(
            model="qwen3-30b-a3b", precision="bf16", gpu="h100-80g", tp=1, dp=dp, ep=ep, engine=engine
        )
        return [note for note in plan(request).notes if note.startswith("Data parallelism:")]

    (vllm,) = notes(dp=2)
    assert "shards the experts over all tp x dp GPUs" in vllm
    assert "upper bound" in vllm
    assert notes(dp=2, ep=2) == []
    assert notes(dp=1) == []
    (sglang,) = notes(dp=2, engine="sglang")
    assert "DP attention" in sglang
    dense = plan(PlanRequest(model="qwen3-8b", precision="bf16", gpu="h100-80g", tp=1, dp=2))
    assert not [note for note in dense.notes if note.startswith("Data parallelism:")]
