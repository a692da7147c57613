"""Tiny checkpoints for the inspection tests, written into a test's tmp_path: real safetensors files
(safetensors.torch) with the tensor names and dtypes each format ships, and the config.json each
declares. Shapes are small; the layout is what the inspection reads."""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import save_file

LAYERS = 2
HIDDEN = 64
INTERMEDIATE = 128
PROJECTIONS = {
    "self_attn.q_proj": (HIDDEN, HIDDEN),
    "self_attn.k_proj": (HIDDEN, HIDDEN),
    "self_attn.v_proj": (HIDDEN, HIDDEN),
    "self_attn.o_proj": (HIDDEN, HIDDEN),
    "mlp.gate_proj": (INTERMEDIATE, HIDDEN),
    "mlp.up_proj": (INTERMEDIATE, HIDDEN),
    "mlp.down_proj": (HIDDEN, INTERMEDIATE),
}


def base_config(**extra: Any) -> dict[str, Any]:
    return {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "torch_dtype": "bfloat16",
        "hidden_size": HIDDEN,
        "intermediate_size": INTERMEDIATE,
        "num_hidden_layers": LAYERS,
        "num_attention_heads": 4,
        "num_key_value_heads": 4,
        "vocab_size": 256,
        **extra,
    }


def _common() -> dict[str, torch.Tensor]:
    tensors = {
        "model.embed_tokens.weight": torch.zeros(256, HIDDEN, dtype=torch.bfloat16),
        "model.norm.weight": torch.ones(HIDDEN, dtype=torch.bfloat16),
        "lm_head.weight": torch.zeros(256, HIDDEN, dtype=torch.bfloat16),
    }
    for layer in range(LAYERS):
        tensors[f"model.layers.{layer}.input_layernorm.weight"] = torch.ones(HIDDEN, dtype=torch.bfloat16)
    return tensors


def _linears(make: Any) -> dict[str, torch.Tensor]:
    tensors = _common()
    for layer in range(LAYERS):
        for name, (out, inp) in PROJECTIONS.items():
            tensors.update(make(f"model.layers.{layer}.{name}", out, inp))
    return tensors


def write(root: Path, tensors: dict[str, torch.Tensor], config: dict[str, Any] | None, shards: int = 1) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    if config is not None:
        (root / "config.json").write_text(json.dumps(config, indent=2))
    names = sorted(tensors)
    if shards == 1:
        save_file(tensors, str(root / "model.safetensors"), metadata={"format": "pt"})
        return root
    weight_map = {}
    for index in range(shards):
        shard = f"model-{index + 1:05d}-of-{shards:05d}.safetensors"
        part = {name: tensors[name] for name in names[index::shards]}
        save_file(part, str(root / shard), metadata={"format": "pt"})
        weight_map.update(dict.fromkeys(part, shard))
    (root / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    return root


def bf16(root: Path, **config: Any) -> Path:
    return write(
        root, _linears(lambda n, o, i: {f"{n}.weight": torch.zeros(o, i, dtype=torch.bfloat16)}), base_config(**config)
    )


W4A16_CT = {
    "quant_method": "compressed-tensors",
    "format": "pack-quantized",
    "quantization_status": "compressed",
    "config_groups": {
        "group_0": {
            "targets": ["Linear"],
            "format": "pack-quantized",
            "input_activations": None,
            "output_activations": None,
            "weights": {
                "num_bits": 4,
                "type": "int",
                "symmetric": True,
                "group_size": 32,
                "strategy": "group",
                "dynamic": False,
                "actorder": None,
                "block_structure": None,
                "observer": "minmax",
            },
        }
    },
    "ignore": ["lm_head"],
    "kv_cache_scheme": None,
    "sparsity_config": {},
    "version": "0.12.2",
}


def _packed(name: str, out: int, inp: int) -> dict[str, torch.Tensor]:
    return {
        f"{name}.weight_packed": torch.zeros(out, inp // 8, dtype=torch.int32),
        f"{name}.weight_scale": torch.ones(out, inp // 32, dtype=torch.bfloat16),
        f"{name}.weight_shape": torch.tensor([out, inp], dtype=torch.int64),
    }


def w4a16(root: Path, config: dict[str, Any] | None = None) -> Path:
    return write(root, _linears(_packed), config if config is not None else base_config(quantization_config=W4A16_CT))


FP8_BLOCK = {"quant_method": "fp8", "activation_scheme": "dynamic", "fmt": "e4m3", "weight_block_size": [128, 128]}


def _fp8(name: str, out: int, inp: int) -> dict[str, torch.Tensor]:
    return {
        f"{name}.weight": torch.zeros(out, inp, dtype=torch.float8_e4m3fn),
        f"{name}.weight_scale_inv": torch.ones(max(1, out // 128), max(1, inp // 128), dtype=torch.float32),
    }


def fp8(root: Path, config: dict[str, Any] | None = None) -> Path:
    return write(root, _linears(_fp8), config if config is not None else base_config(quantization_config=FP8_BLOCK))


MXFP4 = {"quant_method": "mxfp4", "modules_to_not_convert": ["model.layers.*.self_attn", "model.layers.*.mlp.router"]}


def mxfp4(root: Path) -> Path:
    """gpt-oss: attention in BF16, experts as U8 FP4 blocks (two values a byte, 16 bytes per 32) and
    U8 E8M0 scales, one per 32."""
    experts = 4
    tensors = _common()
    for layer in range(LAYERS):
        prefix = f"model.layers.{layer}"
        for name in ("q_proj", "k_proj", "v_proj", "o_proj"):
            tensors[f"{prefix}.self_attn.{name}.weight"] = torch.zeros(HIDDEN, HIDDEN, dtype=torch.bfloat16)
        tensors[f"{prefix}.mlp.router.weight"] = torch.zeros(experts, HIDDEN, dtype=torch.bfloat16)
        for name, rows in (("gate_up_proj", 2 * INTERMEDIATE), ("down_proj", HIDDEN)):
            tensors[f"{prefix}.mlp.experts.{name}_blocks"] = torch.zeros(
                experts, rows, HIDDEN // 32, 16, dtype=torch.uint8
            )
            tensors[f"{prefix}.mlp.experts.{name}_scales"] = torch.zeros(experts, rows, HIDDEN // 32, dtype=torch.uint8)
            tensors[f"{prefix}.mlp.experts.{name}_bias"] = torch.zeros(experts, rows, dtype=torch.bfloat16)
    config = base_config(architectures=["GptOssForCausalLM"], model_type="gpt_oss", quantization_config=MXFP4)
    return write(root, tensors, config)


def nvfp4_modelopt(root: Path) -> Path:
    """A ModelOpt NVFP4 export: U8 weights (two FP4 values a byte), F8_E4M3 scales per 16, F32 global
    scales; the scheme in hf_quant_config.json only."""

    def make(name: str, out: int, inp: int) -> dict[str, torch.Tensor]:
        return {
            f"{name}.weight": torch.zeros(out, inp // 2, dtype=torch.uint8),
            f"{name}.weight_scale": torch.zeros(out, inp // 16, dtype=torch.float8_e4m3fn),
            f"{name}.weight_scale_2": torch.ones((), dtype=torch.float32),
            f"{name}.input_scale": torch.ones((), dtype=torch.float32),
        }

    write(root, _linears(make), base_config())
    scheme = {"quant_algo": "NVFP4", "group_size": 16, "exclude_modules": ["lm_head"]}
    (root / "hf_quant_config.json").write_text(json.dumps({"producer": {"name": "modelopt"}, "quantization": scheme}))
    return root


def gptq(root: Path, bits: int = 4, method: str = "gptq") -> Path:
    def make(name: str, out: int, inp: int) -> dict[str, torch.Tensor]:
        return {
            f"{name}.qweight": torch.zeros(inp * bits // 32, out, dtype=torch.int32),
            f"{name}.qzeros": torch.zeros(inp // 32, out * bits // 32, dtype=torch.int32),
            f"{name}.scales": torch.ones(inp // 32, out, dtype=torch.float16),
        }

    qc: dict[str, Any] = {"quant_method": method, "bits": bits, "group_size": 32}
    extra: dict[str, Any] = (
        {"sym": True, "desc_act": False} if method == "gptq" else {"zero_point": True, "version": "gemm"}
    )
    qc.update(extra)
    return write(root, _linears(make), base_config(torch_dtype="float16", quantization_config=qc))


def raw_safetensors(path: Path, header: bytes | dict[str, Any], data: bytes = b"", length: int | None = None) -> Path:
    """A safetensors file written by hand: any header bytes, any declared length, any data region."""
    body = header if isinstance(header, bytes) else json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(body) if length is None else length) + body + data)
    return path
