"""Hybrid attention (issue 31): Qwen3-Next keeps a KV cache on one layer in `full_attention_interval`
(every 4th); the other three are Gated DeltaNet linear attention, which keeps a fixed state per
sequence and nothing per token. Counting them as KV layers planned 4x the KV bytes per token.

The config is Qwen/Qwen3-Next-80B-A3B-Instruct's config.json on Hugging Face (the fields the planner
reads, copied into tests/planner/configs/qwen3-next-80b-a3b.json); its model card gives 80B
parameters in total (the checkpoint's extra MTP layer is not served by default and not counted).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from planner.hf_config import parse_config
from planner.memory import Layout
from planner.params import count_params
from planner.plan import PlanRequest, plan

CONFIG: dict[str, Any] = json.loads(
    (Path(__file__).parent / "configs" / "qwen3-next-80b-a3b.json").read_text(encoding="utf-8")
)
FULL_LAYERS, LINEAR_LAYERS = 12, 36


def _state_bytes_per_sequence(tp: int) -> int:
    """Gated DeltaNet state per sequence on one GPU, model dtype (BF16): the causal conv's last
    kernel - 1 inputs over q, k and v channels, and the (value heads x key dim x value dim) recurrence."""
    conv = (2 * 16 * 128 + 32 * 128) // tp * (4 - 1)
    recurrent = 32 // tp * 128 * 128
    return LINEAR_LAYERS * (conv + recurrent) * 2


def test_linear_attention_layers_keep_no_kv_per_token() -> None:
    result = plan(PlanRequest(model=CONFIG, precision="bf16", gpu="h200", tp=4, max_model_len=32768)).as_contract()
    per_layer = 2 * 2 * 256 * 2  # K and V, 2 KV heads of 256, BF16
    assert result["kv_cache"]["bytes_per_token"] == FULL_LAYERS * per_layer  # was 48 layers' worth
    assert result["kv_cache"]["bytes_per_token_per_gpu"] == FULL_LAYERS * 2 * 1 * 256 * 2  # one KV head per rank


def test_the_fixed_state_is_charged_per_sequence() -> None:
    result = plan(PlanRequest(model=CONFIG, precision="bf16", gpu="h200", tp=4, max_model_len=32768))
    memory = result.chosen.memory
    kv_sequence = 32768 * memory.kv_bytes_per_token_per_gpu
    assert memory.kv_bytes_per_sequence_per_gpu == kv_sequence + _state_bytes_per_sequence(4)
    assert memory.sequences_per_replica == memory.kv_pool_bytes // memory.kv_bytes_per_sequence_per_gpu


def test_the_parameters_count_the_linear_attention_blocks() -> None:
    spec = parse_config(CONFIG)
    assert spec.linear_layers == tuple(i for i in range(48) if (i + 1) % 4)
    params = count_params(spec)
    assert params.total == pytest.approx(80e9, rel=0.01)
    assert params.active_per_token == pytest.approx(3.5e9, rel=0.1)  # "3B activated" plus the LM head


def test_layer_types_say_the_same() -> None:
    types = ["linear_attention" if (i + 1) % 4 else "full_attention" for i in range(48)]
    listed = {k: v for k, v in CONFIG.items() if k != "full_attention_interval"} | {"layer_types": types}
    assert parse_config(listed).linear_layers == parse_config(CONFIG).linear_layers


def test_linear_attention_without_its_fields_is_still_refused() -> None:
    """Other linear attentions (MiniMax's lightning attention, Kimi's KDA) have other states: refused."""
    config = {k: v for k, v in CONFIG.items() if not k.startswith("linear_")}
    with pytest.raises(ValueError, match=r"^config\.linear_num_value_heads: "):
        parse_config(config)


def test_the_decode_step_reads_the_state_not_a_kv_cache() -> None:
    """At a long context the step reads the KV of 12 layers, not 48: decode time grows 4x slower."""
    from planner.efficiency import Rates
    from planner.perf import step_s
    from planner.plan import PlanSetup

    setup = PlanSetup.resolve(PlanRequest(model=CONFIG, precision="bf16", gpu="h200"))

    def attention_ms(context: int) -> float:
        _, parts = step_s(
            model=setup.model,
            params=setup.params,
            precision=setup.precision,
            layout=Layout(tp=4, pp=1, ep=1, dp=1),
            rates=Rates(setup.gpu, setup.precision, None),
            keep=setup.keep_bf16,
            kv_dtype="bf16",
            decode_tokens=64,
            decode_context=context,
        )
        return parts["attention"]

    growth = attention_ms(65536) - attention_ms(32768)
    kv_bytes = 64 * 32768 * FULL_LAYERS * 2 * 1 * 256 * 2  # the extra KV read
    assert growth == pytest.approx(kv_bytes / (setup.gpu.hbm_bandwidth_gb_per_s * 1e9), rel=0.5)
