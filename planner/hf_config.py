"""Build a ModelSpec from a Hugging Face config.json, for the families the planner knows."""

from __future__ import annotations

from typing import Any

from planner.specs import ModelSpec, VisionSpec

SUPPORTED = (
    "DeepseekV3ForCausalLM", "Qwen3MoeForCausalLM", "MixtralForCausalLM", "Llama4ForConditionalGeneration",
    "GptOssForCausalLM", "Glm4MoeForCausalLM", "LlamaForCausalLM", "Qwen2ForCausalLM",
)  # fmt: skip


def _int(config: dict[str, Any], name: str, default: int | None = None) -> int:
    value = config.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"config.{name} must be a non-negative integer, got {value!r}")
    return value


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


def parse_config(config: Any, key: str = "custom") -> ModelSpec:
    if not isinstance(config, dict):
        raise ValueError("model: an inline config must be a JSON object (a config.json)")
    architectures = config.get("architectures") or []
    arch = architectures[0] if architectures else config.get("model_type", "")
    if arch not in SUPPORTED:
        raise ValueError(f"config.architectures: {arch!r} is not supported; supported: {', '.join(SUPPORTED)}")
    text = config.get("text_config", config) if arch == "Llama4ForConditionalGeneration" else config
    heads = _int(text, "num_attention_heads")
    hidden = _int(text, "hidden_size")
    fields: dict[str, Any] = {
        "key": key,
        "architecture": arch,
        "num_layers": _int(text, "num_hidden_layers"),
        "hidden_size": hidden,
        "vocab_size": _int(text, "vocab_size"),
        "num_attention_heads": heads,
        "num_kv_heads": _int(text, "num_key_value_heads", heads),
        # head_dim is read, never assumed hidden/heads (wrong for Qwen3 and gpt-oss)
        "head_dim": _int(text, "head_dim", hidden // heads if heads else 0),
        "tie_word_embeddings": bool(text.get("tie_word_embeddings", config.get("tie_word_embeddings", False))),
        "max_position_embeddings": _int(text, "max_position_embeddings", 0),
    }
    if arch == "DeepseekV3ForCausalLM":
        fields.update(
            attention="mla",
            q_lora_rank=_int(text, "q_lora_rank", 0) if text.get("q_lora_rank") is not None else 0,
            kv_lora_rank=_int(text, "kv_lora_rank"),
            qk_nope_head_dim=_int(text, "qk_nope_head_dim"),
            qk_rope_head_dim=_int(text, "qk_rope_head_dim"),
            v_head_dim=_int(text, "v_head_dim"),
            head_dim=_int(text, "v_head_dim"),
            dense_intermediate_size=_int(text, "intermediate_size"),
            moe_intermediate_size=_int(text, "moe_intermediate_size"),
            n_routed_experts=_int(text, "n_routed_experts"),
            n_shared_experts=_int(text, "n_shared_experts", 0),
            experts_per_token=_int(text, "num_experts_per_tok"),
            first_k_dense_layers=_int(text, "first_k_dense_replace", 0),
            moe_layer_step=_int(text, "moe_layer_freq", 1) or 1,
        )
    elif arch == "Qwen3MoeForCausalLM":
        fields.update(
            qk_norm=True,
            moe_intermediate_size=_int(text, "moe_intermediate_size"),
            n_routed_experts=_int(text, "num_experts"),
            experts_per_token=_int(text, "num_experts_per_tok"),
            dense_intermediate_size=_int(text, "intermediate_size", 0),
            moe_layer_step=_int(text, "decoder_sparse_step", 1) or 1,
        )
    elif arch == "MixtralForCausalLM":
        fields.update(
            moe_intermediate_size=_int(text, "intermediate_size"),
            n_routed_experts=_int(text, "num_local_experts"),
            experts_per_token=_int(text, "num_experts_per_tok"),
        )
    elif arch == "Llama4ForConditionalGeneration":
        step = _int(text, "interleave_moe_layer_step", 1) or 1
        fields.update(
            moe_intermediate_size=_int(text, "intermediate_size"),
            dense_intermediate_size=_int(text, "intermediate_size_mlp"),
            n_routed_experts=_int(text, "num_local_experts"),
            n_shared_experts=1,
            experts_per_token=_int(text, "num_experts_per_tok"),
            moe_layer_step=step,
            chunked_attention_size=_int(text, "attention_chunk_size", 0),
            global_attention_every=4 if text.get("attention_chunk_size") else 0,
        )
        vision = config.get("vision_config")
        if isinstance(vision, dict):
            fields["vision"] = VisionSpec(
                hidden_size=_int(vision, "hidden_size"),
                num_layers=_int(vision, "num_hidden_layers"),
                intermediate_size=_int(vision, "intermediate_size"),
            )
    elif arch == "GptOssForCausalLM":
        fields.update(
            attention_bias=True,
            attention_sinks=True,
            sliding_window=_int(text, "sliding_window", 128),
            sliding_window_every=2,
            moe_intermediate_size=_int(text, "intermediate_size"),
            expert_bias=True,
            n_routed_experts=_int(text, "num_local_experts"),
            experts_per_token=_int(text, "num_experts_per_tok", _int(text, "experts_per_token", 4)),
            checkpoint_precision="mxfp4"
            if (text.get("quantization_config") or {}).get("quant_method") == "mxfp4"
            else None,
        )
    elif arch == "Glm4MoeForCausalLM":
        fields.update(
            attention_bias=bool(text.get("attention_bias", True)),
            dense_intermediate_size=_int(text, "intermediate_size"),
            moe_intermediate_size=_int(text, "moe_intermediate_size"),
            n_routed_experts=_int(text, "n_routed_experts"),
            n_shared_experts=_int(text, "n_shared_experts", 0),
            experts_per_token=_int(text, "num_experts_per_tok"),
            first_k_dense_layers=_int(text, "first_k_dense_replace", 0),
        )
    else:  # dense Llama / Qwen2
        fields.update(
            dense_intermediate_size=_int(text, "intermediate_size"),
            attention_bias=arch == "Qwen2ForCausalLM" or bool(text.get("attention_bias", False)),
        )
    qc = checkpoint_quantization(config)
    if qc and qc.get("method") == "fp8":
        fields["checkpoint_precision"] = "fp8"
    spec = ModelSpec(**fields)
    spec.validate()
    return spec
