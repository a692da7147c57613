"""A checkpoint's own quantization_config (its ignore list) decides which parts stay BF16, and that one
list sizes both the memory and the throughput (issue 31; the lead's issue 27 found the throughput
recomputing it without the checkpoint's BF16 parts: Qwen3-8B FP8 with BF16 attention planned 12%
optimistic on TPOT)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from planner.hf_config import parse_config
from planner.plan import PlanSetup, plan
from tests.planner.requests import PlanArgs, plan_request

CONFIGS = Path(__file__).parent / "configs"


def _config(name: str, **extra: Any) -> dict[str, Any]:
    return {**json.loads((CONFIGS / name).read_text(encoding="utf-8")), **extra}


def _fp8(ignore: list[str]) -> dict[str, Any]:
    return {
        "quant_method": "fp8",
        "activation_scheme": "dynamic",
        "weight_block_size": [128, 128],
        "modules_to_not_convert": ignore,
    }


QWEN3_8B_FP8_BF16_ATTENTION = _config(
    "qwen3-8b.json", quantization_config=_fp8(["lm_head", *(f"model.layers.{i}.self_attn" for i in range(36))])
)
WORKLOAD: PlanArgs = {"gpu": "h100-80g", "tp": 1, "max_model_len": 8192, "input_len": 1024, "output_len": 256}


def test_the_checkpoints_bf16_attention_is_read_by_memory_and_throughput_alike() -> None:
    from_config = plan(plan_request(WORKLOAD, model=QWEN3_8B_FP8_BF16_ATTENTION, precision="auto"))
    assert from_config.precision.key == "fp8"
    assert "attention" in from_config.keep_bf16
    asked = plan(plan_request(WORKLOAD, model=_config("qwen3-8b.json"), precision="fp8", keep_bf16=("attention",)))
    assert from_config.chosen.memory.weights_per_gpu_bytes == asked.chosen.memory.weights_per_gpu_bytes
    assert from_config.throughput.tpot_ms == pytest.approx(asked.throughput.tpot_ms, rel=1e-9)
    assert from_config.throughput.ttft_ms == pytest.approx(asked.throughput.ttft_ms, rel=1e-9)
    all_fp8 = plan(plan_request(WORKLOAD, model=_config("qwen3-8b.json"), precision="fp8"))
    assert from_config.throughput.tpot_ms > 1.05 * all_fp8.throughput.tpot_ms  # BF16 attention is read at 2 bytes


def test_the_plan_setup_holds_the_one_list() -> None:
    setup = PlanSetup.resolve(plan_request(WORKLOAD, model=QWEN3_8B_FP8_BF16_ATTENTION, precision="auto"))
    result = plan(plan_request(WORKLOAD, model=QWEN3_8B_FP8_BF16_ATTENTION, precision="auto"))
    assert result.throughput.as_estimate()["inputs"]["keep_bf16"] == sorted(setup.keep_bf16)


def test_a_dense_mlp_in_the_ignore_list_stays_bf16() -> None:
    """Kimi K2 Thinking's compressed-tensors config keeps attention, shared experts and the dense MLP
    of its first layer in BF16 (`re:.*mlp\\.(gate|up|gate_up|down)_proj.*`); the router (`mlp.gate`)
    is not the dense MLP."""
    quantization = {
        "quant_method": "compressed-tensors",
        "config_groups": {"g": {"weights": {"num_bits": 4, "type": "int", "group_size": 32}}},
        "ignore": ["lm_head", "re:.*self_attn.*", "re:.*shared_experts.*", "re:.*mlp\\.(gate|up|gate_up|down)_proj.*"],
    }
    spec = parse_config(_config("deepseek-v3.json", quantization_config=quantization))
    assert set(spec.checkpoint_keep_bf16) == {"attention", "shared_experts", "dense_mlp"}
    router_only = {**quantization, "ignore": ["lm_head", "re:.*mlp.gate$"]}
    assert parse_config(_config("deepseek-v3.json", quantization_config=router_only)).checkpoint_keep_bf16 == ()


def test_a_few_layers_left_out_do_not_make_the_whole_part_bf16() -> None:
    """An ignore list naming only the first and last layers' attention keeps 2 of 36 layers in BF16:
    planning all 36 as BF16 would overstate the weights by a quarter."""
    config = _config(
        "qwen3-8b.json",
        quantization_config=_fp8(["lm_head", "model.layers.0.self_attn", "model.layers.35.self_attn"]),
    )
    spec = parse_config(config)
    assert spec.checkpoint_keep_bf16 == ()
    assert any("layers 0, 35" in note for note in spec.notes)


def test_the_dense_mlps_of_the_dense_layers_named_one_by_one_are_the_whole_part() -> None:
    """DeepSeek-V3 has a dense MLP in its first three layers only: naming those three is naming all."""
    ignore = ["lm_head", "model.layers.0.mlp", "model.layers.1.mlp", "model.layers.2.mlp"]
    spec = parse_config(_config("deepseek-v3.json", quantization_config=_fp8(ignore)))
    assert spec.checkpoint_keep_bf16 == ("dense_mlp",)
    two = parse_config(_config("deepseek-v3.json", quantization_config=_fp8(ignore[:3])))
    assert two.checkpoint_keep_bf16 == ()
    assert any("dense_mlp of layers 0, 1" in note for note in two.notes)
