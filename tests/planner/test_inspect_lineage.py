"""A quantized derivative may name any artifact as its parent (issue 42): the two inspection reports are
compared (architecture, dimensions, tensor names and shapes modulo quantization packing), so a fake
parent is found. Also what the artifact page lists per file: each safetensors file's dtypes and shapes."""

from __future__ import annotations

from pathlib import Path

from planner.inspectjob import inspect_checkpoint
from planner.inspectjob.compare import compare_with_parent
from tests.planner import inspect_checkpoints as ckpt


def _report(root: Path) -> dict:
    return inspect_checkpoint(root, hash_files=False).to_json()


def test_each_quantized_layout_matches_its_bf16_baseline(tmp_path: Path) -> None:
    parent = _report(ckpt.bf16(tmp_path / "bf16"))
    for name, make in (("w4a16", ckpt.w4a16), ("fp8", ckpt.fp8), ("gptq", ckpt.gptq), ("nvfp4", ckpt.nvfp4_modelopt)):
        child = _report(make(tmp_path / name))
        comparison = compare_with_parent(child, parent)
        assert comparison.comparable, name
        assert comparison.differences == (), (name, comparison.differences)
        assert comparison.matches, name


def test_another_models_weights_are_not_its_parent(tmp_path: Path) -> None:
    """Same architecture class, another size: the dimensions and the tensor shapes say so, by name."""
    child = _report(ckpt.w4a16(tmp_path / "w4a16"))
    wider = _report(ckpt.bf16(tmp_path / "wider", hidden_size=96))
    deeper = _report(ckpt.bf16(tmp_path / "deeper", num_hidden_layers=3, architectures=["MistralForCausalLM"]))

    by_dimension = compare_with_parent(child, wider)
    assert not by_dimension.matches
    assert any("hidden_size 64" in d and "96" in d for d in by_dimension.differences), by_dimension.differences

    by_config = compare_with_parent(child, deeper)
    assert any("architectures" in d and "MistralForCausalLM" in d for d in by_config.differences)
    assert any("num_hidden_layers" in d for d in by_config.differences)


def test_tensors_that_differ_are_found_even_when_the_configs_agree(tmp_path: Path) -> None:
    """A config.json can be copied from the claimed parent; the stored tensors cannot lie about their names."""
    child = _report(ckpt.w4a16(tmp_path / "w4a16"))
    parent_root = ckpt.bf16(tmp_path / "bf16")
    import torch
    from safetensors.torch import load_file, save_file

    tensors = load_file(str(parent_root / "model.safetensors"))
    tensors["model.layers.1.mlp.gate_proj.weight"] = torch.zeros(256, 64, dtype=torch.bfloat16)  # another width
    save_file(tensors, str(parent_root / "model.safetensors"), metadata={"format": "pt"})

    comparison = compare_with_parent(child, _report(parent_root))

    assert not comparison.matches
    assert any("tensor shapes" in d for d in comparison.differences), comparison.differences

    del tensors["model.layers.1.mlp.gate_proj.weight"]
    save_file(tensors, str(parent_root / "model.safetensors"), metadata={"format": "pt"})
    names = compare_with_parent(child, _report(parent_root))
    assert any("tensor names" in d for d in names.differences), names.differences


def test_reports_without_structure_are_not_comparable(tmp_path: Path) -> None:
    """A report stored before the structure was read (or no config and no safetensors): no verdict,
    never a silent match."""
    child = _report(ckpt.w4a16(tmp_path / "w4a16"))
    old = {"format": child["format"], "precision": child["precision"], "config": None}
    comparison = compare_with_parent(child, old)
    assert not comparison.comparable
    assert not comparison.matches


def test_each_safetensors_file_is_summarised_by_dtype_and_shape(tmp_path: Path) -> None:
    report = _report(ckpt.write(tmp_path / "m", ckpt._linears(ckpt._packed), ckpt.base_config(), shards=2))
    files = {entry["path"]: entry for entry in report["safetensors"]}
    assert set(files) == {"model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"}
    total = sum(entry["tensors"] for entry in files.values())
    assert total == report["tensors"]["count"]
    first = files["model-00001-of-00002.safetensors"]
    assert set(first["dtypes"]) <= {"BF16", "I32", "I64"}
    assert sum(d["tensors"] for d in first["dtypes"].values()) == first["tensors"]
    assert first["largest"]["shape"]
    assert first["largest"]["dtype"]
    assert report["config"]["dimensions"]["hidden_size"] == ckpt.HIDDEN
    assert report["structure"]["tensors"] > 0
