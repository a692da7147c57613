"""The caching allocator's rounding of the weights, where the engine counts it (issue 31: memory
reserves by cause, not by fit). SGLang sizes its KV pool from the device's free memory after loading,
so the segments PyTorch reserved for the weight tensors count, not the tensors' bytes."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import pytest

from planner.allocator import reserved_bytes
from planner.validation import CaseResult, load_corpus, run_case

MIB = 1 << 20
GIB = 1 << 30


def test_a_remainder_of_one_mib_or_less_stays_with_the_tensor() -> None:
    # 141,557,760 bytes (QwQ-32B's gate/up projection on one of 4 GPUs) takes a 68 x 2 MiB segment;
    # the 1 MiB left is not split off (the large pool splits only above 1 MiB).
    assert reserved_bytes([141_557_760]) == 68 * 2 * MIB
    assert reserved_bytes([141_557_760, 141_557_760]) == 2 * 68 * 2 * MIB


def test_a_split_off_remainder_serves_a_later_request_that_fits() -> None:
    # 13.1 MB in a 14 MiB segment leaves 1.5 MiB split off: a later 1.2 MiB request takes it.
    assert reserved_bytes([13_107_200, int(1.2 * MIB)]) == 14 * MIB
    # ... but a request larger than the remainder needs a segment of its own (20 MiB under 10 MiB).
    assert reserved_bytes([13_107_200, 2 * MIB]) == 14 * MIB + 20 * MIB


def test_requests_between_one_and_ten_mib_share_twenty_mib_segments() -> None:
    assert reserved_bytes([9 * MIB, 8 * MIB]) == 20 * MIB
    assert reserved_bytes([9 * MIB, 8 * MIB, 9 * MIB]) == 40 * MIB


def test_small_requests_pack_into_two_mib_segments() -> None:
    assert reserved_bytes([10_240] * 100) == 2 * MIB  # 100 x 10 KiB norms
    assert reserved_bytes([100]) == 2 * MIB  # at least 512 bytes, in a 2 MiB segment
    assert reserved_bytes([MIB, MIB, MIB]) == 4 * MIB  # 1 MiB is still "small"


def _case(case_id: str) -> CaseResult:
    return run_case(next(case for case in load_corpus() if case["id"] == case_id))


def test_sglangs_weights_memory_is_the_allocators_not_the_parameters() -> None:
    """QwQ-32B on 4 x L4 (SGLang 0.4.3): the log's weights take 15.54 GiB per GPU by free memory where the
    parameters are 15.26 GiB (-1.8%, and the 2.84 GiB pool +10%). Each layer's o_proj (13.1 MB) leaves a
    1.5 MiB remainder no later tensor fits, its qkv and down projections 0.5 MiB, its gate/up 1 MiB: 15.48
    GiB reserved."""
    checks = {check.name: check for check in _case("sglang-l4-qwq-32b-tp4").checks}
    loading = checks["model_loading"]
    assert loading.error is not None
    assert abs(loading.error) < 0.005
    assert loading.planned > 15.45 * GIB  # the parameters alone are 15.26 GiB
    for name in ("available_kv_cache_memory", "gpu_kv_cache_tokens"):
        error = checks[name].error
        assert error is not None, name
        assert abs(error) < 0.03, name


def test_vllm_counts_the_tensors_so_its_pool_keeps_the_rounding_out() -> None:
    """vLLM's "Model loading took" is torch's allocated bytes, and its pool subtracts those: the same QwQ-32B
    weights on vLLM leave the allocator's rounding in vLLM's unused headroom."""
    from planner.plan import PlanRequest, plan

    config = next(case for case in load_corpus() if case["id"] == "sglang-l4-qwq-32b-tp4")["model"]
    for engine, counted in (("vllm", False), ("sglang", True)):
        request = PlanRequest(model=config, precision="bf16", gpu="l4", tp=4, max_model_len=8192, engine=engine)
        memory = plan(request).chosen.memory
        assert (memory.allocator_slack_bytes > 0.2 * GIB) is counted, engine
        assert (
            memory.loaded_bytes == memory.weights_per_gpu_bytes + memory.rope_cache_bytes + memory.allocator_slack_bytes
        )


@pytest.mark.parametrize("tp", [1, 2, 4, 8])
def test_the_rounding_never_exceeds_one_segment_per_tensor(tp: int) -> None:
    from planner.memory import allocator_slack_per_stage, layer_tensor_bytes
    from planner.plan import PlanRequest, plan

    result = plan(PlanRequest(model="qwen3-235b-a22b", precision="fp8", gpu="h100-80g", tp=tp, engine="sglang"))
    setup = result.chosen
    memory = setup.memory
    params = result.params
    layout = setup.layout
    tensors = sum(
        len(layer_tensor_bytes(layer, result.model, result.precision, layout, result.keep_bf16, (256, 1)))
        for layer in params.layers
    )
    (slack,) = allocator_slack_per_stage(params, result.model, result.precision, layout, result.keep_bf16, (256, 1))
    assert memory.allocator_slack_bytes == slack
    assert 0 < slack < (tensors + 2) * 20 * MIB


def _catalog_layouts() -> Iterator[tuple[tuple[str, str, int, bool], Any, Any, Any, Any]]:
    """Every catalog model at four precisions and TP 1, 2 and 8, with and without EP (MoE models):
    (what it is, model spec, its parameters, precision, layout)."""
    from planner.memory import Layout
    from planner.params import count_params
    from planner.specs import models, precision

    for key, spec in models().items():
        params = count_params(spec)
        for scheme, tp, ep in itertools.product(("bf16", "fp8", "w4a16", "mxfp4"), (1, 2, 8), (False, True)):
            if ep and not spec.is_moe:
                continue
            layout = Layout(tp, 1, tp if ep and tp > 1 else 1, 1)
            yield (key, scheme, tp, ep), spec, params, precision(scheme), layout


def test_whole_periods_of_layers_added_at_once_match_the_layer_by_layer_simulation() -> None:
    """The shortcut (planner.allocator.reserved_bytes_of_runs) against simulating every layer, for every
    catalog model at several precisions and layouts (1,320 of them when it was written, all equal)."""
    from planner.allocator import reserved_bytes_of_runs
    from planner.memory import layer_tensor_bytes

    checked = 0
    for where, spec, params, scheme, layout in _catalog_layouts():
        runs = [
            (layer_tensor_bytes(layer, spec, scheme, layout, frozenset(), (256, 128)), len(list(repeats)))
            for layer, repeats in itertools.groupby(params.layers)
        ]
        assert reserved_bytes_of_runs(runs) == reserved_bytes_of_runs(runs, shortcut=False), where
        checked += 1
    assert checked > 100


# SGLang weights logs from sources the planner was not fitted on (planner/validation/corpus.yaml), with the
# error the plan had counting the parameters' bytes only: up to -6.1%.
HELD_OUT_WEIGHTS = {
    "sglang-4090-qwen3-14b-tp4": -0.029,  # 4 x RTX 4090, github.com/ugyhybnb/sglang-performance-test
    "sglang-thesis-llama31-8b": -0.004,  # github.com/MaxUhl98/Thesis
    "sglang-4760-llama31-8b": -0.010,  # sgl-project/sglang pull 4760
    "sglang-skill-qwen3-8b": -0.002,  # sgl-project/sglang's clean-startup-log reference
    "sglang-xinference-3481-qwen3-14b": -0.002,  # xorbitsai/inference issue 3481
    "sglang-play-qwen25-05b": -0.061,  # github.com/willxxy/sglang-play
}


@pytest.mark.parametrize("case_id", sorted(HELD_OUT_WEIGHTS))
def test_sglang_weights_of_sources_never_fitted_are_within_one_percent(case_id: str) -> None:
    """Six SGLang logs (0.4.4 to 0.5.10; one GPU to 4 x RTX 4090; Llama, Qwen2 and Qwen3): the weights as
    SGLang counts them (free memory before and after loading) are the parameters, the caching allocator's
    rounding of each tensor (Qwen2.5-0.5B's 896-wide projections: 0.06 GiB on 0.92) and the FP32 rope
    cache, within 1% of every log (0.7% at most when written). The pools are given but for the 4 x RTX
    4090 log's, planned with SGLang's PCIe reserve of another publisher's log (+0.2%)."""
    checks = {check.name: check for check in _case(case_id).checks}
    error = checks["model_loading"].error
    assert error is not None
    assert abs(error) <= 0.01, f"{case_id}: {error:+.1%} (parameters only: {HELD_OUT_WEIGHTS[case_id]:+.1%})"
    tokens = checks["gpu_kv_cache_tokens"].error
    assert tokens is not None
    assert abs(tokens) <= 0.005


def test_the_rope_cache_is_fp32_on_sglang_and_the_model_dtype_on_vllm() -> None:
    """The cos/sin cache of 131,072 positions x 128 dims: 64 MiB in FP32 on SGLang (QwQ-32B's 15.54 GiB log:
    15.48 GiB without it), 32 MiB in BF16 on vLLM (Llama-3.1-8B's "Model loading took 14.99 GiB" on vLLM
    0.6.4: 14.96 GiB without it)."""
    from planner.engines import engine_profile
    from planner.memory import rope_cache_bytes
    from planner.specs import model

    llama = model("llama-3.1-8b")
    assert rope_cache_bytes(llama, engine_profile("sglang", "0.4.3")) == 64 * MIB
    assert rope_cache_bytes(llama, engine_profile("vllm", "0.6.4")) == 32 * MIB
    for case_id in ("sglang-l4-qwq-32b-tp4", "vllm-10517-llama31-8b-rtx3090-20k"):
        loading = next(check for check in _case(case_id).checks if check.name == "model_loading")
        assert loading.error is not None
        assert abs(loading.error) <= 0.001, case_id


def test_the_rope_cache_covers_the_rotated_share_of_each_head_and_the_scaled_positions() -> None:
    """GLM-4.5 rotates half of each 128-dim head (partial_rotary_factor 0.5); Qwen3-Next a quarter of 256. A
    YaRN rope_scaling builds the cache for the original length times its factor (Qwen3's recipe: 32768 x 4)."""
    import json
    from pathlib import Path

    from planner.engines import engine_profile
    from planner.hf_config import parse_config
    from planner.memory import rope_cache_bytes
    from planner.specs import model

    vllm, sglang = engine_profile("vllm", "0.11"), engine_profile("sglang", "0.5")
    assert rope_cache_bytes(model("glm-4.5"), vllm) == 131072 * 64 * 2
    configs = Path(__file__).parent / "configs"
    nxt = parse_config(json.loads((configs / "qwen3-next-80b-a3b.json").read_text(encoding="utf-8")))
    assert nxt.rotary_fraction == 0.25
    assert rope_cache_bytes(nxt, sglang) == nxt.max_position_embeddings * 64 * 4
    qwen3 = json.loads((configs / "qwen3-8b.json").read_text(encoding="utf-8"))
    assert parse_config(qwen3).rope_positions == 0  # no scaling: max_position_embeddings
    qwen3["rope_scaling"] = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}
    assert rope_cache_bytes(parse_config(qwen3), vllm) == 131072 * 128 * 2
    qwen3["rope_scaling"] = {"rope_type": "linear", "factor": 4.0}  # linear: max_position_embeddings x factor
    assert parse_config(qwen3).rope_positions == qwen3["max_position_embeddings"] * 4
    qwen3["partial_rotary_factor"] = 1.5
    with pytest.raises(ValueError, match=r"config\.partial_rotary_factor"):
        parse_config(qwen3)
    del qwen3["partial_rotary_factor"]
    # A hostile rope_scaling is refused naming the field, never planned with a negative cache nor crashing.
    for bad, field in (
        ({"rope_type": "yarn", "factor": 1024, "original_max_position_embeddings": -262144}, "original_max"),
        ({"rope_type": "yarn", "factor": 2.0, "original_max_position_embeddings": 10**400}, "original_max"),
        ({"rope_type": "yarn", "factor": "4"}, "rope_scaling.factor"),
        ({"rope_type": "linear", "factor": 0.5}, "rope_scaling.factor"),
    ):
        qwen3["rope_scaling"] = bad
        with pytest.raises(ValueError, match=field):
            parse_config(qwen3)


def test_a_plan_says_what_loading_takes_as_its_engine_counts_it() -> None:
    from planner.plan import PlanRequest, plan

    def note(engine: str) -> str:
        result = plan(PlanRequest(model="qwen3-14b", precision="bf16", gpu="rtx-4090", tp=4, engine=engine))
        return next(line for line in result.notes if line.startswith("Loading takes"))

    sglang, vllm = note("sglang"), note("vllm")
    assert "7.07 GiB per GPU as sglang counts it" in sglang  # the 4 x RTX 4090 log's 7.08 GiB
    assert "caching-allocator rounding" in sglang
    assert "FP32" in sglang
    assert "caching-allocator rounding" not in vllm
    assert "in the model dtype" in vllm


def test_the_tensor_list_shards_as_the_weights_do() -> None:
    """layer_tensor_bytes lists what layer_weight_bytes sums (same TP, EP, KV-head and padding rules): only
    tensors of 1 MiB or less (norms, biases, small scales) are left out, a few MiB per layer at most."""
    from planner.memory import layer_tensor_bytes, layer_weight_bytes

    for where, spec, params, scheme, layout in _catalog_layouts():
        for layer in set(params.layers):
            listed = sum(layer_tensor_bytes(layer, spec, scheme, layout, frozenset(), (256, 128)))
            summed = layer_weight_bytes(layer, spec, scheme, layout, frozenset(), (256, 128))
            assert listed <= summed * 1.0001, where
            assert summed - listed < 4 * MIB, where
