"""Any decoder config.json: one config per family (fields as each repository's config.json has them),
parameters against the published total (1%), KV bytes per token, windows and inferred precision."""

import json
from pathlib import Path
from typing import Any

import pytest

from planner.hf_config import parse_config
from planner.memory import kv_bytes_per_token_layer
from planner.params import count_params
from planner.plan import PlanRequest, plan

FIXTURES = Path(__file__).parent / "configs"


def _config(name: str) -> dict[str, Any]:
    """A family's config.json as its repository has it (tests/planner/configs)."""
    config: dict[str, Any] = json.loads((FIXTURES / f"{name}.json").read_text())
    return config


def _llama(**overrides: Any) -> dict[str, Any]:
    base = {
        "architectures": ["LlamaForCausalLM"],
        "hidden_size": 4096,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "intermediate_size": 14336,
        "vocab_size": 128256,
        "max_position_embeddings": 131072,
        "tie_word_embeddings": False,
    }
    return {**base, **overrides}


DEEPSEEK_V2 = {
    "architectures": ["DeepseekV2ForCausalLM"],
    "hidden_size": 5120,
    "num_hidden_layers": 60,
    "num_attention_heads": 128,
    "num_key_value_heads": 128,
    "q_lora_rank": 1536,
    "kv_lora_rank": 512,
    "qk_nope_head_dim": 128,
    "qk_rope_head_dim": 64,
    "v_head_dim": 128,
    "intermediate_size": 12288,
    "moe_intermediate_size": 1536,
    "n_routed_experts": 160,
    "n_shared_experts": 2,
    "num_experts_per_tok": 6,
    "first_k_dense_replace": 1,
    "moe_layer_freq": 1,
    "vocab_size": 102400,
    "max_position_embeddings": 163840,
}

# key: (config, published total, source, KV bytes per token in BF16 on one GPU)
FAMILIES: dict[str, tuple[dict[str, Any], float, str, int]] = {
    "llama-2-7b": (
        _llama(num_key_value_heads=32, intermediate_size=11008, vocab_size=32000, max_position_embeddings=4096),
        6.74e9,
        "meta-llama/Llama-2-7b-hf: 6.74B",
        2 * 32 * 32 * 128 * 2,
    ),
    "llama-3.1-8b": (_llama(), 8.03e9, "meta-llama/Llama-3.1-8B: 8.03B", 2 * 32 * 8 * 128 * 2),
    "llama-3.2-1b": (
        _llama(hidden_size=2048, num_hidden_layers=16, head_dim=64, intermediate_size=8192, tie_word_embeddings=True),
        1.24e9,
        "meta-llama/Llama-3.2-1B: 1.24B (tied embeddings)",
        2 * 16 * 8 * 64 * 2,
    ),
    "llama-4-scout": (_config("llama-4-scout"), 109e9, "Llama 4 model card: 109B total", 2 * 48 * 8 * 128 * 2),
    "qwen2.5-7b": (_config("qwen2.5-7b"), 7.61e9, "Qwen2.5-7B model card: 7.61B", 2 * 28 * 4 * 128 * 2),
    "qwen2-57b-a14b": (_config("qwen2-57b-a14b"), 57.4e9, "Qwen2-57B-A14B model card: 57B total", 2 * 28 * 4 * 128 * 2),
    "qwen3-8b": (_config("qwen3-8b"), 8.2e9, "Qwen3-8B model card: 8.2B", 2 * 36 * 8 * 128 * 2),
    "qwen3-30b-a3b": (_config("qwen3-30b-a3b"), 30.5e9, "Qwen3-30B-A3B model card", 2 * 48 * 4 * 128 * 2),
    "mistral-7b-v0.1": (_config("mistral-7b-v0.1"), 7.24e9, "mistralai/Mistral-7B-v0.1: 7.24B", 2 * 32 * 8 * 128 * 2),
    "mixtral-8x7b": (_config("mixtral-8x7b"), 46.7e9, "Mixtral of experts: 46.7B", 2 * 32 * 8 * 128 * 2),
    "gemma-2-9b": (_config("gemma-2-9b"), 9.24e9, "google/gemma-2-9b: 9.24B (tied embeddings)", 2 * 42 * 8 * 256 * 2),
    "gemma-3-27b": (
        _config("gemma-3-27b"),
        27.4e9,
        "google/gemma-3-27b-it: 27.4B with the vision tower",
        2 * 62 * 16 * 128 * 2,
    ),
    "phi-3-mini": (_config("phi-3-mini"), 3.82e9, "microsoft/Phi-3-mini-4k-instruct: 3.82B", 2 * 32 * 32 * 96 * 2),
    "phi-4": (_config("phi-4"), 14.7e9, "microsoft/phi-4: 14.7B", 2 * 40 * 10 * 128 * 2),
    "deepseek-v2": (DEEPSEEK_V2, 236e9, "DeepSeek-V2 model card: 236B total", 60 * 576 * 2),
    "deepseek-v2-lite": (
        {
            **DEEPSEEK_V2,
            "hidden_size": 2048,
            "num_hidden_layers": 27,
            "num_attention_heads": 16,
            "num_key_value_heads": 16,
            "q_lora_rank": None,
            "intermediate_size": 10944,
            "moe_intermediate_size": 1408,
            "n_routed_experts": 64,
            "n_shared_experts": 2,
        },
        15.7e9,
        "DeepSeek-V2-Lite model card: 15.7B total",
        27 * 576 * 2,
    ),
    "deepseek-v3": (_config("deepseek-v3"), 671e9, "DeepSeek-V3 report: 671B", 61 * 576 * 2),
    "kimi-k2": (
        {
            **_config("deepseek-v3"),
            "num_attention_heads": 64,
            "num_key_value_heads": 64,
            "n_routed_experts": 384,
            "first_k_dense_replace": 1,
            "vocab_size": 163840,
            "quantization_config": None,
        },
        1.03e12,
        "moonshotai/Kimi-K2-Instruct safetensors: 1.03T",
        61 * 576 * 2,
    ),
    "glm-4.5": (_config("glm-4.5"), 355e9, "GLM-4.5 model card: 355B total", 2 * 92 * 8 * 128 * 2),
    "gpt-oss-120b": (_config("gpt-oss-120b"), 116.8e9, "gpt-oss model card: 116.8B", 2 * 36 * 8 * 64 * 2),
    "ernie-4.5-21b-a3b": (
        _config("ernie-4.5-21b-a3b"),
        21.8e9,
        "haimaker.ai/models/baidu/ernie-4.5-21b-a3b: 21.8B (Baidu's card rounds it to 21B)",
        2 * 28 * 4 * 128 * 2,
    ),
}


@pytest.mark.parametrize("key", sorted(FAMILIES))
def test_family_params_match_the_published_total(key: str) -> None:
    config, total, _source, _kv = FAMILIES[key]
    assert count_params(parse_config(config, key=key)).total == pytest.approx(total, rel=0.01)


@pytest.mark.parametrize("key", sorted(FAMILIES))
def test_family_kv_bytes_per_token(key: str) -> None:
    config, _total, _source, kv_bytes = FAMILIES[key]
    spec = parse_config(config, key=key)
    assert kv_bytes_per_token_layer(spec, "bf16", 1) * spec.num_layers == kv_bytes
    assert not any("not one the planner is tested on" in note for note in spec.notes)


def test_sliding_windows_from_each_familys_convention() -> None:
    def windowed(key: str) -> list[int]:
        spec = parse_config(FAMILIES[key][0], key=key)
        return [i for i in range(spec.num_layers) if spec.kv_window(i)]

    assert windowed("mistral-7b-v0.1") == list(range(32))  # every layer, 4096
    assert windowed("phi-3-mini") == list(range(32))
    assert windowed("gemma-2-9b") == list(range(0, 42, 2))  # even layers slide
    assert len(windowed("gemma-3-27b")) == 52  # 5 local : 1 global
    assert 5 not in windowed("gemma-3-27b")
    assert windowed("gpt-oss-120b") == list(range(0, 36, 2))
    assert windowed("qwen2.5-7b") == windowed("phi-4") == []  # use_sliding_window false / no window
    assert len(windowed("llama-4-scout")) == 36  # chunked attention on 3 of every 4 layers
    qwen_swa = parse_config({**FAMILIES["qwen2.5-7b"][0], "use_sliding_window": True, "max_window_layers": 20})
    assert [i for i in range(28) if qwen_swa.kv_window(i)] == list(range(20, 28))


@pytest.mark.parametrize(
    ("quantization", "precision", "bits"),
    [
        ({"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": True}, "w4a16", 4.156),
        ({"quant_method": "gptq", "bits": 4, "group_size": 128, "sym": True}, "w4a16", 4.125),
        ({"quant_method": "fp8", "activation_scheme": "dynamic", "weight_block_size": [128, 128]}, "fp8", 8.002),
        ({"quant_method": "mxfp4"}, "mxfp4", 4.25),
        (
            {
                "quant_method": "compressed-tensors",
                "format": "int-quantized",
                "config_groups": {
                    "group_0": {
                        "weights": {"num_bits": 8, "type": "int", "strategy": "channel"},
                        "input_activations": {"num_bits": 8, "type": "int"},
                    }
                },
            },
            "w8a8",
            8.0,
        ),
        (
            {
                "quant_method": "compressed-tensors",
                "format": "pack-quantized",
                "config_groups": {
                    "group_0": {
                        "weights": {"num_bits": 4, "type": "int", "group_size": 32, "symmetric": True},
                        "input_activations": None,
                    }
                },
            },
            "w4a16",
            4.5,
        ),
        (
            {
                "quant_method": "compressed-tensors",
                "format": "float-quantized",
                "config_groups": {
                    "group_0": {
                        "weights": {"num_bits": 8, "type": "float"},
                        "input_activations": {"num_bits": 8, "type": "float"},
                    }
                },
            },
            "fp8",
            8.002,
        ),
    ],
)
def test_precision_is_inferred_from_quantization_config(quantization: dict, precision: str, bits: float) -> None:
    config = {**FAMILIES["llama-3.1-8b"][0], "quantization_config": quantization}
    result = plan(PlanRequest(model=config, precision="auto", gpu="h100-80g", tp=1, pp=1, dp=1, max_model_len=8192))
    assert result.precision.key == precision
    assert result.precision.bits_per_weight == pytest.approx(bits, abs=0.001)


def test_ignored_modules_stay_bf16() -> None:
    quantization = {
        "quant_method": "compressed-tensors",
        "config_groups": {"g": {"weights": {"num_bits": 4, "type": "int", "group_size": 32}}},
        "ignore": ["lm_head", "re:.*self_attn.*", "re:.*shared_experts.*"],
    }
    config = {**FAMILIES["kimi-k2"][0], "quantization_config": quantization}
    spec = parse_config(config)
    assert spec.checkpoint_precision == "w4a16"
    assert spec.checkpoint_group_size == 32
    assert set(spec.checkpoint_keep_bf16) == {"attention", "shared_experts"}


def test_unknown_architecture_with_standard_fields_plans_with_a_note() -> None:
    config = {**FAMILIES["llama-3.1-8b"][0], "architectures": ["SomeNewForCausalLM"]}
    result = plan(PlanRequest(model=config, precision="bf16", gpu="h100-80g", max_model_len=8192))
    assert result.params.total == pytest.approx(8.03e9, rel=0.01)
    assert any("SomeNewForCausalLM is not one the planner is tested on" in note for note in result.notes)


@pytest.mark.parametrize("missing", ["hidden_size", "num_hidden_layers", "vocab_size", "intermediate_size"])
def test_a_missing_field_is_one_line_naming_it(missing: str) -> None:
    config = {k: v for k, v in FAMILIES["llama-3.1-8b"][0].items() if k != missing}
    with pytest.raises(ValueError, match=rf"^config\.{missing}: missing") as error:
        parse_config(config)
    assert "\n" not in str(error.value)


def test_linear_attention_layers_are_refused_by_name() -> None:
    config = {**FAMILIES["qwen3-8b"][0], "layer_types": ["linear_attention", "full_attention"] * 18}
    with pytest.raises(ValueError, match=r"config\.layer_types: linear_attention"):
        parse_config(config)


def test_ernie_names_its_moe_layers_by_range_and_interval() -> None:
    """ERNIE 4.5 routes layer i when start <= i <= end and (i + 1) % interval == 0, with moe_k experts a
    token and moe_num_shared_experts shared ones: before the planner read these names, the model was
    refused (no top-k) and, given one, planned 28 MoE layers without shared experts."""
    spec = parse_config(_config("ernie-4.5-21b-a3b"))
    assert [i for i in range(spec.num_layers) if not spec.is_moe_layer(i)] == [0]
    assert (spec.experts_per_token, spec.n_shared_experts, spec.dense_intermediate_size) == (6, 2, 12288)
    assert count_params(spec).active_per_token == pytest.approx(3.0e9, rel=0.15)  # "3B activated"
    # An interval above 1 counts from layer 0, not from the start index (Ernie4_5_MoeModel).
    every_other = parse_config({**_config("ernie-4.5-21b-a3b"), "moe_layer_interval": 2, "moe_layer_end_index": 20})
    assert [i for i in range(28) if every_other.is_moe_layer(i)] == list(range(1, 21, 2))
    with pytest.raises(ValueError, match=r"config\.moe_layer_start_index"):
        parse_config({**_config("ernie-4.5-21b-a3b"), "moe_layer_start_index": [1, 1]})


@pytest.mark.parametrize(
    ("patch", "field"),
    [
        ({"moe_layer_interval": 0}, "moe_layer_interval"),
        ({"moe_layer_start_index": 20, "moe_layer_end_index": 5}, "moe_layer_start_index"),
        ({"moe_layer_interval": 100}, "moe_layer_start_index"),
        ({"moe_layer_end_index": -1.0}, "moe_layer_end_index"),
        ({"moe_layer_end_index": -2}, "moe_layer_end_index"),
        ({"first_k_dense_replace": 3}, "first_k_dense_replace"),
        ({"moe_layer_start_index": True}, "moe_layer_start_index"),
    ],
)
def test_ernie_layer_fields_that_plan_no_model_are_refused_by_name(patch: dict[str, Any], field: str) -> None:
    """A reviewer's cases: each planned silently before (interval 0 as 1, no routed layer as a dense 3.35B
    model, -1.0 as the last layer, DeepSeek's first_k_dense_replace dropped without a word)."""
    with pytest.raises(ValueError, match=rf"^config\.{field}"):
        parse_config({**_config("ernie-4.5-21b-a3b"), **patch})


def test_ernie_end_or_interval_alone_counts_from_transformers_default_start() -> None:
    config = {k: v for k, v in _config("ernie-4.5-21b-a3b").items() if k != "moe_layer_start_index"}
    spec = parse_config({**config, "moe_layer_end_index": 13})
    assert [i for i in range(28) if spec.is_moe_layer(i)] == list(range(1, 14))
