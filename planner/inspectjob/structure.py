"""What a checkpoint is built of, independent of how its weights are stored: each tensor's name and
shape with quantization packing taken out, so a quantized derivative and the BF16 checkpoint it was
made from read alike, and another model's weights do not (issue 42: a derivative may name any
artifact as its parent; planner.inspectjob.compare checks the claim).

Packing changes the names (`weight_packed`, `qweight`, `*_blocks`), adds scales and zero points, and
shrinks the input dimension by the bit width (which the header does not carry); so a linear weight is
known by its name and its output dimension, every other tensor (norms, embeddings, biases) by its
whole shape. The report carries digests of the sorted list, not the list (a large MoE has 100k tensors).
"""

from __future__ import annotations

import hashlib
from typing import Any

from planner.inspectjob.report import Structure
from planner.inspectjob.safetensors_header import TensorInfo

# What quantization adds beside a weight: scales, zero points, the logical shape, activation order.
_AUXILIARY = (
    "_scale",
    "_scale_2",
    "_scale_inv",
    "_scales",
    "_zero_point",
    "_shape",
    "_g_idx",
    "_global_scale",
    ".scales",
    ".qzeros",
    ".g_idx",
)
_EMBEDDING = ("embed", "wte", "wpe", "word_embeddings", "tok_embeddings", "position_embeddings")


def canonical_tensor(name: str, info: TensorInfo) -> tuple[str, tuple[int, ...]] | None:
    """(the tensor's name as the unquantized checkpoint has it, the dimensions packing leaves alone),
    or None for a tensor only quantization adds."""
    if name.endswith(_AUXILIARY):
        return None
    shape = info.shape
    if name.endswith(".weight_packed"):  # compressed-tensors: [out, in / values per int]
        return name[: -len("_packed")], shape[:1]
    if name.endswith(".qweight"):  # GPTQ / AWQ: [in / values per int, out]
        return name[: -len("qweight")] + "weight", shape[-1:]
    if name.endswith("_blocks"):  # MXFP4 experts: [experts, rows, blocks, bytes]
        return name[: -len("_blocks")], shape[:1]
    linear = name.endswith(".weight") and not any(part in name for part in _EMBEDDING)
    fused_experts = ".experts." in name and not name.endswith(("_bias", ".bias"))
    if len(shape) >= 2 and (linear or fused_experts):  # FP8 / NVFP4 / int8 keep the name, not the input width
        return name, shape[:1]
    return name, shape


def structure_of(entries: list[tuple[str, tuple[int, ...]]]) -> Structure:
    """Pure: the digests of the canonical (name, dims) of every tensor counted."""
    ordered = sorted(entries)
    names = "".join(f"{name}\n" for name, _ in ordered)
    shapes = "".join(f"{name} {'x'.join(map(str, dims))}\n" for name, dims in ordered)
    return Structure(
        tensors=len(ordered),
        names_sha256="sha256:" + hashlib.sha256(names.encode("utf-8", "surrogatepass")).hexdigest(),
        shapes_sha256="sha256:" + hashlib.sha256(shapes.encode("utf-8", "surrogatepass")).hexdigest(),
    )


# config.json's sizes that tell one model from another (a multimodal model's in its text_config).
DIMENSIONS = (
    "hidden_size",
    "num_hidden_layers",
    "vocab_size",
    "intermediate_size",
    "num_attention_heads",
    "num_key_value_heads",
    "num_local_experts",
    "n_routed_experts",
    "num_experts",
    "moe_intermediate_size",
)


def config_dimensions(config: dict[str, Any]) -> dict[str, int]:
    text = config.get("text_config")
    source = text if isinstance(text, dict) and "hidden_size" not in config else config
    return {name: source[name] for name in DIMENSIONS if type(source.get(name)) is int}
