"""The node's inspection reads a checkpoint's precision from config.json and the stored tensors, and the
tensors win where the two disagree (issue 42: a w4a16 derivative was approved as bf16)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from safetensors import safe_open

from planner.hf_config import describe_quantization
from planner.inspectjob import inspect_checkpoint
from planner.manifest import weights_digest
from tests.planner import inspect_checkpoints as ckpt

ROOT = Path(__file__).resolve().parents[2]
TINY = ROOT / "planner" / "tinylm"


def _codes(report: dict) -> set[str]:
    return {problem["code"] for problem in report["problems"]}


def test_bf16_checkpoint_reads_as_bf16_with_the_registered_digest(tmp_path: Path) -> None:
    root = ckpt.bf16(tmp_path / "m")
    report = inspect_checkpoint(root).to_json()
    assert report["weights_digest"] == weights_digest(root)
    assert report["manifest"].count("\n") == len(report["files"]) == 2
    assert {f["path"]: f["kind"] for f in report["files"]} == {"config.json": "config", "model.safetensors": "weights"}
    precision = report["precision"]
    assert (precision["key"], precision["method"], precision["agrees_with_tensors"]) == ("bf16", "none", True)
    assert precision["weight_bits"] == 16
    assert report["tensors"]["quantized_tensors"] == 0
    assert report["tensors"]["bf16_tensors"] == []
    assert "precision.disagrees" not in _codes(report)


def test_the_header_reads_what_the_safetensors_library_reads(tmp_path: Path) -> None:
    root = ckpt.fp8(tmp_path / "m")
    with safe_open(str(root / "model.safetensors"), framework="pt") as handle:
        expected: dict[str, int] = {}
        for name in handle.keys():  # noqa: SIM118  (safe_open has no __iter__)
            sliced = handle.get_slice(name)
            dtype = sliced.get_dtype()
            count = 1
            for size in sliced.get_shape():
                count *= size
            expected[dtype] = expected.get(dtype, 0) + count
        tensor_count = len(list(handle.keys()))
    tensors = inspect_checkpoint(root).to_json()["tensors"]
    assert tensors["parameters_by_dtype"] == expected
    assert tensors["count"] == tensor_count


def test_compressed_tensors_w4a16_reads_its_scheme(tmp_path: Path) -> None:
    report = inspect_checkpoint(ckpt.w4a16(tmp_path / "m")).to_json()
    precision = report["precision"]
    assert precision["key"] == "w4a16"
    assert precision["method"] == "compressed-tensors"
    assert (precision["weight_bits"], precision["activation_bits"]) == (4, 16)
    assert (precision["group_size"], precision["strategy"]) == (32, "group")
    assert precision["ignore"] == ["lm_head"]
    assert precision["summary"] == "w4a16 (compressed-tensors, group 32)"
    assert precision["agrees_with_tensors"] is True
    tensors = report["tensors"]
    assert tensors["quantized_tensors"] == ckpt.LAYERS * len(ckpt.PROJECTIONS)
    assert tensors["bf16_tensors"] == ["lm_head.weight"]  # the ignore list's module, kept in 16-bit
    assert tensors["parameters_by_dtype"]["I32"] > 0
    assert report["config"]["quantization_config"]["format"] == "pack-quantized"


def test_the_committed_tiny_derivatives_read_as_their_recipes() -> None:
    for name, key, bits in (("w4a16-rtn", "w4a16", 4), ("w2a16-rtn", "w2a16", 2)):
        root = TINY / "derivatives" / name
        registered = json.loads((TINY / "derivatives" / f"{name}.json").read_text())
        report = inspect_checkpoint(root).to_json()
        assert report["weights_digest"] == registered["manifest_digest"]
        assert (report["precision"]["key"], report["precision"]["weight_bits"]) == (key, bits)
        assert report["precision"]["agrees_with_tensors"] is True


def test_fp8_block_checkpoint(tmp_path: Path) -> None:
    report = inspect_checkpoint(ckpt.fp8(tmp_path / "m")).to_json()
    precision = report["precision"]
    assert (precision["key"], precision["method"], precision["strategy"]) == ("fp8", "fp8", "block")
    assert precision["summary"] == "fp8 (fp8, block 128x128)"
    assert precision["agrees_with_tensors"] is True
    assert report["tensors"]["parameters_by_dtype"]["F8_E4M3"] > 0
    assert report["tensors"]["linear_by_kind"]["fp8"] == ckpt.LAYERS * len(ckpt.PROJECTIONS)


def test_mxfp4_gpt_oss_layout(tmp_path: Path) -> None:
    report = inspect_checkpoint(ckpt.mxfp4(tmp_path / "m")).to_json()
    precision = report["precision"]
    assert (precision["key"], precision["method"], precision["group_size"]) == ("mxfp4", "mxfp4", 32)
    assert precision["agrees_with_tensors"] is True
    assert precision["ignore"] == ckpt.MXFP4["modules_to_not_convert"]
    assert report["tensors"]["linear_by_kind"]["mxfp4"] == 2 * ckpt.LAYERS
    assert "model.layers.0.self_attn.q_proj.weight" in report["tensors"]["bf16_tensors"]
    assert report["tensors"]["parameters_by_dtype"]["U8"] > 0


def test_modelopt_nvfp4_declared_in_hf_quant_config(tmp_path: Path) -> None:
    report = inspect_checkpoint(ckpt.nvfp4_modelopt(tmp_path / "m")).to_json()
    precision = report["precision"]
    assert (precision["key"], precision["method"], precision["group_size"]) == ("nvfp4", "modelopt", 16)
    assert precision["agrees_with_tensors"] is True
    assert report["config"]["quantization_config"] is None  # config.json's own, as written


@pytest.mark.parametrize(("method", "bits", "key"), [("gptq", 4, "w4a16"), ("awq", 4, "w4a16"), ("gptq", 8, "w8a8")])
def test_gptq_and_awq(tmp_path: Path, method: str, bits: int, key: str) -> None:
    precision = inspect_checkpoint(ckpt.gptq(tmp_path / "m", bits, method)).to_json()["precision"]
    assert (precision["key"], precision["method"], precision["weight_bits"]) == (key, method, bits)
    assert precision["activation_bits"] == 16  # weight-only, whatever planner key sizes it
    assert precision["agrees_with_tensors"] is True


def test_config_saying_w4a16_over_bf16_weights_reads_as_bf16(tmp_path: Path) -> None:
    root = ckpt.bf16(tmp_path / "m", quantization_config=ckpt.W4A16_CT)
    report = inspect_checkpoint(root).to_json()
    precision = report["precision"]
    assert precision["agrees_with_tensors"] is False
    assert (precision["key"], precision["declared_key"], precision["tensors_key"]) == ("bf16", "w4a16", "bf16")
    problem = next(p for p in report["problems"] if p["code"] == "precision.disagrees")
    assert problem["file"] == "config.json"
    assert "w4a16" in problem["message"]
    assert "BF16" in problem["message"]
    assert "model.safetensors" in problem["message"]


def test_packed_int4_weights_without_quantization_config_are_not_bf16(tmp_path: Path) -> None:
    root = ckpt.w4a16(tmp_path / "m", config=ckpt.base_config())  # torch_dtype bfloat16, no quantization_config
    report = inspect_checkpoint(root).to_json()
    precision = report["precision"]
    assert precision["agrees_with_tensors"] is False
    assert precision["declared_key"] == "bf16"
    assert precision["key"] == "w4a16"
    assert precision["tensors_key"] is None  # packed integers do not say their bit width
    assert {"precision.disagrees", "precision.bits_inferred"} <= _codes(report)
    assert precision["summary"].startswith("w4a16 (read from the stored tensors; config.json declares")


def test_fp8_weights_under_a_bf16_config_read_as_fp8(tmp_path: Path) -> None:
    report = inspect_checkpoint(ckpt.fp8(tmp_path / "m", config=ckpt.base_config())).to_json()
    precision = report["precision"]
    assert (precision["key"], precision["tensors_key"], precision["agrees_with_tensors"]) == ("fp8", "fp8", False)
    assert "F8_E4M3" in next(p for p in report["problems"] if p["code"] == "precision.disagrees")["message"]


def test_sharded_checkpoint_counts_the_indexed_shards(tmp_path: Path) -> None:
    root = tmp_path / "m"
    single = inspect_checkpoint(ckpt.w4a16(tmp_path / "one")).to_json()["tensors"]
    ckpt.write(root, ckpt._linears(ckpt._packed), ckpt.base_config(quantization_config=ckpt.W4A16_CT), shards=3)
    report = inspect_checkpoint(root).to_json()
    assert report["tensors"]["count"] == single["count"]
    assert report["tensors"]["parameters_by_dtype"] == single["parameters_by_dtype"]
    assert len(report["tensors"]["files_read"]) == 3
    assert report["precision"]["key"] == "w4a16"
    assert not {"index.count", "index.missing_shard"} & _codes(report)


def test_describe_quantization_compressed_tensors_w4a8_and_fp8() -> None:
    w4a8 = json.loads(json.dumps(ckpt.W4A16_CT))
    w4a8["config_groups"]["group_0"]["input_activations"] = {"num_bits": 8, "type": "int", "strategy": "token"}
    facts = describe_quantization({"quantization_config": w4a8})
    assert facts is not None
    assert (facts["key"], facts["weight_bits"], facts["activation_bits"]) == ("w4a8", 4, 8)
    fp8 = {
        "quant_method": "compressed-tensors",
        "format": "float-quantized",
        "config_groups": {
            "g": {
                "weights": {"num_bits": 8, "type": "float", "strategy": "channel"},
                "input_activations": {"num_bits": 8, "type": "float", "dynamic": True},
            }
        },
    }
    facts = describe_quantization({"quantization_config": fp8})
    assert facts is not None
    assert (facts["key"], facts["strategy"], facts["tensor_kinds"]) == ("fp8", "channel", frozenset({"fp8"}))
    assert describe_quantization({"torch_dtype": "bfloat16"}) is None


def test_compressed_tensors_mxfp4_is_mxfp4_not_nvfp4(tmp_path: Path) -> None:
    """llm-compressor's MXFP4 preset (format mxfp4-pack-quantized: FP4 values packed in U8, a U8 E8M0
    scale per 32) was read as nvfp4 by the planner's config reader, so the tensors disagreed with it."""
    import torch

    def make(name: str, out: int, inp: int) -> dict[str, torch.Tensor]:
        return {
            f"{name}.weight_packed": torch.zeros(out, inp // 2, dtype=torch.uint8),
            f"{name}.weight_scale": torch.zeros(out, inp // 32, dtype=torch.uint8),
        }

    weights = {"num_bits": 4, "type": "float", "group_size": 32, "strategy": "group", "symmetric": True}
    qc = {
        "quant_method": "compressed-tensors",
        "format": "mxfp4-pack-quantized",
        "config_groups": {"group_0": {"targets": ["Linear"], "weights": weights, "format": "mxfp4-pack-quantized"}},
        "ignore": ["lm_head"],
    }
    root = ckpt.write(tmp_path / "m", ckpt._linears(make), ckpt.base_config(quantization_config=qc))
    precision = inspect_checkpoint(root).to_json()["precision"]
    assert (precision["key"], precision["declared_key"], precision["group_size"]) == ("mxfp4", "mxfp4", 32)
    assert precision["agrees_with_tensors"] is True


def test_an_unrecognised_quantized_layout_has_no_key(tmp_path: Path) -> None:
    """I32 `.weight` tensors are quantized in no layout the inspection knows: no key, never the bf16 declared."""
    import torch

    tensors = ckpt._linears(lambda n, o, i: {f"{n}.weight": torch.zeros(o, i, dtype=torch.int32)})
    report = inspect_checkpoint(ckpt.write(tmp_path / "m", tensors, ckpt.base_config())).to_json()
    precision = report["precision"]
    assert (precision["key"], precision["agrees_with_tensors"]) == (None, False)
    assert precision["summary"].startswith("unknown precision (read from the stored tensors")
    assert "precision.disagrees" in _codes(report)


def test_a_method_the_planner_does_not_model_is_read_from_the_tensors(tmp_path: Path) -> None:
    config = ckpt.base_config(quantization_config={"quant_method": "hqq", "nbits": 4})
    report = inspect_checkpoint(ckpt.w4a16(tmp_path / "m", config=config)).to_json()
    precision = report["precision"]
    assert (precision["key"], precision["declared_key"], precision["method"]) == ("w4a16", None, "hqq")
    assert "precision.unknown_method" in _codes(report)
