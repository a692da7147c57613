"""Per-GPU memory under a parallel layout: weights, KV cache, activations and reserves, in a named
engine's accounting (planner/engines.py), because engines differ up to 2x in KV tokens.

All figures are bytes (int).
"""

from __future__ import annotations

import functools
import itertools
import math
from collections import Counter
from dataclasses import dataclass

from planner.allocator import SMALL_SIZE, reserved_bytes_of_runs
from planner.engines import EngineProfile, activation_bytes, engine_profile
from planner.engines.profile import POOL_OF_FREE, POOL_OF_STATIC_FRACTION
from planner.params import LayerParams, ParamBreakdown
from planner.specs import LINEAR_STATE, GpuSpec, ModelSpec, PrecisionSpec

GIB = 1 << 30
# A GPU whose catalog link is below this has no NVLink, only PCIe (the catalog's PCIe cards list 32 GB/s).
PCIE_CLASS_GB_PER_S = 100
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


# Each engine's startup-log names for the breakdown's figures, in its log's order.
ENGINE_LOG_NAMES: dict[str, tuple[str, ...]] = {
    "vllm": (
        "total_gpu_memory",
        "requested_memory",
        "model_loading",
        "torch_peak_increase",
        "non_torch_memory",
        "available_kv_cache_memory",
        "gpu_kv_cache_tokens",
    ),
    "sglang": (
        "total_gpu_memory",
        "mem_fraction_static_bytes",
        "weights_memory",
        "memory_before_kv_pool",
        "kv_cache_memory",
        "max_total_num_tokens",
    ),
    "trtllm": (
        "total_gpu_memory",
        "model_weights_memory",
        "activation_memory",
        "runtime_buffers",
        "kv_cache_memory",
        "max_tokens_in_paged_kv_cache",
    ),
}
# The MemoryBreakdown attribute behind each log name.
LOG_FIGURES = {
    name: attribute
    for attribute, names in {
        "total_gpu_memory_bytes": ("total_gpu_memory",),
        "capacity_bytes": ("requested_memory", "mem_fraction_static_bytes"),
        "loaded_bytes": ("model_loading", "weights_memory", "model_weights_memory"),
        "activations_bytes": ("torch_peak_increase", "activation_memory"),
        "non_torch_bytes": ("non_torch_memory", "memory_before_kv_pool", "runtime_buffers"),
        "kv_pool_bytes": ("available_kv_cache_memory", "kv_cache_memory"),
        "kv_capacity_tokens": ("gpu_kv_cache_tokens", "max_total_num_tokens", "max_tokens_in_paged_kv_cache"),
    }.items()
    for name in names
}


@dataclass(frozen=True, slots=True)
class MemoryBreakdown:
    weights_total_bytes: int  # one full copy of the model at this precision
    weights_per_gpu_bytes: int  # heaviest GPU
    kv_bytes_per_token: int  # one full copy: all layers, one replica
    kv_bytes_per_token_per_gpu: int  # what one GPU of the heaviest stage holds per token
    kv_bytes_per_sequence_per_gpu: int  # at max_model_len, windows capped
    activations_bytes: int
    capacity_bytes: int  # memory * gpu_memory_utilization
    kv_pool_bytes: int  # what is left for the KV cache (may be negative: does not fit)
    kv_capacity_tokens: int  # whole blocks of the engine's block size
    sequences_per_replica: int  # full-length sequences that fit in the pool
    total_gpu_memory_bytes: int  # what CUDA reports
    non_torch_bytes: int
    max_num_batched_tokens: int
    max_num_seqs: int
    engine: EngineProfile
    # What the caching allocator reserves beyond the weights' bytes, where the engine counts it (it sizes
    # the pool from the device's free memory: SGLang); 0 where it counts the tensors (vLLM).
    allocator_slack_bytes: int = 0
    rope_cache_bytes: int = 0  # the rotary embedding's cos/sin cache, built on every GPU with the model

    @property
    def loaded_bytes(self) -> int:
        """What loading the model takes as the engine's log counts it ("Model loading took", SGLang's
        weights "mem usage"): the weights, the rope cache and, where the engine counts it, the rounding."""
        return self.weights_per_gpu_bytes + self.rope_cache_bytes + self.allocator_slack_bytes

    @property
    def engine_figures(self) -> tuple[tuple[str, int], ...]:
        """The breakdown in the engine's own log names, in the order its startup log prints them."""
        names = ENGINE_LOG_NAMES.get(self.engine.name, ENGINE_LOG_NAMES["vllm"])
        return tuple((name, int(getattr(self, LOG_FIGURES[name]))) for name in names)

    @property
    def overhead_bytes(self) -> int:
        """Memory besides the weights, KV cache and activations: outside the torch allocator (CUDA context,
        NCCL buffers), the rope cache and, where the engine counts it, the allocator's rounding of the
        weights. The contract's `overhead`."""
        return self.non_torch_bytes + self.rope_cache_bytes + self.allocator_slack_bytes

    @property
    def total_bytes(self) -> int:
        return self.weights_per_gpu_bytes + max(self.kv_pool_bytes, 0) + self.activations_bytes + self.overhead_bytes


def _bytes(elements: float, bits: float) -> float:
    return elements * bits / 8


def _keep_bf16(part: str, keep: frozenset[str]) -> bool:
    return part in keep


def _expert_padding(model: ModelSpec, precision: PrecisionSpec, padding: tuple[int, int], layout: Layout) -> float:
    """The MXFP4 loader pads each expert for its kernel (EngineProfile.mxfp4_padding): the hidden size, and
    the intermediate size of each TP rank's slice (a whole expert per rank with EP)."""
    hidden_to, intermediate_to = padding
    if precision.key != "mxfp4" or not hidden_to:
        return 1.0
    hidden = -(-model.hidden_size // hidden_to) * hidden_to / model.hidden_size
    part = model.moe_intermediate_size if layout.ep > 1 else model.moe_intermediate_size / layout.tp
    intermediate = -(-math.ceil(part) // intermediate_to) * intermediate_to / part if part else 1.0
    return hidden * intermediate


def _kv_heads_per_rank(model: ModelSpec, tp: int) -> float:
    """K/V heads of a GQA layer's projections on one TP rank: they replicate when TP exceeds them (each
    rank still holds one whole KV head)."""
    return math.ceil(model.num_kv_heads / tp) if tp > model.num_kv_heads else model.num_kv_heads / tp


@functools.lru_cache(maxsize=65536)
def layer_weight_bytes(
    layer: LayerParams,
    model: ModelSpec,
    precision: PrecisionSpec,
    layout: Layout,
    keep: frozenset[str],
    padding: tuple[int, int] = (0, 0),
) -> float:
    """Bytes of one layer on one GPU: attention and dense MLP / TP, experts / EP (or / TP without EP)."""
    bits = precision.bits_per_weight

    def quantized(part: str) -> float:
        return BF16_BYTES * 8 if _keep_bf16(part, keep) else bits

    attention = layer.attention
    if model.attention == "gqa" and layout.tp > model.num_kv_heads and not layer.linear_attention:
        kv_per_rank = 2 * _kv_heads_per_rank(model, layout.tp) * model.head_dim * model.hidden_size
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
        total += _bytes(routed * _expert_padding(model, precision, padding, layout), quantized("experts"))
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


@functools.lru_cache(maxsize=65536)  # GPU-independent: a search over GPUs reuses it for every card
def weights_per_stage(
    params: ParamBreakdown,
    model: ModelSpec,
    precision: PrecisionSpec,
    layout: Layout,
    keep: frozenset[str],
    padding: tuple[int, int] = (0, 0),
) -> tuple[float, ...]:
    stages = stage_groups(params, model, layout.pp)
    result = []
    for index, groups in enumerate(stages):
        stage_bytes = sum(
            count * layer_weight_bytes(layer, model, precision, layout, keep, padding)
            for layer, _window, count in groups
        )
        if index == 0:  # embeddings (vocab-parallel over TP) and the vision tower live on the first stage
            stage_bytes += _bytes(params.embedding / layout.tp + params.vision, BF16_BYTES * 8)
        if index == len(stages) - 1:
            stage_bytes += _bytes(params.lm_head / layout.tp + params.final_norm, BF16_BYTES * 8)
        result.append(stage_bytes)
    return tuple(result)


def _tensor_bytes(elements: float, bits: float, precision: PrecisionSpec) -> tuple[int, ...]:
    """One quantized weight as the loader allocates it: the packed weight, then its scales (and zeros)."""
    if bits == BF16_BYTES * 8 or not precision.group_size:
        return (int(_bytes(elements, bits)),)
    weight = int(_bytes(elements, precision.weight_bits))
    return weight, int(_bytes(elements / precision.group_size, precision.scale_bits + precision.zero_bits))


@functools.lru_cache(maxsize=4096)
def layer_tensor_bytes(
    layer: LayerParams,
    model: ModelSpec,
    precision: PrecisionSpec,
    layout: Layout,
    keep: frozenset[str],
    padding: tuple[int, int],
) -> tuple[int, ...]:
    """One GPU's large tensors of a layer, in the order the model's __init__ creates them (attention,
    then the MLP: router, experts' gate/up and down, shared experts). Tensors of 1 MiB or less (norms,
    biases, most scales) are left out: the allocator packs them into 2 MiB small-pool segments, whose
    rounding is at most a segment or two per GPU."""
    bits = precision.bits_per_weight
    tp, h = layout.tp, model.hidden_size

    def weight(elements: float, part: str) -> tuple[int, ...]:
        return _tensor_bytes(elements, BF16_BYTES * 8 if _keep_bf16(part, keep) else bits, precision)

    sizes: list[int] = []
    if layer.linear_attention:
        keys = model.linear_key_heads * model.linear_key_head_dim
        values = model.linear_value_heads * model.linear_value_head_dim
        for elements in (h * (2 * keys + 2 * values), h * 2 * model.linear_value_heads, values * h):
            sizes += weight(elements / tp, "attention")
    elif model.attention == "mla":
        heads = model.num_attention_heads / tp
        qk_head = model.qk_nope_head_dim + model.qk_rope_head_dim
        kv_a = h * (model.kv_lora_rank + model.qk_rope_head_dim)
        if model.q_lora_rank:  # q_a and kv_a fused into one replicated projection
            sizes += weight(kv_a + h * model.q_lora_rank, "attention")
            sizes += weight(model.q_lora_rank * heads * qk_head, "attention")
        else:
            sizes += weight(h * heads * qk_head, "attention")
            sizes += weight(kv_a, "attention")
        sizes += weight(model.kv_lora_rank * heads * (model.qk_nope_head_dim + model.v_head_dim), "attention")
        sizes += weight(heads * model.v_head_dim * h, "attention")
    else:
        q = model.num_attention_heads * model.head_dim * (2 if model.attention_output_gate else 1) / tp
        kv = _kv_heads_per_rank(model, tp) * model.head_dim
        sizes += weight(h * (q + 2 * kv), "attention")
        sizes += weight(model.num_attention_heads * model.head_dim / tp * h, "attention")
    if layer.dense_mlp:
        intermediate = model.dense_intermediate_size / tp
        sizes += weight(2 * intermediate * h, "dense_mlp")
        sizes += weight(intermediate * h, "dense_mlp")
    if layer.routed_experts:
        sizes.append(int(_bytes(layer.router, BF16_BYTES * 8)))
        if layout.ep > 1:
            experts: float = math.ceil(model.n_routed_experts / layout.ep) * model.moe_intermediate_size
        else:
            experts = model.n_routed_experts * model.moe_intermediate_size / tp
        experts *= _expert_padding(model, precision, padding, layout)
        sizes += weight(2 * experts * h, "experts")
        sizes += weight(experts * h, "experts")
    if layer.shared_experts:
        shared = layer.shared_experts / 3 / h / tp  # gate, up and down of the shared experts
        sizes += weight(2 * shared * h, "shared_experts")
        sizes += weight(shared * h, "shared_experts")
    return tuple(size for size in sizes if size > SMALL_SIZE)


@functools.lru_cache(maxsize=4096)
def allocator_slack_per_stage(
    params: ParamBreakdown,
    model: ModelSpec,
    precision: PrecisionSpec,
    layout: Layout,
    keep: frozenset[str],
    padding: tuple[int, int] = (0, 0),
) -> tuple[int, ...]:
    """Per pipeline stage, what PyTorch's caching allocator reserves beyond the weights' own bytes
    (planner/allocator.py): an engine that measures its weights by the device's free memory counts it."""
    if layout.dp > 1:  # replicas do not change one GPU's tensors: one cache entry for every dp
        return allocator_slack_per_stage(
            params, model, precision, Layout(layout.tp, layout.pp, layout.ep, 1), keep, padding
        )
    result = []
    stages = stage_layers(model.num_layers, layout.pp)
    # The vocabulary is padded to a multiple of 64 before it is split over the TP ranks (vLLM, SGLang).
    vocab_rows = -(-model.vocab_size // 64) * 64 // layout.tp
    for index, layers in enumerate(stages):
        embedding = ((vocab_rows * model.hidden_size * BF16_BYTES,), 1)
        runs: list[tuple[tuple[int, ...], int]] = [embedding] if index == 0 else []
        for layer, repeats in itertools.groupby(params.layers[i] for i in layers):
            runs.append((layer_tensor_bytes(layer, model, precision, layout, keep, padding), len(list(repeats))))
        if index == len(stages) - 1 and params.lm_head:
            runs.append(embedding)
        result.append(reserved_bytes_of_runs(runs) - sum(sum(sizes) * count for sizes, count in runs))
    return tuple(result)


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


def window_charge_tokens(window: int | None, max_model_len: int, engine: EngineProfile, batched_tokens: int) -> int:
    """Tokens the engine reserves per sequence for a layer. vLLM V1's hybrid allocator charges a window
    layer min(window - 1 + max_num_batched_tokens, max_model_len) plus one block (a prefill chunk
    attends back a whole window); engines without it charge every layer the whole context."""
    if not window or not engine.hybrid_kv_allocator:
        return max_model_len
    return min(window - 1 + batched_tokens, max_model_len) + engine.block_size_tokens


@functools.lru_cache(maxsize=65536)
def kv_per_stage(
    params: ParamBreakdown,
    model: ModelSpec,
    kv_dtype: str,
    layout: Layout,
    max_model_len: int,
    engine: EngineProfile | None = None,
    batched_tokens: int = 8192,
) -> tuple[tuple[float, float], ...]:
    """(bytes per token over the stage's layers, bytes per full-length sequence) per stage."""
    engine = engine or engine_profile()
    per_layer = kv_bytes_per_token_layer(model, kv_dtype, layout.tp)
    # A linear-attention layer's state, in the model's dtype whatever the KV dtype (vLLM's mamba cache
    # dtype "auto"): charged once per sequence, nothing per token.
    state = model.linear_state_elements(layout.tp) * BF16_BYTES if model.linear_layers else 0
    result = []
    for groups in stage_groups(params, model, layout.pp):
        per_token = per_layer * sum(count for _layer, window, count in groups if window != LINEAR_STATE)
        per_sequence = sum(
            count * state
            if window == LINEAR_STATE
            else per_layer * count * window_charge_tokens(window, max_model_len, engine, batched_tokens)
            for _layer, window, count in groups
        )
        result.append((per_token, per_sequence))
    return tuple(result)


def rope_cache_bytes(model: ModelSpec, engine: EngineProfile) -> int:
    """The rotary embedding's cos/sin cache every GPU builds with the model: a cos and a sin value per
    rotary pair for each position the rope covers (max_position_embeddings, or a YaRN / linear scaling's
    original length times its factor), at the engine's bytes per value. One cache per model: layers
    share it (Gemma 3's second, local rope is not counted)."""
    rotary = model.qk_rope_head_dim if model.attention == "mla" else int(model.head_dim * model.rotary_fraction)
    positions = model.rope_positions or model.max_position_embeddings
    return positions * rotary * engine.rope_cache_value_bytes


def corrected_reserves(non_torch: int, activations: int, engine: EngineProfile, correction: int) -> tuple[int, int]:
    """(non-torch, activations) bytes less the team's reserve correction: off the non-torch reserve first, then
    off the activations where they come out of the pool (not SGLang's static fraction), neither below zero; a
    negative correction (the logs' pools ran smaller) adds to the non-torch reserve."""
    if correction <= 0:
        return non_torch - correction, activations
    from_non_torch = min(non_torch, correction)
    rest = correction - from_non_torch
    if engine.kv_pool == POOL_OF_STATIC_FRACTION:
        return non_torch - from_non_torch, activations
    return non_torch - from_non_torch, max(0, activations - rest)


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
    engine: EngineProfile | None = None,
    max_num_batched_tokens: int | None = None,
    max_num_seqs: int | None = None,
) -> MemoryBreakdown:
    engine = engine or engine_profile()
    default_tokens, default_seqs = engine.defaults(gpu, max_model_len)
    batched = max_num_batched_tokens or default_tokens
    seqs = max_num_seqs or default_seqs
    rope = rope_cache_bytes(model, engine)
    # Only MXFP4 experts are padded: other schemes share one cache entry across GPUs (the search plans many).
    padding = engine.mxfp4_padding(gpu) if precision.key == "mxfp4" else (0, 0)
    stage_weights = weights_per_stage(params, model, precision, layout, keep_bf16, padding)
    stage_kv = kv_per_stage(params, model, kv_dtype, layout, max_model_len, engine, batched)
    activations = activation_bytes(model, layout.tp, engine, batched, seqs)
    # GPUs with no NVLink (PCIe cards) keep no NVLink buffers (custom all-reduce, NVLink SHARP).
    non_torch = engine.non_torch_bytes(layout.gpus, pcie=gpu.nvlink_gb_per_s < PCIE_CLASS_GB_PER_S)
    # the team's correction of this layout's replica shape (planner.intervals.corrected_profile)
    correction = (
        engine.reserve_correction_multi_gpu_bytes if layout.tp * layout.pp > 1 else engine.reserve_correction_bytes
    )
    if correction:
        non_torch, activations = corrected_reserves(non_torch, activations, engine, correction)
    total = gpu.memory_bytes
    capacity = int(total * gpu_memory_utilization)

    if engine.weights_by_free_memory:
        stage_slack = allocator_slack_per_stage(params, model, precision, layout, keep_bf16, padding)
    else:
        stage_slack = (0,) * len(stage_weights)

    def pool_for(weights: float, slack: int) -> int:
        loaded = weights + rope + slack  # the weights as the engine counts them
        if engine.kv_pool == POOL_OF_STATIC_FRACTION:  # activations live outside mem_fraction_static
            return int(capacity - loaded - non_torch)
        if engine.kv_pool == POOL_OF_FREE:  # a fraction of what is free after everything else
            return int((total - loaded - activations - non_torch) * gpu_memory_utilization)
        return int(capacity - loaded - activations - non_torch)

    # The heaviest stage bounds everyone: its pool is the smallest relative to its KV needs.
    best: tuple[int, float, float, float, int] | None = None
    for weights, slack, (kv_token, kv_sequence) in zip(stage_weights, stage_slack, stage_kv, strict=True):
        pool = pool_for(weights, slack)
        sequences = math.floor(pool / kv_sequence) if kv_sequence > 0 and pool > 0 else 0
        if best is None or sequences < best[0] or (sequences == best[0] and weights > best[1]):
            best = (sequences, weights, kv_token, kv_sequence, slack)
    if best is None:  # the loop runs once per stage, and a layout has at least one
        raise ValueError("layout: no pipeline stage to plan")
    sequences, weights, kv_token, kv_sequence, slack = best
    pool = pool_for(weights, slack)
    block = engine.block_size_tokens
    tokens = int(pool // kv_token) // block * block if pool > 0 and kv_token > 0 else 0
    full_copy = kv_bytes_per_token_layer(model, kv_dtype, 1) * (model.num_layers - len(model.linear_layers))
    return MemoryBreakdown(
        weights_total_bytes=weights_total_bytes(params, model, precision, keep_bf16),
        weights_per_gpu_bytes=int(weights),
        kv_bytes_per_token=int(full_copy),
        kv_bytes_per_token_per_gpu=int(kv_token),
        kv_bytes_per_sequence_per_gpu=int(kv_sequence),
        kv_pool_bytes=pool,
        kv_capacity_tokens=tokens,
        sequences_per_replica=sequences,
        # Figures as the engine counts them: SGLang's activations live outside its static fraction,
        # TensorRT-LLM's fraction applies to what is free rather than to the whole GPU.
        activations_bytes=activations if engine.kv_pool != POOL_OF_STATIC_FRACTION else 0,
        capacity_bytes=capacity if engine.kv_pool != POOL_OF_FREE else total,
        total_gpu_memory_bytes=total,
        non_torch_bytes=non_torch,
        engine=engine,
        max_num_batched_tokens=batched,
        max_num_seqs=seqs,
        allocator_slack_bytes=slack,
        rope_cache_bytes=rope,
    )
