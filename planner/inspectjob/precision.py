"""The artifact's precision: what config.json declares (planner.hf_config reads it: one home for the
formats) checked against the kinds of linear weight the safetensors headers actually store.

Where the two disagree the tensors decide the key when they are unambiguous (every linear weight in
one 16-bit dtype; FP8; FP4 blocks). Packed integers do not carry their bit width in the header (an I32
holds eight 4-bit or sixteen 2-bit values), so packed weights without a matching declaration are read
as w4a16, the most common, and the problem says so: never bf16.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

from planner.hf_config import describe_quantization, unquantized_precision
from planner.inspectjob.report import InspectLimits, Precision, Problem
from planner.inspectjob.safetensors_header import TensorInfo

SIXTEEN_BIT = {"BF16": "bf16", "F16": "fp16", "F32": "fp32"}
UNQUANTIZED_KINDS = frozenset(SIXTEEN_BIT.values())
KIND_WORDS = {
    "bf16": "BF16",
    "fp16": "FP16",
    "fp32": "FP32",
    "int_packed": "packed integers (I32 weight_packed / qweight)",
    "int8": "8-bit integers (I8)",
    "fp8": "FP8 (F8_E4M3 / F8_E5M2)",
    "mxfp4": "MXFP4 blocks (U8 *_blocks with E8M0 scales)",
    "nvfp4": "NVFP4 (U8 packed with FP8 scales)",
    "other": "an unrecognised quantized layout",
}
TENSORS_KEY = {"fp8": "fp8", "mxfp4": "mxfp4", "nvfp4": "nvfp4", "int_packed": "w4a16", "int8": "w8a8"}
UNAMBIGUOUS = frozenset({"fp8", "mxfp4", "nvfp4"})
KEY_BITS = {"bf16": (16, 16), "fp16": (16, 16), "fp32": (32, 32)}
_EMBEDDING = ("embed", "wte", "wpe", "word_embeddings", "tok_embeddings", "position_embeddings")
_FUSED_EXPERTS = re.compile(r"experts\.(?:gate_up_proj|down_proj|gate_proj|up_proj)$")
_PACKED_SUFFIX = ".weight_packed"


def _scale_dtype(name: str, tensors: dict[str, TensorInfo]) -> str | None:
    scale = tensors.get(name + "_scale")
    return scale.dtype if scale else None


def weight_kind(name: str, info: TensorInfo, tensors: dict[str, TensorInfo]) -> str | None:
    """The stored kind of a linear weight (bf16, fp16, fp32, int_packed, int8, fp8, mxfp4, nvfp4, other),
    None for any other tensor (norms, biases, scales, zero points, embeddings). `tensors` is the rest of the
    same file's header, for the scale beside a packed FP4 weight."""
    dtype = info.dtype
    if name.endswith(_PACKED_SUFFIX):  # compressed-tensors pack-quantized / nvfp4-pack-quantized
        if dtype == "I32":
            return "int_packed"
        scale = _scale_dtype(name[: -len("_packed")], tensors)
        return "mxfp4" if scale in ("U8", "F8_E8M0") else "nvfp4" if dtype == "U8" else "other"
    if name.endswith(".qweight"):  # GPTQ, AWQ
        return "int_packed" if dtype == "I32" else "other"
    if name.endswith("_blocks") and dtype == "U8":  # gpt-oss experts
        return "mxfp4"
    linear = name.endswith(".weight") and not any(part in name for part in _EMBEDDING)
    if not (linear or _FUSED_EXPERTS.search(name)) or len(info.shape) < 2:
        return None
    if dtype in SIXTEEN_BIT:
        return SIXTEEN_BIT[dtype]
    if dtype in ("F8_E4M3", "F8_E5M2"):
        return "fp8"
    if dtype == "I8":
        return "int8"
    if dtype == "U8" and _scale_dtype(name, tensors) == "F8_E4M3":  # ModelOpt NVFP4
        return "nvfp4"
    return "other"


def _describe_kinds(kinds: Counter[str]) -> str:
    return "; ".join(f"{count:,} in {KIND_WORDS.get(kind, kind)}" for kind, count in kinds.most_common())


def _detail(group_size: Any, strategy: Any, block: Any) -> str:
    if isinstance(block, list) and block:
        return "block " + "x".join(map(str, block))
    if isinstance(group_size, int) and group_size > 0:
        return f"group {group_size}"
    if strategy in ("channel", "tensor", "token"):
        return f"per {strategy}"
    return ""


def _bits(key: str | None) -> tuple[int | None, int | None]:
    if key is None:
        return None, None
    if key in KEY_BITS:
        return KEY_BITS[key]
    from planner.specs import precisions

    spec = precisions().get(key)
    return (spec.weight_bits, spec.activation_bits) if spec else (None, None)


def decide(
    config: dict[str, Any] | None,
    kinds: Counter[str],
    examples: dict[str, tuple[str, str]],
    limits: InspectLimits,
) -> tuple[Precision, list[Problem]]:
    """`kinds`: linear weights per stored kind over the counted shards (empty: no safetensors read);
    `examples`: one (file, tensor) per kind, named in the problem."""
    declared = describe_quantization(config) if config else None
    sixteen_declared = unquantized_precision(config) if config else None
    quantized = Counter({k: n for k, n in kinds.items() if k not in UNQUANTIZED_KINDS})
    sixteen = Counter({k: n for k, n in kinds.items() if k in UNQUANTIZED_KINDS})
    found: list[Problem] = []  # reported at the top level too

    tensors_key, guess = _what_the_tensors_say(quantized, sixteen)
    declared_key = declared["key"] if declared else sixteen_declared
    declared_text = _declared_text(declared, sixteen_declared)
    agrees = _agrees(declared, sixteen_declared, kinds, quantized, guess)
    if kinds and declared is not None and declared["key"] is None:  # the tensors tell what they can
        message = f"quantization method {declared['method']!r} is not one the planner models: read from the tensors"
        found.append(Problem("config.json", "precision.unknown_method", message))

    if agrees:
        key = declared_key if declared_key is not None else guess
    else:
        key = guess  # None for an unrecognised layout: no precision the service could accept
        main_kind = (quantized or sixteen).most_common(1)[0][0]
        file, name = examples.get(main_kind, ("", ""))
        evidence = f" (e.g. {name} in {file})" if name else ""
        message = (
            f"config.json declares {declared_text}, but the stored linear weights are "
            f"{_describe_kinds(kinds)}{evidence}: read as {key or 'no precision the planner knows'}"
        )
        found.append(Problem("config.json", "precision.disagrees", message))
        if quantized and main_kind not in UNAMBIGUOUS:
            found.append(
                Problem(
                    file or "config.json",
                    "precision.bits_inferred",
                    f"{KIND_WORDS[main_kind]} do not carry their bit width: read as {key}, the most common",
                )
            )

    if agrees and declared is not None and declared["key"] is not None:
        method = declared["method"]
        weight_bits, activation_bits = declared["weight_bits"], declared["activation_bits"]
        if weight_bits is None:
            weight_bits, activation_bits = _bits(key)
        group_size, strategy = declared["group_size"], declared["strategy"]
        detail = _detail(group_size, strategy, declared["block_size"])
        summary = f"{key} ({', '.join(filter(None, (method, detail)))})"
        ignore = tuple(declared["ignore"][: limits.max_ignore_entries])
    else:
        method = "none" if key in UNQUANTIZED_KINDS else (declared["method"] if declared else "unknown")
        weight_bits, activation_bits = _bits(key)
        group_size, strategy, ignore = None, None, ()
        label = key or "unknown precision"
        if agrees:
            summary = f"{label} (unquantized)" if key in UNQUANTIZED_KINDS else label
        else:
            summary = f"{label} (read from the stored tensors; config.json declares {declared_text})"
    notes = [f"config.json: {declared['note']}"] if declared and declared.get("note") else []
    precision = Precision(
        key=key,
        method=method,
        weight_bits=weight_bits,
        activation_bits=activation_bits,
        group_size=group_size,
        strategy=strategy if isinstance(strategy, str) else None,
        ignore=ignore,
        summary=summary,
        agrees_with_tensors=agrees,
        declared_key=declared_key,
        tensors_key=tensors_key,
        problems=(*(problem.message for problem in found), *notes),
    )
    return precision, found


def _what_the_tensors_say(quantized: Counter[str], sixteen: Counter[str]) -> tuple[str | None, str | None]:
    """(the key the stored kinds give unambiguously, the key they most likely mean): packed integers give
    no key but are most likely w4a16; an unrecognised layout gives neither."""
    if quantized:
        main = quantized.most_common(1)[0][0]
        guess = TENSORS_KEY.get(main)
        return (guess if main in UNAMBIGUOUS else None), guess
    if sixteen:
        key = sixteen.most_common(1)[0][0]
        return key, key
    return None, None


def _agrees(
    declared: dict[str, Any] | None,
    sixteen_declared: str | None,
    kinds: Counter[str],
    quantized: Counter[str],
    guess: str | None,
) -> bool:
    """Every quantized kind stored is one the declared scheme produces; a 16-bit declaration: none is
    stored and the dominant dtype is the declared one. Nothing stored, or a method the planner does not
    model, contradicts nothing."""
    if not kinds:
        return True
    if declared is not None:
        return declared["key"] is None or (bool(quantized) and set(quantized) <= declared["tensor_kinds"])
    return not quantized and (sixteen_declared is None or guess == sixteen_declared)


def _declared_text(declared: dict[str, Any] | None, sixteen: str | None) -> str:
    if declared is None:
        return f"no quantization ({sixteen or 'no dtype'})"
    detail = _detail(declared["group_size"], declared["strategy"], declared["block_size"])
    return f"{declared['key'] or declared['method']} ({', '.join(filter(None, (declared['method'], detail)))})"
