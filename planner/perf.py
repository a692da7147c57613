"""Throughput estimate: decode step by roofline with efficiencies, plus launch and communication latency.

Batch-1 roofline is 10-30x optimistic against measured engines; we add kernel-launch and
collective latency per layer, and still report batch-1 figures only as upper bounds.
"""

from __future__ import annotations

from dataclasses import dataclass

from planner.memory import Layout, stage_layers
from planner.params import ParamBreakdown
from planner.specs import GpuSpec, ModelSpec, PrecisionSpec

MEMORY_EFFICIENCY = 0.70  # achievable fraction of HBM bandwidth in decode GEMVs
COMPUTE_EFFICIENCY = 0.50  # achievable fraction of tensor-core peak (prefill 0.5-0.7)
KERNEL_LAUNCH_S = 4e-6  # per kernel, with CUDA graphs
KERNELS_PER_LAYER = 12
COLLECTIVE_LATENCY_S = 10e-6  # one NCCL all-reduce / all-to-all hop inside a node
PREFILL_TOKENS = 2048  # prompt length the TTFT figure assumes


@dataclass(frozen=True, slots=True)
class Throughput:
    decode_tokens_per_s: float
    tpot_ms: float
    ttft_ms: float
    batch: int  # concurrent sequences per replica used for the figure
    batch1_tokens_per_s_upper_bound: float


def experts_touched(local_experts: float, total_experts: int, top_k: int, batch: int) -> float:
    """Expected distinct local experts hit by `batch` tokens under uniform routing."""
    if total_experts == 0:
        return 0.0
    return local_experts * (1 - (1 - top_k / total_experts) ** batch)


def _decode_step_s(
    *,
    model: ModelSpec,
    params: ParamBreakdown,
    precision: PrecisionSpec,
    gpu: GpuSpec,
    layout: Layout,
    batch: int,
    context: int,
    kv_bytes_per_token_per_gpu: float,
) -> float:
    bits = precision.bits_per_weight
    layers = max(len(stage) for stage in stage_layers(model.num_layers, layout.pp))
    layer = params.heaviest_layer
    dense_bytes = (layer.attention / layout.tp + layer.attention_replicated + layer.dense_mlp / layout.tp
                   + layer.shared_experts / layout.tp) * bits / 8  # fmt: skip
    expert_bytes = 0.0
    if layer.routed_experts:
        local = model.n_routed_experts / max(layout.ep, 1)
        share = 1.0 if layout.ep > 1 else 1 / layout.tp
        # With EP over DP ranks, each rank serves the tokens of every replica.
        tokens = batch * (layout.dp if layout.ep == layout.tp * layout.dp and layout.dp > 1 else 1)
        touched = experts_touched(local, model.n_routed_experts, model.experts_per_token, tokens)
        expert_bytes = touched * layer.routed_expert_each * share * bits / 8
    kv_read = batch * context * kv_bytes_per_token_per_gpu  # this stage's layers, windows not discounted
    bytes_per_step = layers * (dense_bytes + expert_bytes) + kv_read
    bytes_per_step += params.lm_head / layout.tp * 2
    flops = 2 * params.active_per_token / (layout.tp * layout.pp) * batch
    attention_flops = 4 * batch * context * model.num_attention_heads * model.head_dim * layers / layout.tp
    compute_s = (flops + attention_flops) / (gpu.peak_tflops(precision.compute) * 1e12 * COMPUTE_EFFICIENCY)
    memory_s = bytes_per_step / (gpu.hbm_bandwidth_gb_per_s * 1e9 * MEMORY_EFFICIENCY)
    comm_s = 0.0
    if layout.tp > 1:
        message = batch * model.hidden_size * 2 * 2 * (layout.tp - 1) / layout.tp
        comm_s += 2 * layers * (COLLECTIVE_LATENCY_S + message / (gpu.nvlink_gb_per_s * 1e9))
    if layout.ep > 1 and layer.routed_experts:
        message = batch * model.experts_per_token * model.hidden_size * 2
        comm_s += 2 * layers * (COLLECTIVE_LATENCY_S + message / (gpu.nvlink_gb_per_s * 1e9))
    launch_s = layers * KERNELS_PER_LAYER * KERNEL_LAUNCH_S
    return max(compute_s, memory_s) + comm_s + launch_s


def estimate(
    *,
    model: ModelSpec,
    params: ParamBreakdown,
    precision: PrecisionSpec,
    gpu: GpuSpec,
    layout: Layout,
    concurrency: int,
    max_model_len: int,
    kv_bytes_per_token_per_gpu: float,
) -> Throughput:
    """Tokens/s for `concurrency` sequences in total (spread over DP replicas), mid-way through
    sequences of max_model_len/2 context; TTFT for a PREFILL_TOKENS prompt on an idle replica."""
    batch = max(1, -(-concurrency // layout.dp))
    context = max(1, max_model_len // 2)
    stage_s = _decode_step_s(
        model=model,
        params=params,
        precision=precision,
        gpu=gpu,
        layout=layout,
        batch=batch,
        context=context,
        kv_bytes_per_token_per_gpu=kv_bytes_per_token_per_gpu,
    )
    tpot_s = stage_s * layout.pp  # a token passes every stage
    one_s = (
        _decode_step_s(
            model=model,
            params=params,
            precision=precision,
            gpu=gpu,
            layout=layout,
            batch=1,
            context=context,
            kv_bytes_per_token_per_gpu=kv_bytes_per_token_per_gpu,
        )
        * layout.pp
    )
    prompt = min(PREFILL_TOKENS, max_model_len)
    prefill_flops = (
        2 * params.active_per_token * prompt
        + 2 * prompt * prompt * model.num_attention_heads * model.head_dim * model.num_layers
    )
    ttft_s = prefill_flops / (layout.tp * layout.pp * gpu.peak_tflops(precision.compute) * 1e12 * COMPUTE_EFFICIENCY)
    ttft_s += tpot_s
    return Throughput(
        decode_tokens_per_s=batch * layout.dp / tpot_s,
        tpot_ms=tpot_s * 1000,
        ttft_ms=ttft_s * 1000,
        batch=batch,
        batch1_tokens_per_s_upper_bound=1 / one_s,
    )
