"""Build a ModelSpec from any decoder's Hugging Face config.json, reading the standard fields.

Families the tests cover are listed in TESTED_ARCHITECTURES; any other architecture whose config
uses the standard fields (layers, hidden size, heads, MoE, MLA, sliding windows under their
common names) plans too, with a note saying the family was not tested. A missing field needed
for the count raises one ValueError line naming it.
"""

from __future__ import annotations

import re
from typing import Any

from planner.specs import ModelSpec, VisionSpec

TESTED_ARCHITECTURES = frozenset(
    {
        "LlamaForCausalLM",
        "Llama4ForConditionalGeneration",
        "Llama4ForCausalLM",
        "MistralForCausalLM",
        "MixtralForCausalLM",
        "Qwen2ForCausalLM",
        "Qwen2MoeForCausalLM",
        "Qwen3ForCausalLM",
        "Qwen3MoeForCausalLM",
        "Qwen3NextForCausalLM",
        "Gemma2ForCausalLM",
        "Gemma3ForCausalLM",
        "Gemma3ForConditionalGeneration",
        "Phi3ForCausalLM",
        "DeepseekV2ForCausalLM",
        "DeepseekV3ForCausalLM",
        "Glm4MoeForCausalLM",
        "GptOssForCausalLM",
        "Ernie4_5_MoeForCausalLM",
    }
)
# Layer kinds the KV model does not cover: refusing beats a confident wrong plan.
UNMODELLED_LAYER_TYPES = frozenset({"linear_attention", "mamba", "mamba2", "conv", "recurrent"})
_QK_NORM_FAMILIES = ("Qwen3", "Gemma3", "Olmo2")
_BIASED_QKV_FAMILIES = ("Qwen2",)  # Qwen2 / Qwen2.5 / Qwen2-MoE carry q/k/v biases without a config key
DECODER_SUFFIXES = ("ForCausalLM", "ForConditionalGeneration", "LMHeadModel")
_MISSING = object()

# Upper bounds of config fields, generous against every published model (the largest have ~128
# layers, 16k hidden size, 384 routed experts, a 10M context): a config beyond them is a mistake or
# an attack, and sizing it would take the planner minutes. Fields not listed are bounded by 2**31.
CONFIG_BOUNDS = {
    "num_hidden_layers": 1024,
    "hidden_size": 131_072,
    "vocab_size": 4_194_304,
    "num_attention_heads": 4096,
    "num_key_value_heads": 4096,
    "head_dim": 8192,
    "max_position_embeddings": 1 << 28,
    "n_routed_experts": 16_384,
    "num_experts_per_tok": 1024,
    "moe_intermediate_size": 1 << 20,
    "intermediate_size": 1 << 20,
    "intermediate_size_mlp": 1 << 20,
    "shared_expert_intermediate_size": 1 << 20,
    "n_shared_experts": 64,
    "kv_lora_rank": 65_536,
    "q_lora_rank": 65_536,
}
DEFAULT_BOUND = 1 << 31


def _pick(config: dict[str, Any], names: tuple[str, ...], default: Any = _MISSING) -> Any:
    for name in names:
        if config.get(name) is not None:
            return config[name]
    if default is _MISSING:
        raise ValueError(f"config.{names[0]}: missing; the planner needs it to size the model")
    return default


def _int(config: dict[str, Any], *names: str, default: Any = _MISSING) -> int:
    value = _pick(config, names, default)
    name = next((n for n in names if config.get(n) is not None), names[0])
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"config.{name}: must be a non-negative integer, got {str(value)[:40]!r}")
    bound = next((CONFIG_BOUNDS[n] for n in names if n in CONFIG_BOUNDS), DEFAULT_BOUND)
    if value > bound:
        raise ValueError(f"config.{name}: at most {bound:,} is planned, got {value:,}")
    return int(value)


def checkpoint_quantization(config: dict[str, Any]) -> dict[str, Any] | None:
    """The checkpoint's own quantization_config, summarised (method, bits, group size, ignore list)."""
    qc = config.get("quantization_config")
    if not isinstance(qc, dict):
        return None
    summary: dict[str, Any] = {"method": qc.get("quant_method")}
    if "weight_block_size" in qc:
        summary["weight_block_size"] = qc["weight_block_size"]
    for key in ("bits", "group_size", "fmt", "modules_to_not_convert", "ignore"):
        if key in qc:
            summary[key] = qc[key]
    groups = qc.get("config_groups")
    if isinstance(groups, dict):
        for group in groups.values():
            weights = group.get("weights") if isinstance(group, dict) else None
            if isinstance(weights, dict):
                summary.setdefault("bits", weights.get("num_bits"))
                summary.setdefault("group_size", weights.get("group_size"))
                summary.setdefault("symmetric", weights.get("symmetric"))
    return summary


# Which stored tensor kinds each planner precision's weights come in (the node's inspection compares
# them with what the safetensors headers hold): packed integers (I32 `weight_packed` / `qweight`, 32/bits
# values per element), one-byte integers (compressed-tensors naive/int-quantized), FP8, FP4 blocks.
PRECISION_TENSOR_KINDS: dict[str, frozenset[str]] = {
    "bf16": frozenset(),
    "fp16": frozenset(),
    "fp32": frozenset(),
    "fp8": frozenset({"fp8"}),
    "w8a8": frozenset({"int8", "int_packed"}),
    "w4a16": frozenset({"int_packed", "int8"}),
    "w4a8": frozenset({"int_packed", "int8"}),
    "w2a16": frozenset({"int_packed", "int8"}),
    "mxfp4": frozenset({"mxfp4"}),
    "nvfp4": frozenset({"nvfp4"}),
}
_DTYPE_KEYS = {"bfloat16": "bf16", "float16": "fp16", "half": "fp16", "float32": "fp32", "float": "fp32"}


def unquantized_precision(config: dict[str, Any]) -> str | None:
    """bf16 / fp16 / fp32 from `torch_dtype` (Transformers 5 writes `dtype`), None when absent or other."""
    value = config.get("torch_dtype") or config.get("dtype")
    return _DTYPE_KEYS.get(str(value).lower()) if isinstance(value, str) else None


def describe_quantization(config: dict[str, Any]) -> dict[str, Any] | None:
    """What a checkpoint's quantization_config declares, in every format the engines load, beside the planner
    key infer_precision maps it to: {key, method, weight_bits, activation_bits, group_size, strategy,
    weight_type, format, block_size, ignore, tensor_kinds, note}. None without a quantization_config.
    `key` is None for a method the planner does not model; `tensor_kinds` is every kind of stored
    weight tensor the declared scheme may produce (a compressed-tensors config may mix groups)."""
    qc = config.get("quantization_config")
    if not isinstance(qc, dict):
        return None
    inferred = infer_precision(config) or {}
    method = str(qc.get("quant_method") or "unknown").lower()
    key = inferred.get("precision")
    facts: dict[str, Any] = {
        "key": key,
        "method": method,
        "weight_bits": None,
        "activation_bits": 16,
        "group_size": inferred.get("group_size"),
        "strategy": None,
        "weight_type": "int",
        "format": qc.get("format") if isinstance(qc.get("format"), str) else None,
        "block_size": None,
        "ignore": [],
        "tensor_kinds": set(PRECISION_TENSOR_KINDS.get(key or "", frozenset())),
        "note": inferred.get("note", ""),
    }
    ignore = qc.get("ignore", qc.get("modules_to_not_convert", qc.get("ignored_layers", qc.get("exclude_modules"))))
    if isinstance(ignore, list):
        facts["ignore"] = [str(item) for item in ignore]
    if method == "compressed-tensors":
        raw_groups = qc.get("config_groups")
        groups: dict[str, Any] = raw_groups if isinstance(raw_groups, dict) else {}
        schemes = [g for g in groups.values() if isinstance(g, dict) and isinstance(g.get("weights"), dict)]
        if schemes:
            weights, inputs = schemes[0]["weights"], schemes[0].get("input_activations") or {}
            facts.update(
                weight_bits=weights.get("num_bits"),
                activation_bits=inputs.get("num_bits", 16) if isinstance(inputs, dict) else 16,
                group_size=weights.get("group_size") if isinstance(weights.get("group_size"), int) else None,
                strategy=weights.get("strategy"),
                weight_type=weights.get("type", "int"),
                block_size=weights.get("block_structure"),
            )
        for scheme in schemes[1:]:  # a mixed checkpoint: each group's tensors are expected
            other: dict[str, Any] = {"precision": None}
            _precision_of_group(scheme, str(qc.get("format", "")), other)
            facts["tensor_kinds"] |= PRECISION_TENSOR_KINDS.get(other["precision"] or "", frozenset())
    elif method in ("gptq", "awq"):
        group = qc.get("group_size", qc.get("q_group_size"))
        bits = qc.get("bits", qc.get("w_bit", 4))
        facts.update(
            weight_bits=bits if type(bits) is int else None,
            group_size=group if isinstance(group, int) and group > 0 else None,
            strategy="group" if isinstance(group, int) and group > 0 else "channel",
            tensor_kinds={"int_packed"},  # GPTQ and AWQ pack 4- and 8-bit weights into I32 alike
        )
    elif method == "fp8":
        block = qc.get("weight_block_size")
        facts.update(
            weight_bits=8,
            activation_bits=8,
            weight_type="float",
            strategy="block" if block else "tensor",
            block_size=block,
            group_size=None,
        )
    elif method == "mxfp4":
        facts.update(weight_bits=4, weight_type="float", strategy="group", group_size=32)
    elif method == "modelopt":
        fp4 = key == "nvfp4"
        facts.update(
            weight_bits=4 if fp4 else 8,
            activation_bits=8 if fp4 or "FP8" in str(qc.get("quant_algo", "")).upper() else 16,
            weight_type="float",
            strategy="group" if fp4 else "tensor",
            group_size=qc.get("group_size", 16) if fp4 else None,
        )
    elif method == "bitsandbytes":
        eight = bool(qc.get("load_in_8bit"))
        facts.update(weight_bits=8 if eight else 4, tensor_kinds={"int8"} if eight else {"other"})
    facts["tensor_kinds"] = frozenset(facts["tensor_kinds"])
    return facts


_LAYER_INDEX = re.compile(r"layers\.(\d+)\.")
_DENSE_MLP = re.compile(r"mlp\.(?:gate|up|down|gate_up)_proj|mlp\.\((?:gate|up|down|gate_up)")


def _part_of(module: str) -> str | None:
    """The planner part a quantization ignore-list entry (a module name or `re:` pattern) names."""
    name = module.replace("\\", "")
    if "shared_expert" in name:
        return "shared_experts"
    if "attn" in name or "attention" in name:
        return "attention"
    if "expert" not in name and (_DENSE_MLP.search(name) or name.endswith(".mlp")):
        return "dense_mlp"  # not the router (`mlp.gate`), not the routed experts
    return None


def _kept_bf16(ignored: Any, layers: int, dense: frozenset[int] | None = None) -> tuple[tuple[str, ...], str]:
    """Map a scheme's ignore list to the planner's parts kept in BF16, and a note on what was not.

    A part counts as BF16 when the list names it for every layer (a pattern, or each layer by index);
    a part named for a few layers only (FP8 checkpoints that keep the first and last layers) stays
    quantized, with a note: the memory model sizes parts, not single layers, and calling the whole part
    BF16 would overstate it by far more than the few layers understate it."""
    if not isinstance(ignored, list):
        return (), ""
    everywhere: set[str] = set()
    some: dict[str, set[int]] = {}
    for item in map(str, ignored):
        part = _part_of(item)
        if part is None:
            continue
        index = _LAYER_INDEX.search(item)
        if index is None:
            everywhere.add(part)
        else:
            some.setdefault(part, set()).add(int(index.group(1)))
    partial = []
    for part, indices in sorted(some.items()):
        present = dense if part == "dense_mlp" and dense is not None else frozenset(range(layers))
        if present and indices >= present:
            everywhere.add(part)
        elif part not in everywhere:
            named = ", ".join(map(str, sorted(indices)[:8])) + (", …" if len(indices) > 8 else "")
            partial.append(f"{part} of layers {named}")
    note = (
        f"the ignore list keeps {'; '.join(partial)} in BF16: planned at the checkpoint's precision (part sizes)"
        if partial
        else ""
    )
    return tuple(p for p in ("attention", "dense_mlp", "shared_experts") if p in everywhere), note


def infer_precision(
    config: dict[str, Any], layers: int = 0, dense: frozenset[int] | None = None
) -> dict[str, Any] | None:
    """The planner precision a checkpoint's quantization_config implies, or None for BF16/FP16.

    Returns {"precision", "group_size", "keep_bf16", "zero_point", "note"}.
    """
    qc = config.get("quantization_config")
    if not isinstance(qc, dict):
        return None
    method = str(qc.get("quant_method", "")).lower()
    result: dict[str, Any] = {"precision": None, "group_size": None, "keep_bf16": (), "zero_point": False, "note": ""}
    if method == "fp8":
        result["precision"] = "fp8"
        _ignore_list(result, qc.get("modules_to_not_convert") or qc.get("ignored_layers"), layers, dense)
    elif method == "mxfp4":
        result.update(precision="mxfp4")
    elif method in ("awq", "gptq"):
        bits = qc.get("bits", qc.get("w_bit", 4))
        group = qc.get("group_size", qc.get("q_group_size", 128))
        group = group if type(group) is int else None  # config.json is the checkpoint's: any JSON type
        if type(bits) is not int:  # "4" or [4] is no bit width (True == 1 would read as 8 bits below)
            result["note"] = f"{method} bits {str(bits)[:20]!r} is not a whole number: not modelled"
            return result
        if bits == 4:
            zero = (method == "awq" and bool(qc.get("zero_point", True))) or (
                method == "gptq" and not qc.get("sym", True)
            )
            result.update(precision="w4a16", group_size=group if group and group > 0 else None, zero_point=zero)
        else:
            result.update(precision="w8a8", note=f"{method} {bits}-bit weights planned at 8 bits (w8a8 sizes)")
    elif method == "modelopt":
        algo = str(qc.get("quant_algo", "")).upper()
        result.update(precision="nvfp4" if "FP4" in algo else "fp8")
    elif method == "compressed-tensors":
        _compressed_tensors(qc, result, layers, dense)
    elif method == "bitsandbytes":
        result.update(precision="w4a16", group_size=64, note="bitsandbytes 4-bit planned as INT4 group 64")
    else:
        result["note"] = f"quantization method {method!r} is not modelled: weights planned as BF16"
        return result
    return result


def _ignore_list(result: dict[str, Any], ignored: Any, layers: int, dense: frozenset[int] | None = None) -> None:
    result["keep_bf16"], note = _kept_bf16(ignored, layers, dense)
    if note:
        result["note"] = "; ".join(filter(None, (result["note"], note)))


def _compressed_tensors(
    qc: dict[str, Any], result: dict[str, Any], layers: int, dense: frozenset[int] | None = None
) -> None:
    fmt = str(qc.get("format", ""))
    groups = qc.get("config_groups")
    groups = groups if isinstance(groups, dict) else {}  # config.json is the checkpoint's: any JSON type
    scheme = next((g for g in groups.values() if isinstance(g, dict) and isinstance(g.get("weights"), dict)), None)
    if scheme is None:
        result["note"] = "compressed-tensors config without weight groups: planned as BF16"
        return
    _precision_of_group(scheme, fmt, result)
    _ignore_list(result, qc.get("ignore"), layers, dense)  # after: its note joins the scheme's


def _precision_of_group(scheme: dict[str, Any], fmt: str, result: dict[str, Any]) -> None:
    weights, inputs = scheme["weights"], scheme.get("input_activations") or {}
    bits, kind = weights.get("num_bits"), weights.get("type", "int")
    formats = f"{fmt} {scheme.get('format') or ''}"  # a mixed-precision checkpoint names each group's format
    if "mxfp4" in formats or (bits == 4 and kind == "float" and weights.get("group_size") == 32):
        result["precision"] = "mxfp4"  # llm-compressor's MXFP4 preset: E8M0 scale per 32, not NVFP4's FP8 per 16
    elif "nvfp4" in formats or (bits == 4 and kind == "float"):
        result["precision"] = "nvfp4"
    elif bits == 8 and kind == "float":
        result["precision"] = "fp8"
    elif bits == 8:
        result["precision"] = "w8a8"
        if not inputs:
            result["note"] = "INT8 weight-only checkpoint planned with w8a8 sizes"
    elif bits == 4:
        result["precision"] = "w4a8" if inputs.get("num_bits") == 8 else "w4a16"
        group = weights.get("group_size")
        result["group_size"] = group if isinstance(group, int) and group > 0 else None
        result["zero_point"] = weights.get("symmetric") is False
    elif bits == 2 and kind == "int" and not inputs:
        result["precision"] = "w2a16"
        group = weights.get("group_size")
        result["group_size"] = group if isinstance(group, int) and group > 0 else None
        result["zero_point"] = weights.get("symmetric") is False
    else:
        result["note"] = f"compressed-tensors {bits}-bit weights are not modelled: planned as BF16"


def _linear_fields(text: dict[str, Any], layers: int) -> dict[str, Any]:
    """Gated DeltaNet (linear attention) layers of a hybrid model (Qwen3-Next), from layer_types or
    full_attention_interval (every Nth layer full attention, the rest linear), with their state sizes.
    A `linear_attention` layer without these fields is another kind (MiniMax, Kimi): refused later."""
    types = text.get("layer_types")
    if isinstance(types, list) and types:
        if "linear_attention" not in types or text.get("linear_num_value_heads") is None:
            return {}
        indices = tuple(i for i, kind in enumerate(types) if kind == "linear_attention")
    else:
        interval = _int(text, "full_attention_interval", default=0)
        if interval < 2:
            return {}
        indices = tuple(i for i in range(layers) if (i + 1) % interval)
    return {
        "linear_layers": indices,
        "linear_value_heads": _int(text, "linear_num_value_heads"),
        "linear_key_heads": _int(text, "linear_num_key_heads"),
        "linear_key_head_dim": _int(text, "linear_key_head_dim"),
        "linear_value_head_dim": _int(text, "linear_value_head_dim"),
        "linear_conv_kernel": _int(text, "linear_conv_kernel_dim", default=4),
    }


def _layer_windows(text: dict[str, Any], arch: str, layers: int, linear: bool = False) -> tuple[int, ...]:
    """Per-layer KV window (0: full attention), from layer_types or the family's interleave rule."""
    window = text.get("sliding_window") or 0
    types = text.get("layer_types")
    if isinstance(types, list) and types:
        modelled = {"linear_attention"} if linear else set()
        unmodelled = sorted(set(map(str, types)) & (UNMODELLED_LAYER_TYPES - modelled))
        if unmodelled:
            raise ValueError(f"config.layer_types: {', '.join(unmodelled)} layers are not modelled by the planner")
        if len(types) != layers:
            raise ValueError("config.layer_types must list one type per layer")
        chunk = text.get("attention_chunk_size") or 0
        return tuple(
            window if kind == "sliding_attention" else chunk if kind == "chunked_attention" else 0 for kind in types
        )
    if arch.startswith("Llama4") and text.get("attention_chunk_size"):
        chunk = int(text["attention_chunk_size"])  # every 4th layer is global (NoPE), the rest chunked
        return tuple(0 if (i + 1) % 4 == 0 else chunk for i in range(layers))
    if not window:
        return ()
    if arch.startswith("Gemma2"):
        return tuple(window if i % 2 == 0 else 0 for i in range(layers))
    if arch.startswith("Gemma3"):
        pattern = int(text.get("sliding_window_pattern") or 6)
        return tuple(0 if (i + 1) % pattern == 0 else window for i in range(layers))
    if arch.startswith("GptOss"):
        return tuple(window if i % 2 == 0 else 0 for i in range(layers))
    if "use_sliding_window" in text:  # Qwen2/3: off by default; when on, layers from max_window_layers slide
        if not text["use_sliding_window"]:
            return ()
        first = int(text.get("max_window_layers") or 0)
        return tuple(window if i >= first else 0 for i in range(layers))
    return tuple(window for _ in range(layers))  # Mistral 7B v0.1, Phi-3: every layer slides


def _text_config(config: dict[str, Any]) -> dict[str, Any]:
    text = config.get("text_config")
    if isinstance(text, dict) and ("num_hidden_layers" in text or "hidden_size" in text):
        return {**{k: v for k, v in config.items() if k != "text_config"}, **text}
    return config


def _moe_fields(text: dict[str, Any], arch: str) -> dict[str, Any]:
    experts = _int(text, "n_routed_experts", "num_experts", "num_local_experts", "moe_num_experts", default=0)
    if not experts:
        return {}
    top_k = _int(text, "num_experts_per_tok", "experts_per_token", "moe_top_k", "num_experts_per_token", "moe_k")
    separate_expert_size = text.get("moe_intermediate_size") is not None
    expert_size = _int(text, "moe_intermediate_size", "expert_intermediate_size", "intermediate_size")
    dense = _int(text, "intermediate_size_mlp", default=0) or (
        _int(text, "intermediate_size", default=0) if separate_expert_size else 0
    )
    shared = _int(text, "n_shared_experts", "num_shared_experts", "moe_num_shared_experts", default=0)
    shared_size = _int(text, "shared_expert_intermediate_size", default=0)
    if shared_size and not shared:
        shared = 1  # Qwen2-MoE: one shared expert of its own size
    if arch.startswith("Llama4"):
        shared = 1
    step = _int(text, "moe_layer_freq", "decoder_sparse_step", "interleave_moe_layer_step", default=1) or 1
    dense_layers = text.get("mlp_only_layers") or []
    if not isinstance(dense_layers, list) or not all(type(i) is int and i >= 0 for i in dense_layers):
        raise ValueError("config.mlp_only_layers must be a list of layer indices")
    first_dense = _int(text, "first_k_dense_replace", default=0)
    ernie_keys = [k for k in ("moe_layer_start_index", "moe_layer_end_index", "moe_layer_interval") if k in text]
    if ernie_keys:
        # ERNIE 4.5 names its MoE layers by range and interval: layer i routes when start <= i <= end and
        # (i + 1) % interval == 0 (Transformers' and vLLM's Ernie4_5_Moe; start defaults to 1, end to the
        # last layer), which is not the planner's "every step-th layer after the first k" when the interval
        # is above 1: list the dense layers. The other convention's keys beside these would be ambiguous.
        other = [
            k
            for k in ("first_k_dense_replace", "moe_layer_freq", "decoder_sparse_step", "interleave_moe_layer_step")
            if text.get(k) is not None
        ]
        if other:
            raise ValueError(f"config.{other[0]}: conflicts with {ernie_keys[0]} (two ways of naming the MoE layers)")
        layers = _int(text, "num_hidden_layers")
        start = _int(text, "moe_layer_start_index", default=1)
        raw_end = text.get("moe_layer_end_index")
        last = raw_end is None or (type(raw_end) is int and raw_end == -1)
        end = layers - 1 if last else _int(text, "moe_layer_end_index")
        interval = _int(text, "moe_layer_interval", default=1)
        if interval < 1:
            raise ValueError("config.moe_layer_interval: must be at least 1")
        routed = {i for i in range(layers) if start <= i <= end and (i + 1) % interval == 0}
        if not routed:
            raise ValueError(
                f"config.moe_layer_start_index: no layer routes experts (start {start}, end {end}, "
                f"interval {interval}, {layers} layers)"
            )
        dense_layers = sorted({*dense_layers, *(i for i in range(layers) if i not in routed)})
        first_dense, step = 0, 1
    return {
        "n_routed_experts": experts,
        "experts_per_token": top_k,
        "moe_intermediate_size": expert_size,
        "dense_intermediate_size": dense,
        "n_shared_experts": shared,
        "shared_expert_intermediate_size": shared_size,
        "first_k_dense_layers": first_dense,
        "moe_layer_step": step,
        "dense_layers": tuple(dense_layers),
    }


def _rope_fields(text: dict[str, Any]) -> dict[str, Any]:
    """The rope's share of each head (partial_rotary_factor) and the positions its cos/sin cache covers
    when rope_scaling sets them, as vLLM's scaled rotary embeddings build it: YaRN, the original length
    (rope_scaling's original_max_position_embeddings, else max_position_embeddings) times the factor;
    linear and dynamic NTK, max_position_embeddings times the factor. Other scalings keep
    max_position_embeddings."""
    fields: dict[str, Any] = {}
    fraction = text.get("partial_rotary_factor")
    if fraction is not None:
        if isinstance(fraction, bool) or not isinstance(fraction, int | float) or not 0 < fraction <= 1:
            raise ValueError("config.partial_rotary_factor: must be a number in (0, 1]")
        fields["rotary_fraction"] = float(fraction)
    scaling = text.get("rope_scaling")
    if not isinstance(scaling, dict):
        return fields
    kind = scaling.get("rope_type") or scaling.get("type")
    if kind not in ("yarn", "linear", "dynamic"):
        return fields
    factor = scaling.get("factor")
    if isinstance(factor, bool) or not isinstance(factor, int | float) or not 1 <= factor <= 1024:
        raise ValueError("config.rope_scaling.factor: must be a number from 1 to 1024")
    length = _int(text, "max_position_embeddings", default=0)
    if kind == "yarn" and scaling.get("original_max_position_embeddings") is not None:
        length = _int(scaling, "original_max_position_embeddings")
    if length:
        fields["rope_positions"] = min(int(length * factor), CONFIG_BOUNDS["max_position_embeddings"])
    return fields


def _mla_fields(text: dict[str, Any]) -> dict[str, Any]:
    if text.get("kv_lora_rank") is None:
        return {}
    return {
        "attention": "mla",
        "q_lora_rank": _int(text, "q_lora_rank", default=0),
        "kv_lora_rank": _int(text, "kv_lora_rank"),
        "qk_nope_head_dim": _int(text, "qk_nope_head_dim"),
        "qk_rope_head_dim": _int(text, "qk_rope_head_dim"),
        "v_head_dim": _int(text, "v_head_dim"),
        "head_dim": _int(text, "v_head_dim"),
    }


def _dense_mlp_layers(fields: dict[str, Any], layers: int) -> frozenset[int]:
    """The layers with a dense MLP (ModelSpec.is_moe_layer's rule): an ignore list naming each of them
    keeps the whole dense MLP in BF16 (DeepSeek's first three layers)."""
    if not fields.get("n_routed_experts"):
        return frozenset(range(layers))
    first, step = fields["first_k_dense_layers"], fields["moe_layer_step"]
    listed = set(fields["dense_layers"])
    return frozenset(i for i in range(layers) if i < first or i in listed or (i - first + 1) % step)


def parse_config(config: Any, key: str = "custom") -> ModelSpec:
    if not isinstance(config, dict):
        raise ValueError("model: an inline config must be a JSON object (a config.json)")
    architectures = config.get("architectures") or []
    if not isinstance(architectures, list):
        raise ValueError("config.architectures must be a list of class names")
    arch = str(architectures[0]) if architectures else str(config.get("model_type", "unknown"))
    if not arch.endswith(DECODER_SUFFIXES):
        raise ValueError(
            f"config.architectures: {arch!r} is not a decoder language model (…ForCausalLM); the planner sizes decoders"
        )
    text = _text_config(config)
    notes = []
    if arch not in TESTED_ARCHITECTURES:
        notes.append(
            f"Architecture {arch} is not one the planner is tested on: planned from its standard config fields."
        )
    layers = _int(text, "num_hidden_layers", "n_layer", "num_layers")
    hidden = _int(text, "hidden_size", "n_embd", "d_model")
    heads = _int(text, "num_attention_heads", "n_head")
    if not heads:
        raise ValueError("config.num_attention_heads must be positive")
    fields: dict[str, Any] = {
        "key": key,
        "architecture": arch,
        "num_layers": layers,
        "hidden_size": hidden,
        "vocab_size": _int(text, "vocab_size"),
        "num_attention_heads": heads,
        "num_kv_heads": _int(text, "num_key_value_heads", "num_kv_heads", "multi_query_group_num", default=heads),
        # head_dim is read, never assumed hidden/heads (wrong for Qwen3, Gemma and gpt-oss)
        "head_dim": _int(text, "head_dim", default=hidden // heads),
        "tie_word_embeddings": bool(text.get("tie_word_embeddings", arch.startswith("Gemma"))),
        "max_position_embeddings": _int(
            text, "max_position_embeddings", "max_sequence_length", "n_positions", default=0
        ),
        **_rope_fields(text),
        "qk_norm": bool(text.get("use_qk_norm")) or arch.startswith(_QK_NORM_FAMILIES),
        "attention_bias": bool(text.get("attention_bias") or text.get("qkv_bias"))
        or arch.startswith(_BIASED_QKV_FAMILIES),
        "norms_per_layer": 4 if arch.startswith(("Gemma2", "Gemma3")) else 2,
    }
    fields.update(_mla_fields(text))
    moe = _moe_fields(text, arch)
    fields.update(moe)
    has_dense = not moe or moe["first_k_dense_layers"] or moe["dense_layers"] or moe["moe_layer_step"] > 1
    if has_dense and not fields.get("dense_intermediate_size"):
        fields["dense_intermediate_size"] = _int(text, "intermediate_size", "ffn_hidden_size", "n_inner")
    if arch.startswith("GptOss"):
        fields.update(attention_bias=True, attention_sinks=True, expert_bias=True)
    linear = _linear_fields(text, layers)
    if linear:
        fields.update(linear)
        # Qwen3-Next's full-attention q_proj also yields an output gate (Qwen3.5 states it in its config).
        fields["attention_output_gate"] = bool(text.get("attn_output_gate", arch.startswith("Qwen3Next")))
    windows = _layer_windows(text, arch, layers, linear=bool(linear))
    if any(windows):
        fields["layer_windows"] = windows
        fields["sliding_window"] = max(windows)
    vision = config.get("vision_config")
    if isinstance(vision, dict) and all(
        vision.get(k) for k in ("hidden_size", "num_hidden_layers", "intermediate_size")
    ):
        fields["vision"] = VisionSpec(
            hidden_size=_int(vision, "hidden_size"),
            num_layers=_int(vision, "num_hidden_layers"),
            intermediate_size=_int(vision, "intermediate_size"),
        )
    quant = infer_precision(config, layers, _dense_mlp_layers(fields, layers))
    if quant:
        fields["checkpoint_precision"] = quant["precision"]
        fields["checkpoint_group_size"] = quant["group_size"]
        fields["checkpoint_zero_point"] = quant["zero_point"]
        fields["checkpoint_keep_bf16"] = tuple(quant["keep_bf16"])
        if quant["note"]:
            notes.append(f"Checkpoint quantization: {quant['note']}.")
    fields["notes"] = tuple(notes)
    spec = ModelSpec(**fields)
    spec.validate()
    return spec
