"""Per-GPU memory under a parallel layout: weights, KV cache, activations, reserves (vLLM convention).

All figures are bytes (int). The engine convention (what is reserved outside the KV pool) is a
named dataclass, because engines differ up to 2x in KV tokens for the same deployment.
"""

from __future__ import annotations

import functools
import math
from collections import Counter
from dataclasses import dataclass

from planner.params import LayerParams, ParamBreakdown
from planner.specs import GpuSpec, ModelSpec, PrecisionSpec

GIB = 1 << 30
BLOCK_TOKENS = 16  # vLLM's KV block size
KV_BYTES = {"bf16": 2, "fp8": 1}
BF16_BYTES = 2


@dataclass(frozen=True, slots=True)
class Layout:
    tp: int
    pp: int
    ep: int
    dp: int

    @property
    def gpus(self) -> int:
        return self.tp * self.pp * self.dp

    def validate(self, model: ModelSpec) -> None:
        for name in ("tp", "pp", "ep", "dp"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1")
        if self.pp > model.num_layers:
            raise ValueError(f"pp must be <= the model's {model.num_layers} layers")
        if self.ep > 1 and not model.is_moe:
            raise ValueError("ep > 1 needs an MoE model")
        if self.ep > 1 and self.ep not in (self.tp, self.tp * self.dp):
            raise ValueError("ep must be 1, tp (experts split inside each replica) or tp*dp (shared across replicas)")


@dataclass(frozen=True, slots=True)
class EngineConvention:
    """What an engine reserves outside the KV pool, per GPU. Values follow vLLM V1's profiling:
    the pool is `memory * gpu_memory_utilization - weights - peak activations - non-torch - graphs`."""

    name: str = "vllm"
    cuda_context_bytes: int = 600 * (1 << 20)  # CUDA context + cuBLAS workspaces (non-torch memory)
    nccl_bytes: int = 512 * (1 << 20)  # NCCL buffers when more than one GPU talks
    cuda_graph_bytes: int = 1 * GIB  # decode CUDA graphs for the captured batch sizes
    prefill_chunk_tokens: int = 8192  # max_num_batched_tokens: bounds the activation peak


VLLM = EngineConvention()


@dataclass(frozen=True, slots=True)
class MemoryBreakdown:
    weights_total_bytes: int  # one full copy of the model at this precision
    weights_per_gpu_bytes: int  # heaviest GPU
    kv_bytes_per_token: int  # one full copy: all layers, one replica
    kv_bytes_per_token_per_gpu: int  # what one GPU of the heaviest stage holds per token
    kv_bytes_per_sequence_per_gpu: int  # at max_model_len, windows capped
    activations_bytes: int
    overhead_bytes: int
    capacity_bytes: int  # memory * gpu_memory_utilization
    kv_pool_bytes: int  # what is left for the KV cache (may be negative: does not fit)
    kv_capacity_tokens: int  # whole 16-token blocks
    sequences_per_replica: int  # full-length sequences that fit in the pool

    @property
    def total_bytes(self) -> int:
        return self.weights_per_gpu_bytes + max(self.kv_pool_bytes, 0) + self.activations_bytes + self.overhead_bytes


def _bytes(elements: float, bits: float) -> float:
    return elements * bits / 8


def _keep_bf16(part: str, keep: frozenset[str]) -> bool:
    return part in keep


@functools.lru_cache(maxsize=65536)
def layer_weight_bytes(
    layer: LayerParams, model: ModelSpec, precision: PrecisionSpec, layout: Layout, keep: frozenset[str]
) -> float:
    """Bytes of one layer on one GPU: attention and dense MLP / TP, experts / EP (or / TP without EP)."""
    bits = precision.bits_per_weight

    def quantized(part: str) -> float:
        return BF16_BYTES * 8 if _keep_bf16(part, keep) else bits

    attention = layer.attention
    if model.attention == "gqa" and layout.tp > model.num_kv_heads:
        # K/V heads replicate when TP exceeds them: each rank still holds one whole KV head.
        kv_per_rank = math.ceil(model.num_kv_heads / layout.tp) * model.head_dim * model.hidden_size * 2
        attention_per_gpu = (attention - 2 * model.num_kv_heads * model.head_dim * model.hidden_size) / layout.tp
        attention_per_gpu += kv_per_rank
    else:
        attention_per_gpu = attention / layout.tp
    total = _bytes(attention_per_gpu, quantized("attention"))
    total += _bytes(layer.attention_replicated, quantized("attention"))
    total += _bytes(layer.dense_mlp / layout.tp, quantized("dense_mlp"))
    total += _bytes(layer.shared_experts / layout.tp, quantized("shared_experts"))
    if layer.routed_experts:
        if layout.ep > 1:
            experts_here = math.ceil(model.n_routed_experts / layout.ep)
            routed: float = experts_here * layer.routed_expert_each
        else:
            routed = layer.routed_experts / layout.tp
        total += _bytes(routed, quantized("experts"))
    total += _bytes(layer.norms + layer.router, BF16_BYTES * 8)  # never quantized
    return total


@functools.lru_cache(maxsize=4096)
def stage_groups(
    params: ParamBreakdown, model: ModelSpec, pp: int
) -> tuple[tuple[tuple[LayerParams, int | None, int], ...], ...]:
    """Per stage, its distinct (layer params, KV window, count): a 61-layer model has 2-3 kinds of
    layer, so memory is summed over kinds instead of layers (the layout search calls this a lot)."""
    result = []
    for layers in stage_layers(model.num_layers, pp):
        kinds = Counter((params.layers[i], model.kv_window(i)) for i in layers)
        result.append(tuple((layer, window, count) for (layer, window), count in kinds.items()))
    return tuple(result)


@functools.lru_cache(maxsize=4096)
def stage_layers(num_layers: int, pp: int) -> list[range]:
    """Split layers into pp contiguous stages as evenly as possible (earlier stages get the extra)."""
    base, extra = divmod(num_layers, pp)
    stages, start = [], 0
    for stage in range(pp):
        size = base + (1 if stage < extra else 0)
        stages.append(range(start, start + size))
        start += size
    return stages


def weights_per_stage(
    params: ParamBreakdown, model: ModelSpec, precision: PrecisionSpec, layout: Layout, keep: frozenset[str]
) -> list[float]:
    stages = stage_groups(params, model, layout.pp)
    result = []
    for index, groups in enumerate(stages):
        stage_bytes = sum(
            count * layer_weight_bytes(layer, model, precision, layout, keep) for layer, _window, count in groups
        )
        if index == 0:  # embeddings (vocab-parallel over TP) and the vision tower live on the first stage
            stage_bytes += _bytes(params.embedding / layout.tp + params.vision, BF16_BYTES * 8)
        if index == len(stages) - 1:
            stage_bytes += _bytes(params.lm_head / layout.tp + params.final_norm, BF16_BYTES * 8)
        result.append(stage_bytes)
    return result


@functools.lru_cache(maxsize=1024)
def weights_total_bytes(
    params: ParamBreakdown, model: ModelSpec, precision: PrecisionSpec, keep: frozenset[str]
) -> int:
    single = Layout(1, 1, 1, 1)
    return int(sum(weights_per_stage(params, model, precision, single, keep)))


def kv_bytes_per_token_layer(model: ModelSpec, kv_dtype: str, tp: int) -> float:
    """KV bytes one GPU holds per token for one layer.

    GQA: 2 (K and V) x ceil(n_kv / TP) heads x head_dim. MLA: the latent (kv_lora_rank +
    rope dims), which every TP rank holds whole: it is NOT divided by TP.
    """
    width = KV_BYTES[kv_dtype]
    if model.attention == "mla":
        return (model.kv_lora_rank + model.qk_rope_head_dim) * width
    return 2 * math.ceil(model.num_kv_heads / tp) * model.head_dim * width


def kv_per_stage(
    params: ParamBreakdown, model: ModelSpec, kv_dtype: str, layout: Layout, max_model_len: int
) -> list[tuple[float, float]]:
    """(bytes per token, bytes per full-length sequence) per stage; windowed layers capped."""
    per_layer = kv_bytes_per_token_layer(model, kv_dtype, layout.tp)
    result = []
    for groups in stage_groups(params, model, layout.pp):
        per_token = per_layer * sum(count for _layer, _window, count in groups)
        per_sequence = sum(
            per_layer * count * (min(window, max_model_len) if window else max_model_len)
            for _layer, window, count in groups
        )
        result.append((per_token, per_sequence))
    return result


def activation_bytes(model: ModelSpec, layout: Layout, engine: EngineConvention, max_model_len: int) -> int:
    """Peak activations for one prefill chunk: residual stream and attention in BF16, the widest
    MLP intermediate on this rank, and FP32 logits for the chunk's sampled rows (one per sequence)."""
    tokens = min(engine.prefill_chunk_tokens, max_model_len)
    widest_mlp = max(
        model.dense_intermediate_size // layout.tp,
        model.moe_intermediate_size * model.experts_per_token // max(layout.tp, 1),
        model.moe_intermediate_size,
    )
    q_width = model.num_attention_heads * max(model.head_dim, model.qk_nope_head_dim + model.qk_rope_head_dim)
    per_token = BF16_BYTES * (4 * model.hidden_size + 2 * widest_mlp + 3 * q_width // layout.tp)
    logits = 256 * model.vocab_size // layout.tp * 4
    return int(tokens * per_token + logits)


def memory_breakdown(
    *,
    model: ModelSpec,
    params: ParamBreakdown,
    precision: PrecisionSpec,
    gpu: GpuSpec,
    layout: Layout,
    kv_dtype: str,
    max_model_len: int,
    gpu_memory_utilization: float,
    keep_bf16: frozenset[str],
    engine: EngineConvention = VLLM,
) -> MemoryBreakdown:
    stage_weights = weights_per_stage(params, model, precision, layout, keep_bf16)
    stage_kv = kv_per_stage(params, model, kv_dtype, layout, max_model_len)
    activations = activation_bytes(model, layout, engine, max_model_len)
    overhead = engine.cuda_context_bytes + engine.cuda_graph_bytes + (engine.nccl_bytes if layout.gpus > 1 else 0)
    capacity = int(gpu.memory_bytes * gpu_memory_utilization)
    # The heaviest stage bounds everyone: its pool is the smallest relative to its KV needs.
    best: tuple[int, float, float, float] | None = None
    for weights, (kv_token, kv_sequence) in zip(stage_weights, stage_kv, strict=True):
        pool = capacity - weights - activations - overhead
        sequences = math.floor(pool / kv_sequence) if kv_sequence > 0 and pool > 0 else 0
        if best is None or sequences < best[0] or (sequences == best[0] and weights > best[1]):
            best = (sequences, weights, kv_token, kv_sequence)
    assert best is not None
    sequences, weights, kv_token, kv_sequence = best
    pool = int(capacity - weights - activations - overhead)
    effective_per_token = kv_sequence / max_model_len  # windows make long sequences cheaper per token
    tokens = int(pool / effective_per_token) // BLOCK_TOKENS * BLOCK_TOKENS if pool > 0 else 0
    full_copy = kv_bytes_per_token_layer(model, kv_dtype, 1) * model.num_layers
    return MemoryBreakdown(
        weights_total_bytes=weights_total_bytes(params, model, precision, keep_bf16),
        weights_per_gpu_bytes=int(weights),
        kv_bytes_per_token=int(full_copy),
        kv_bytes_per_token_per_gpu=int(kv_token),
        kv_bytes_per_sequence_per_gpu=int(kv_sequence),
        activations_bytes=activations,
        overhead_bytes=overhead,
        capacity_bytes=capacity,
        kv_pool_bytes=pool,
        kv_capacity_tokens=tokens,
        sequences_per_replica=sequences,
    )
