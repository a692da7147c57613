"""Golden figures: parameter totals against each model's published total (within 1%), each cited
in planner/catalog/models.yaml (`published.source`); bits per weight of each scheme."""

import pytest

from planner import specs
from planner.params import count_params

ACTIVE = {
    # MoE key: (active per token, source); totals are cited per model in the catalog (`published`).
    "deepseek-v3": (37e9, "DeepSeek-V3 technical report: 37B activated"),
    "kimi-k2": (32e9, "Kimi K2 model card: 32B activated"),
    "qwen3-235b-a22b": (22e9, "Qwen3-235B-A22B model card"),
    "qwen3-30b-a3b": (3.3e9, "Qwen3-30B-A3B model card"),
    "mixtral-8x7b": (12.9e9, "Mistral AI, Mixtral of experts"),
    "mixtral-8x22b": (39e9, "Mistral AI, Mixtral 8x22B announcement"),
    "llama-4-scout": (17e9, "Meta Llama 4 model card"),
    "llama-4-maverick": (17e9, "Meta Llama 4 model card"),
    "gpt-oss-120b": (5.1e9, "OpenAI gpt-oss model card"),
    "gpt-oss-20b": (3.6e9, "OpenAI gpt-oss model card"),
    "glm-4.5": (32e9, "GLM-4.5 model card"),
    "deepseek-v2-lite": (2.4e9, "DeepSeek-V2-Lite model card: 2.4B activated"),
}


def test_every_catalog_model_has_a_cited_golden_figure() -> None:
    for key, spec in specs.models().items():
        assert spec.published.get("total_params"), key
        assert spec.published.get("source"), key
        assert spec.is_moe == (key in ACTIVE), key
        assert spec.hf_repo, key


@pytest.mark.parametrize("key", sorted(specs.models()))
def test_total_params_within_1_percent_of_published(key: str) -> None:
    spec = specs.model(key)
    assert count_params(spec).total == pytest.approx(spec.published["total_params"], rel=0.01)


@pytest.mark.parametrize("key", sorted(ACTIVE))
def test_active_params_near_published(key: str) -> None:
    # Vendors count "active" differently (input embedding in or out, vision tower in or out):
    # we exclude the input embedding and include lm_head, so allow 10%.
    active, _source = ACTIVE[key]
    counted = count_params(specs.model(key))
    assert counted.active_per_token == pytest.approx(active, rel=0.10)
    assert counted.active_per_token < counted.total / 3  # MoE: far from all experts active


def test_moe_is_not_counted_as_dense() -> None:
    deepseek = count_params(specs.model("deepseek-v3"))
    routed = sum(layer.routed_experts for layer in deepseek.layers)
    assert routed / deepseek.total > 0.95
    assert sum(1 for layer in deepseek.layers if layer.routed_experts) == 58  # first 3 layers are dense
    maverick = specs.model("llama-4-maverick")
    assert maverick.moe_layers == 24  # MoE on every second layer


@pytest.mark.parametrize(
    ("key", "bits"),
    [("bf16", 16.0), ("fp8", 8.002), ("w8a8", 8.0), ("w4a16", 4.125), ("w4a8", 4.156), ("mxfp4", 4.25), ("nvfp4", 4.5)],
)
def test_bits_per_weight(key: str, bits: float) -> None:
    # planner reference: FP8 128x128 ~8.002, GPTQ g128 4.125, AWQ g128 + zero 4.156, MXFP4 4.25, NVFP4 4.5
    assert specs.precision(key).bits_per_weight == pytest.approx(bits, abs=0.001)


def test_int4_group_32_with_bf16_scale_is_4_5_bits() -> None:
    assert specs.precision("w4a16", group_size=32).bits_per_weight == pytest.approx(4.5)
    with pytest.raises(ValueError, match="group_size"):
        specs.precision("fp8", group_size=64)
    with pytest.raises(ValueError, match="power of two"):
        specs.precision("w4a8", group_size=100)
