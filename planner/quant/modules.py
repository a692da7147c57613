"""Swap a Hugging Face model's linear layers and fused MoE experts for quantized versions.

Never quantized: embeddings, lm_head, the MoE router/gate. An ignore list (fnmatch patterns
on module names) keeps more in BF16. Two execution paths: fake-quant (dequantized weights,
quantize-dequantize activations) that runs anywhere, and on CUDA a real INT8 GEMM for
A8 schemes (`torch._int_mm`: INT8 x INT8 -> INT32, then per-token x per-channel scales).
"""

from __future__ import annotations

import fnmatch
import re
from typing import Any

import torch
from torch import nn

from planner.quant import numerics
from planner.quant.schemes import Scheme

NEVER = re.compile(r"(^|\.)(lm_head|embed_tokens|wte|router|gate|shared_expert_gate)$")
INT_MM_MIN_ROWS = 17  # torch._int_mm needs more than 16 rows


def int8_linear(x: torch.Tensor, weight_q: torch.Tensor, weight_scale: torch.Tensor) -> torch.Tensor:
    """Real INT8 GEMM: per-token INT8 activations x per-channel INT8 weights on the tensor cores."""
    shape = x.shape
    flat = x.reshape(-1, shape[-1])
    x_q, x_scale = numerics.quantize_int8_per_token(flat)
    rows = x_q.shape[0]
    if rows < INT_MM_MIN_ROWS:
        x_q = torch.nn.functional.pad(x_q, (0, 0, 0, INT_MM_MIN_ROWS - rows))
    accumulated = torch._int_mm(x_q, weight_q.t())[:rows]
    y = accumulated.float() * x_scale * weight_scale.unsqueeze(0)
    return y.to(x.dtype).reshape(*shape[:-1], weight_q.shape[0])


class QuantLinear(nn.Module):
    weight_q: torch.Tensor
    weight_scale: torch.Tensor

    def __init__(self, linear: nn.Linear, scheme: Scheme, real_int8: bool = False) -> None:
        super().__init__()
        self.in_features, self.out_features = linear.in_features, linear.out_features
        with torch.no_grad():  # in place: a 30B model has no room for a second copy of its weights
            linear.weight.copy_(scheme.weight_fn()(linear.weight.detach()).to(linear.weight.dtype))
        dequantized = linear.weight.detach()
        self.weight = linear.weight
        self.weight.requires_grad_(False)
        self.bias = linear.bias
        self.act_fn = scheme.activation_fn()
        self.real_int8 = bool(real_int8 and scheme.activations == "int8")
        if self.real_int8:
            # Progressive form: the (int4 or int8) fake-quant weight re-expressed as per-channel INT8.
            weight_q, weight_scale = numerics.quantize_int8_per_channel(dequantized)
            self.register_buffer("weight_q", weight_q, persistent=False)
            self.register_buffer("weight_scale", weight_scale, persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.real_int8 and x.is_cuda:
            y = int8_linear(x, self.weight_q, self.weight_scale)
            return y + self.bias if self.bias is not None else y
        if self.act_fn is not None:
            x = self.act_fn(x)
        return nn.functional.linear(x, self.weight, self.bias)


class QuantExperts(nn.Module):
    """Fused experts (3D gate_up_proj / down_proj, as transformers 5 stores Qwen3-MoE and Mixtral)."""

    gate_up_proj: torch.Tensor
    down_proj: torch.Tensor
    num_experts: int
    act_fn: Any

    def __init__(self, experts: nn.Module, scheme: Scheme) -> None:
        super().__init__()
        quantize = scheme.weight_fn()
        self.num_experts = int(experts.gate_up_proj.shape[0])  # type: ignore[index]
        for name in ("gate_up_proj", "down_proj"):
            parameter = getattr(experts, name)
            with torch.no_grad():  # expert by expert, in place: no second copy of the experts
                for expert in range(parameter.shape[0]):
                    parameter[expert].copy_(quantize(parameter[expert].detach()).to(parameter.dtype))
            parameter.requires_grad_(False)
            setattr(self, name, parameter)
        self.act_fn = experts.act_fn
        self.input_fn = scheme.activation_fn()

    def _linear(self, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        if self.input_fn is not None:
            x = self.input_fn(x)
        return nn.functional.linear(x, weight)

    def forward(
        self, hidden_states: torch.Tensor, top_k_index: torch.Tensor, top_k_weights: torch.Tensor
    ) -> torch.Tensor:
        final = torch.zeros_like(hidden_states)
        mask = nn.functional.one_hot(top_k_index, num_classes=self.num_experts).permute(2, 1, 0)
        for expert in torch.nonzero(mask.sum(dim=(-1, -2)) > 0).flatten().tolist():
            position, token = torch.where(mask[expert])
            gate, up = self._linear(hidden_states[token], self.gate_up_proj[expert]).chunk(2, dim=-1)
            out = self._linear(self.act_fn(gate) * up, self.down_proj[expert])
            final.index_add_(0, token, (out * top_k_weights[token, position, None]).to(final.dtype))
        return final


def _is_fused_experts(module: nn.Module) -> bool:
    gate_up = getattr(module, "gate_up_proj", None)
    down = getattr(module, "down_proj", None)
    return isinstance(gate_up, torch.Tensor) and isinstance(down, torch.Tensor) and gate_up.dim() == 3


def quantize_model(
    model: nn.Module, scheme: Scheme, ignore: list[str] | None = None, real_int8: bool = False
) -> dict[str, Any]:
    """Swap modules in place; returns the applied config (recorded in the eval result)."""
    ignore = list(ignore or [])
    quantized, kept = [], []
    for name, module in list(model.named_modules()):
        if not isinstance(module, nn.Linear) and not _is_fused_experts(module):
            continue
        if NEVER.search(name) or any(fnmatch.fnmatch(name, pattern) for pattern in ignore):
            kept.append(name)
            continue
        parent_name, _, child = name.rpartition(".")
        parent = model.get_submodule(parent_name) if parent_name else model
        replacement = (
            QuantLinear(module, scheme, real_int8) if isinstance(module, nn.Linear) else QuantExperts(module, scheme)
        )
        setattr(parent, child, replacement)
        quantized.append(name)
    return {
        "scheme": scheme.as_config(),
        "ignore": ignore,
        "real_int8": real_int8,
        "quantized_modules": len(quantized),
        "kept_bf16": kept,
    }
