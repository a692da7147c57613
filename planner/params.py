"""Parameter counts from the architecture, by component, so memory can shard each part its own way.

Counts are elements (parameters). Conventions: norms and biases counted; the MoE router
(and DeepSeek's routing bias) counted; MTP layers not counted (not served by default);
`active_per_token` excludes the input embedding (a lookup, no matmul) and includes lm_head (the
embedding again when the two are tied: the output projection still reads it).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from planner.specs import ModelSpec


@dataclass(frozen=True, slots=True)
class LayerParams:
    attention: int  # projections (+ biases, sinks, q/k norms)
    attention_replicated: int  # parts every TP rank holds whole (MLA down-projections and their norms)
    norms: int
    dense_mlp: int
    routed_experts: int  # all routed experts of the layer
    routed_expert_each: int
    shared_experts: int
    router: int
    linear_attention: bool = False  # a Gated DeltaNet block in place of attention (no K/V heads to replicate)

    @property
    def total(self) -> int:
        parts = (self.attention, self.attention_replicated, self.norms, self.dense_mlp)
        return sum(parts) + self.routed_experts + self.shared_experts + self.router


@dataclass(frozen=True, eq=False)  # identity hash: it keys the memory caches, and is built once per model
class ParamBreakdown:
    embedding: int
    lm_head: int
    final_norm: int
    vision: int
    layers: tuple[LayerParams, ...]
    experts_per_token: int

    @functools.cached_property
    def total(self) -> int:
        return self.embedding + self.lm_head + self.final_norm + self.vision + sum(layer.total for layer in self.layers)

    @functools.cached_property
    def heaviest_layer(self) -> LayerParams:
        return max(self.layers, key=lambda layer: layer.total)

    @functools.cached_property
    def output_projection(self) -> int:
        """The weights the LM head's matmul reads for every token: its own, or the input embedding
        when the two are tied (stored once, read by both)."""
        return self.lm_head or self.embedding

    @functools.cached_property
    def active_per_token(self) -> int:
        active = self.output_projection + self.final_norm
        for layer in self.layers:
            active += layer.attention + layer.attention_replicated + layer.norms + layer.dense_mlp
            active += (
                layer.shared_experts
                + layer.router
                + self.experts_per_token * layer.routed_expert_each * bool(layer.routed_experts)
            )
        return active


def _swiglu(hidden: int, intermediate: int, bias: bool = False) -> int:
    """gate, up and down projections of a SwiGLU MLP."""
    return 3 * hidden * intermediate + (2 * intermediate + hidden if bias else 0)


def _attention(spec: ModelSpec) -> tuple[int, int]:
    """(TP-sharded part, replicated part) of one attention block."""
    h = spec.hidden_size
    if spec.attention == "mla":
        qk_head = spec.qk_nope_head_dim + spec.qk_rope_head_dim
        heads = spec.num_attention_heads
        replicated = h * (spec.kv_lora_rank + spec.qk_rope_head_dim) + spec.kv_lora_rank  # kv_a + its norm
        if spec.q_lora_rank:
            replicated += h * spec.q_lora_rank + spec.q_lora_rank  # q_a + its norm
            q_up = spec.q_lora_rank * heads * qk_head
        else:
            q_up = h * heads * qk_head
        kv_up = spec.kv_lora_rank * heads * (spec.qk_nope_head_dim + spec.v_head_dim)
        out = heads * spec.v_head_dim * h
        return q_up + kv_up + out, replicated
    q = spec.num_attention_heads * spec.head_dim
    kv = spec.num_kv_heads * spec.head_dim
    sharded = h * q + 2 * h * kv + q * h
    if spec.attention_output_gate:
        sharded += h * q  # q_proj's second half: a sigmoid gate on the attention output
    if spec.attention_bias:
        sharded += q + 2 * kv + h
    if spec.attention_sinks:
        sharded += spec.num_attention_heads
    if spec.qk_norm:
        sharded += 2 * spec.head_dim
    return sharded, 0


def _linear_attention(spec: ModelSpec) -> int:
    """One Gated DeltaNet block: q/k/v/z and the b/a (beta, decay) projections, the causal conv over
    q, k and v, per-head decay parameters (A_log, dt_bias), the gated output norm and out_proj."""
    h = spec.hidden_size
    keys = spec.linear_key_heads * spec.linear_key_head_dim
    values = spec.linear_value_heads * spec.linear_value_head_dim
    projections = h * (2 * keys + 2 * values) + h * 2 * spec.linear_value_heads
    conv = (2 * keys + values) * spec.linear_conv_kernel
    return projections + conv + 2 * spec.linear_value_heads + spec.linear_value_head_dim + values * h


@functools.lru_cache(maxsize=256)
def count_params(spec: ModelSpec) -> ParamBreakdown:
    h = spec.hidden_size
    attention, replicated = _attention(spec)
    shared_size = spec.shared_expert_intermediate_size or spec.moe_intermediate_size
    linear = _linear_attention(spec) if spec.linear_layers else 0
    layers = []
    for index in range(spec.num_layers):
        moe = spec.is_moe_layer(index)
        is_linear = index in spec.linear_layers
        expert = _swiglu(h, spec.moe_intermediate_size, spec.expert_bias) if moe else 0
        router = (
            (h * spec.n_routed_experts + (spec.n_routed_experts if spec.expert_bias or spec.attention == "mla" else 0))
            if moe
            else 0
        )
        layers.append(
            LayerParams(
                attention=linear if is_linear else attention,
                attention_replicated=0 if is_linear else replicated,
                norms=spec.norms_per_layer * h,
                dense_mlp=0 if moe else _swiglu(h, spec.dense_intermediate_size),
                routed_experts=expert * spec.n_routed_experts,
                routed_expert_each=expert,
                shared_experts=_swiglu(h, shared_size) * spec.n_shared_experts if moe else 0,
                router=router,
                linear_attention=is_linear,
            )
        )
    vision = 0
    if spec.vision is not None:
        v = spec.vision
        vision = v.num_layers * (4 * v.hidden_size * v.hidden_size + 2 * v.hidden_size * v.intermediate_size)
    embedding = spec.vocab_size * h
    return ParamBreakdown(
        embedding=embedding,
        lm_head=0 if spec.tie_word_embeddings else embedding,
        final_norm=h,
        vision=vision,
        layers=tuple(layers),
        experts_per_token=spec.experts_per_token,
    )
