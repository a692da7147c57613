"""2-bit weights (the quantize job's W2A16 recipes: int2, one BF16 scale per 128 weights). The planner
sizes them at 2.125 bits per weight, and says that no engine it plans for has a kernel for them rather
than planning a launch command that would not start."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from planner import specs
from planner.hf_config import infer_precision
from planner.memory import weights_total_bytes
from planner.plan import PlanRequest, PlanSetup, plan

CHECKPOINT = Path(__file__).resolve().parents[2] / "planner" / "tinylm" / "checkpoint"
# The quantization_config the quantize job's W2A16 recipes write (compressed-tensors 0.19.0).
W2A16_CONFIG: dict[str, Any] = {
    "quant_method": "compressed-tensors",
    "format": "pack-quantized",
    "config_groups": {
        "group_0": {
            "targets": ["Linear"],
            "weights": {"num_bits": 2, "type": "int", "symmetric": True, "strategy": "group", "group_size": 128},
        }
    },
    "ignore": ["lm_head"],
}


def _weights(precision: str) -> int:
    setup = PlanSetup.resolve(PlanRequest(model="llama-3.1-8b", precision=precision, gpu="h100-80g"))
    return weights_total_bytes(setup.params, setup.model, setup.precision, setup.keep_bf16)


def test_w2a16_is_2_bits_plus_a_bf16_scale_per_128_weights() -> None:
    assert specs.precision("w2a16").bits_per_weight == pytest.approx(2.125)
    assert specs.precision("w2a16", group_size=64).bits_per_weight == pytest.approx(2.25)


def test_w2a16_weights_are_smaller_than_w4a16_by_the_bits_of_the_quantized_layers() -> None:
    bf16, w4, w2 = _weights("bf16"), _weights("w4a16"), _weights("w2a16")
    assert w2 < w4 < bf16
    # what differs is only the quantized layers: 2 bits of every 4.125 (embeddings, lm_head stay BF16)
    quantized_w4 = (bf16 - w4) / (1 - 4.125 / 16)
    assert w4 - w2 == pytest.approx(quantized_w4 * 2 / 16, rel=1e-6)


def test_a_2_bit_checkpoint_is_read_as_w2a16_not_bf16() -> None:
    inferred = infer_precision({"quantization_config": W2A16_CONFIG})
    assert inferred is not None
    assert (inferred["precision"], inferred["group_size"]) == ("w2a16", 128)
    assert "BF16" not in inferred["note"]


@pytest.mark.parametrize("engine", ["vllm", "sglang", "trtllm"])
def test_no_engine_serves_2_bit_weights_and_the_plan_says_so_naming_the_field(engine: str) -> None:
    with pytest.raises(ValueError, match=r"^precision: w2a16") as refused:
        plan(PlanRequest(model="llama-3.1-8b", precision="w2a16", gpu="h100-80g", engine=engine))
    message = str(refused.value)
    assert "none of vllm, sglang, trtllm" in message
    assert "2-bit weight kernel" in message
    assert "2.125 bits/weight" in message  # what it would take is still stated


def test_a_2_bit_derivative_planned_as_it_is_is_refused_not_planned_as_bf16() -> None:
    config = json.loads((CHECKPOINT / "config.json").read_text())
    config["quantization_config"] = copy.deepcopy(W2A16_CONFIG)
    with pytest.raises(ValueError, match=r"^precision: w2a16"):
        plan(PlanRequest(model=config, precision="auto", gpu="h100-80g"))


def test_a_catalog_engine_list_names_only_engines_the_planner_knows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "precisions.yaml").write_text(
        "w2a16: {weight_bits: 2, scale_bits: 16, zero_bits: 0, group_size: 128, compute: bf16, activation_bits: 16,"
        " vllm_quantization: null, engines: [vllm, tensorrt]}\n"
    )
    monkeypatch.setattr(specs, "CATALOG_DIR", tmp_path)
    with pytest.raises(ValueError, match=r"precision 'w2a16': engines \['tensorrt'\] are not among vllm"):
        specs.precisions.__wrapped__()
