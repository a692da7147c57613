"""The GEMM shapes one decoder layer runs, from a ModelSpec (pure Python: the planner and the job share it).

Shapes are at TP = 1, weights [N, K] applied to M tokens; `experts` marks routed-expert GEMMs.
"""

from __future__ import annotations

from dataclasses import dataclass

from planner.specs import ModelSpec

DECODE_M = (1, 2, 4, 8, 16, 32, 64, 128, 256)
PREFILL_M = (1024, 2048, 4096, 8192, 16384)


@dataclass(frozen=True, slots=True)
class GemmShape:
    name: str
    n: int
    k: int
    experts: bool = False


def layer_shapes(spec: ModelSpec) -> list[GemmShape]:
    h = spec.hidden_size
    shapes = []
    if spec.attention == "mla":
        qk_head = spec.qk_nope_head_dim + spec.qk_rope_head_dim
        shapes.append(GemmShape("attn_kv_a", spec.q_lora_rank + spec.kv_lora_rank + spec.qk_rope_head_dim, h))
        shapes.append(GemmShape("attn_q_b", spec.num_attention_heads * qk_head, spec.q_lora_rank or h))
        shapes.append(GemmShape("attn_o", h, spec.num_attention_heads * spec.v_head_dim))
    else:
        qkv = (spec.num_attention_heads + 2 * spec.num_kv_heads) * spec.head_dim
        shapes.append(GemmShape("attn_qkv", qkv, h))
        shapes.append(GemmShape("attn_o", h, spec.num_attention_heads * spec.head_dim))
    if spec.dense_intermediate_size:
        shapes.append(GemmShape("dense_gate_up", 2 * spec.dense_intermediate_size, h))
        shapes.append(GemmShape("dense_down", h, spec.dense_intermediate_size))
    if spec.is_moe:
        shapes.append(GemmShape("expert_gate_up", 2 * spec.moe_intermediate_size, h, experts=True))
        shapes.append(GemmShape("expert_down", h, spec.moe_intermediate_size, experts=True))
    return shapes
