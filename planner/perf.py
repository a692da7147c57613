"""Throughput estimate of a serving engine at steady state: TPOT, TTFT and delivered tokens/s.

A decode step is summed per layer kind from rooflines (weights, experts touched, KV reads, FLOPs)
divided by efficiencies, plus per-kernel overhead and collectives; the prefill chunks of arriving
requests ride in the same steps (chunked prefill under `max_num_batched_tokens`), so long prompts at
high concurrency slow every token. Efficiencies come from a calibration profile measured on the
user's GPUs where it has the figure, else from the defaults in catalog/efficiency.yaml; the result
says which. Every figure is an estimate and carries the inputs it used.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from planner.efficiency import (
    EngineSettings,
    Factors,
    Rates,
    default_factors,
    engine_settings,
    fp8_path_until,
    single_sources,
)
from planner.engines import ENGINES
from planner.memory import Layout, kv_bytes_per_token_layer, layer_weight_bytes, stage_groups
from planner.params import LayerParams, ParamBreakdown
from planner.specs import LINEAR_STATE, GpuSpec, ModelSpec, PrecisionSpec

if TYPE_CHECKING:
    from planner.calibrate.profile import CalibrationProfile

__all__ = [
    "ARRIVALS",
    "ENGINES",
    "EngineSettings",
    "Factors",
    "Throughput",
    "Workload",
    "default_factors",
    "engine_settings",
    "estimate",
    "experts_touched",
    "step_s",
]

BF16 = 2
ARRIVALS = ("burst", "spread", "poisson")


@dataclass(frozen=True, slots=True)
class Workload:
    input_len: int
    output_len: int
    concurrency: int  # requests in flight over all DP replicas
    # Leading prompt tokens whose KV the engine already holds (automatic prefix caching: vLLM V1
    # enables it by default, SGLang's radix cache): they are not prefilled again, but the new tokens
    # still attend to them.
    cached_prefix_len: int = 0
    # The engine's cap on running sequences per replica (--max-num-seqs, --max-running-requests); a
    # closed loop's other requests wait in its queue. None: no cap below the concurrency.
    max_num_seqs: int | None = None
    # How the clients' requests arrive (ARRIVALS): "burst", fixed lengths all sent at once, as
    # `vllm bench serve` and `sglang.bench_serving` do by default with --max-concurrency (the prompts one
    # prefill step holds finish together and come back together: the waves stay aligned); "spread",
    # clients whose requests arrive one at a time.
    arrival: str = "burst"
    request_rate: float | None = None  # requests/s over all replicas, with arrival "poisson" (an open loop)
    # Each request's input and output lengths drawn uniformly from [range_ratio x len, len], as
    # `sglang.bench_serving --random-range-ratio` and InferenceX's client (0.8 in its benchmark template)
    # draw them; 1: every request has the nominal lengths.
    range_ratio: float = 1.0
    # The length of a finite benchmark run (`--num-prompts` of `vllm bench serve`, `sglang.bench_serving`),
    # with a closed loop: all clients start at once on an idle engine, so the first wave's prompts queue
    # behind one another's prefill whatever their lengths, and a mean over the run weighs that wave by
    # concurrency / num_prompts. None: the steady state of an endless run.
    num_prompts: int | None = None


def shortest_length(length: int, range_ratio: float, *, least: int = 0) -> int:
    """The least of the lengths drawn uniformly from [max(int(length x range_ratio), least), length] (numpy's
    randint over that range, as the benchmark clients call it). sglang.bench_serving draws a prompt's
    length from at least 1 (its default ratio, 0, gives [1, len]) and an output's from 0."""
    return length if range_ratio >= 1 else max(int(length * range_ratio), least)


def mean_length(length: int, range_ratio: float, *, least: int = 0) -> float:
    """Mean of the lengths drawn as shortest_length says."""
    return (shortest_length(length, range_ratio, least=least) + length) / 2


def mean_new_tokens(length: int, range_ratio: float, cached_prefix_len: int) -> float:
    """Mean tokens a prompt prefills past a cached prefix of `cached_prefix_len`, its length drawn as
    mean_length draws it (from at least 1): max(1, L - cached) averaged over L (an engine recomputes at least
    the last token)."""
    cached = max(cached_prefix_len, 0)
    low = shortest_length(length, range_ratio, least=1)
    count = length - low + 1
    short = max(0, min(length, cached) - low + 1)  # prompts no longer than the prefix: one token each
    first = max(low, cached + 1) - cached  # new tokens of the shortest prompt past the prefix
    last = length - cached
    longer = (last * (last + 1) - (first - 1) * first) / 2 if last >= first else 0.0
    return (short + longer) / count


@dataclass(frozen=True, slots=True)
class Throughput:
    decode_tokens_per_s: float  # output tokens/s delivered by the deployment (all replicas)
    tpot_ms: float  # mean time per output token after the first, prefill interference included
    ttft_ms: float
    batch: int  # sequences in flight per replica
    batch1_tokens_per_s_upper_bound: float  # weights streamed at the HBM peak, nothing else
    decode_step_ms: float = 0.0  # one decode step of `batch` sequences with no prefill in it
    prefill_tokens_per_step: float = 0.0
    delivered_fraction: float = 1.0  # tokens/s over concurrency / TPOT
    input_len: int = 0
    output_len: int = 0
    cached_prefix_len: int = 0
    engine: str = "vllm"
    max_num_batched_tokens: int = 0
    scheduler_recv_interval: int = 1
    queued: int = 0  # requests per replica waiting for a slot (concurrency above max_num_seqs)
    arrival: str = "burst"
    request_rate: float | None = None
    range_ratio: float = 1.0
    num_prompts: int | None = None
    first_wave_ttft_ms: float = 0.0  # with num_prompts: the mean TTFT of the clients' first wave
    prefill_ms: float = 0.0  # a prompt's own prefill, arriving alone
    calibration: str | None = None
    fallbacks: tuple[str, ...] = ()
    measured: tuple[str, ...] = ()  # the profile's collective figures read instead of the catalog's
    single_source: tuple[str, ...] = ()  # fitted figures read here that stand on one corpus source
    keep_bf16: tuple[str, ...] = ()  # parts whose weights were read and multiplied as BF16
    w4a16_gemm_floor_us: float = 0.0  # the engine's per-call floor on INT4 GEMMs, where it applied
    fp8_gemm_floor_us: float = 0.0  # the release line's per-call floor on block-FP8 GEMMs, where its path was read
    fp8_release_path: str | None = None  # the release line whose block-FP8 decode path was read ("vllm before 0.8")
    eager_prefill_ms: float = 0.0  # the host time of an eager prefill step, where it bounds one
    batched_prefill_ms: float = 0.0  # GPU time of a prompt's prefill when prompts share full steps
    breakdown_ms: dict[str, float] = field(default_factory=dict)
    # The factors the team's canary measurements put on the estimate's figures (planner.measured): (figure,
    # factor) for tpot_ms and ttft_ms where enough were measured; tokens/s is divided by TPOT's.
    team_correction: tuple[tuple[str, float], ...] = ()

    def as_estimate(self) -> dict[str, Any]:
        """The figures with the inputs and basis they came from (the plan's `throughput_estimate`)."""
        return {
            "estimate": True,
            "inputs": {
                "input_len": self.input_len,
                "output_len": self.output_len,
                **({"cached_prefix_len": self.cached_prefix_len} if self.cached_prefix_len else {}),
                "sequences_per_replica": self.batch,
                "engine": self.engine,
                "max_num_batched_tokens": self.max_num_batched_tokens,
                "keep_bf16": list(self.keep_bf16),
                **({"w4a16_gemm_floor_us": self.w4a16_gemm_floor_us} if self.w4a16_gemm_floor_us else {}),
                **({"fp8_release_path": self.fp8_release_path} if self.fp8_release_path else {}),
                **({"fp8_gemm_floor_us": self.fp8_gemm_floor_us} if self.fp8_gemm_floor_us else {}),
                **({"eager_prefill_ms": round(self.eager_prefill_ms, 3)} if self.eager_prefill_ms else {}),
                "arrival": self.arrival,
                **({"request_rate": self.request_rate} if self.request_rate is not None else {}),
                **({"range_ratio": self.range_ratio} if self.range_ratio < 1 else {}),
                **({"num_prompts": self.num_prompts} if self.num_prompts else {}),
                **({"queued_per_replica": self.queued} if self.queued else {}),
                **(
                    {"scheduler_recv_interval": self.scheduler_recv_interval}
                    if self.scheduler_recv_interval > 1
                    else {}
                ),
            },
            "output_tokens_per_s": round(self.decode_tokens_per_s, 1),
            "tpot_ms": round(self.tpot_ms, 2),
            "ttft_ms": round(self.ttft_ms, 1),
            **({"first_wave_ttft_ms": round(self.first_wave_ttft_ms, 1)} if self.num_prompts else {}),
            "decode_step_ms": round(self.decode_step_ms, 3),
            "prefill_tokens_per_step": round(self.prefill_tokens_per_step, 1),
            "delivered_fraction": round(self.delivered_fraction, 3),
            "batch1_tokens_per_s_upper_bound": round(self.batch1_tokens_per_s_upper_bound, 1),
            "decode_step_breakdown_ms": {k: round(v, 3) for k, v in self.breakdown_ms.items()},
            "calibration": self.calibration,
            "fallbacks": list(self.fallbacks),
            **({"measured": list(self.measured)} if self.measured else {}),
            **({"single_source": list(self.single_source)} if self.single_source else {}),
            **({"team_correction": dict(self.team_correction)} if self.team_correction else {}),
        }


def experts_touched(local_experts: float, total_experts: int, top_k: int, batch: float) -> float:
    """Expected distinct local experts hit by `batch` tokens under uniform routing."""
    if total_experts == 0:
        return 0.0
    return float(local_experts * (1 - (1 - top_k / total_experts) ** batch))


# GEMM calls of each part of a layer in a decode step (fused gate/up, fused QKV): a weight format with a
# per-call floor pays it this many times. MLA projects queries through a low-rank pair when the model
# has q_lora_rank (DeepSeek-V3: q_a, q_b, kv_a, o; V2-Lite: q, kv_a, o); its kv_b is absorbed into BF16
# products at load.
_GEMM_CALLS: dict[str, Callable[[ModelSpec], int]] = {
    "attention": lambda model: (4 if model.q_lora_rank else 3) if model.attention == "mla" else 2,
    "dense_mlp": lambda model: 2,
    "shared_experts": lambda model: 2,
}
# The catalog's ROCm GPUs. Their engines run INT4 weight-only GEMMs through another kernel than Marlin
# (Triton), and SGLang prefills eagerly on them whatever the release.
ROCM_GPUS = frozenset({"mi300x"})
NON_MARLIN_GPUS = ROCM_GPUS


def _kernels(model: ModelSpec, layer: LayerParams, layout: Layout) -> int:
    """Kernels one layer launches in a decode step (fused norm+residual, projections, rope/cache
    write, attention, MoE routing/sort/grouped GEMMs/combine, collectives)."""
    count = 12 if model.attention == "mla" else 7
    if layer.dense_mlp:
        count += 4
    if layer.routed_experts:
        count += 8 + (3 if layer.shared_experts else 0)
    if layout.tp > 1:
        count += 2
    if layout.ep > 1 and layer.routed_experts:
        count += 2
    return count


def forward_kernels(model: ModelSpec, params: ParamBreakdown, layout: Layout) -> int:
    """Kernels one forward of the whole model launches (all pipeline stages)."""
    return sum(stage_kernels(model, params, layout))


@functools.lru_cache(maxsize=4096)  # a layout search asks it for every candidate (vLLM's graph memory)
def stage_kernels(model: ModelSpec, params: ParamBreakdown, layout: Layout) -> tuple[int, ...]:
    """Kernels each pipeline stage's GPUs launch in one forward."""
    return tuple(
        sum(count * _kernels(model, layer, layout) for layer, _window, count in groups)
        for groups in stage_groups(params, model, layout.pp)
    )


def eager_prefill_kernels(
    model: ModelSpec, params: ParamBreakdown, layout: Layout, precision: PrecisionSpec, keep: frozenset[str]
) -> int:
    """Kernels an eager prefill forward launches: the forward's, plus what graphs and compilers fuse
    away. A scheme that quantizes activations at run time (FP8, INT8, NVFP4) quantizes each GEMM's
    input in a kernel of its own before the GEMM (SGLang's fp8_utils: per_token_group_quant_fp8, then
    the block-scaled GEMM); MLA prefills in the expanded form, running kv_b_proj as a GEMM of its own
    (absorbed at load for decode)."""
    extra = 0
    for groups in stage_groups(params, model, layout.pp):
        for layer, _window, count in groups:
            present = ("attention", *(("dense_mlp",) if layer.dense_mlp else ()))
            present += ("shared_experts",) if layer.shared_experts else ()
            calls = sum(_GEMM_CALLS[part](model) for part in present if part not in keep)
            mla_kv_b = 1 if model.attention == "mla" else 0  # kv_b_proj's GEMM
            if "attention" not in keep:
                calls += mla_kv_b
            if layer.routed_experts and "experts" not in keep:
                calls += 2  # the grouped gate/up and down GEMMs
            extra += count * (mla_kv_b + (calls if precision.activation_bits < 16 else 0))
    return forward_kernels(model, params, layout) + extra


def step_s(
    *,
    model: ModelSpec,
    params: ParamBreakdown,
    precision: PrecisionSpec,
    layout: Layout,
    rates: Rates,
    keep: frozenset[str],
    kv_dtype: str,
    decode_tokens: float,
    decode_context: float,
    prefill_tokens: float = 0.0,
    prefill_context: float = 0.0,
) -> tuple[float, dict[str, float]]:
    """Seconds of one engine step on one replica (all pipeline stages) and its parts: `decode_tokens`
    sequences at `decode_context` plus a `prefill_tokens` chunk whose tokens see `prefill_context` on average."""
    tokens = decode_tokens + prefill_tokens
    h = model.hidden_size
    tp = layout.tp
    kv_layer = kv_bytes_per_token_layer(model, kv_dtype, tp)
    heads = max(1, model.num_attention_heads // tp)
    # FLOPs per (query, key) pair and head: QK^T plus PV. MLA decodes in the absorbed latent form
    # (576-wide keys, 512-wide values) and prefills in the expanded form (192 / 128).
    if model.attention == "mla":
        decode_width = 2 * (2 * model.kv_lora_rank + model.qk_rope_head_dim)
        prefill_width = 2 * (model.qk_nope_head_dim + model.qk_rope_head_dim + model.v_head_dim)
    else:
        decode_width = prefill_width = 4 * model.head_dim
    attn_shape = ((model.num_attention_heads + 2 * model.num_kv_heads) * model.head_dim // tp, h)
    act_bits = 16 if precision.activation_bits >= 16 else 8
    parts = {"dense_gemm": 0.0, "experts": 0.0, "attention": 0.0, "kernels": 0.0, "collectives": 0.0, "lm_head": 0.0}
    routed_tokens = tokens * (layout.dp if layout.ep == tp * layout.dp and layout.dp > 1 else 1)
    for groups in stage_groups(params, model, layout.pp):
        for layer, window, count in groups:
            total = total_with_experts = layer_weight_bytes(layer, model, precision, layout, keep)
            expert_bytes = 0.0
            if layer.routed_experts:
                local = model.n_routed_experts / layout.ep if layout.ep > 1 else model.n_routed_experts
                share = 1.0 if layout.ep > 1 else 1 / tp
                touched = experts_touched(local, model.n_routed_experts, model.experts_per_token, routed_tokens)
                each = layer.routed_expert_each * share
                bits = 16.0 if "experts" in keep else precision.bits_per_weight
                all_local = local * each * bits / 8
                expert_bytes = touched * each * bits / 8
                rows = routed_tokens * model.experts_per_token / model.n_routed_experts  # per expert, on average
                shape = (2 * model.moe_intermediate_size // (1 if layout.ep > 1 else tp), h)
                # FLOPs follow the rows that land on this GPU's experts, spread over the touched ones.
                per_touched = rows * local / touched if touched else 0.0
                experts_s = rates.gemm_s(
                    expert_bytes,
                    per_touched,
                    *shape,
                    experts=True,
                    rows_per_expert=rows,
                    touched=touched,
                    bf16="experts" in keep,
                    calls=2,  # the grouped gate/up and down calls over every touched expert
                )
                parts["experts"] += count * experts_s
                total -= all_local
            router = (layer.norms + layer.router) * BF16
            dense = max(total - router, 0.0)
            # Attention, dense MLP and shared experts all kept in BF16 (MXFP4 checkpoints quantize the
            # routed experts only) run BF16 GEMMs: their FLOPs follow BF16 bytes, not the scheme's bits.
            present = (
                "attention",
                *(("dense_mlp",) if layer.dense_mlp else ()),
                *(("shared_experts",) if layer.shared_experts else ()),
            )
            kept = frozenset(part for part in present if part in keep)
            calls = sum(_GEMM_CALLS[part](model) for part in present if part not in kept) if rates.gemm_floor_s else 1
            if kept and len(kept) < len(present) and precision.bits_per_weight < 16:
                # Partly kept in BF16 (an FP8 checkpoint's BF16 attention): the kept parts run BF16 GEMMs and
                # the rest the scheme's, with its floor. The kept parts' BF16 bytes are what the layer loses
                # when they are quantized too, scaled back: (A - B) / (1 - bits / 16).
                quantized = layer_weight_bytes(layer, model, precision, layout, keep - kept)
                kept_bytes = (total_with_experts - quantized) / (1 - precision.bits_per_weight / 16)
                dense_s = rates.gemm_s(kept_bytes, tokens, *attn_shape, bf16=True) + rates.gemm_s(
                    max(dense - kept_bytes, 0.0), tokens, *attn_shape, calls=max(calls, 1)
                )
            else:
                dense_s = rates.gemm_s(dense, tokens, *attn_shape, bf16=bool(kept), calls=max(calls, 1))
            parts["dense_gemm"] += count * (
                dense_s + rates.gemm_s(layer.router * BF16, tokens, model.n_routed_experts or 1, h, bf16=True)
            )
            if window == LINEAR_STATE:
                # Linear attention reads and writes each sequence's fixed state once a step, whatever the
                # context; its math is a state update and a readout per token and value head.
                state = model.linear_state_elements(tp) * BF16
                kv_read = 2 * state * (decode_tokens + (1 if prefill_tokens else 0))
                flops = 4 * tokens * model.linear_state_elements(tp)
            else:
                decode_ctx = min(decode_context, window) if window else decode_context
                prefill_ctx = min(prefill_context, window) if window else prefill_context
                kv_read = decode_tokens * decode_ctx * kv_layer + (
                    kv_layer * prefill_ctx * 2 if prefill_tokens else 0.0
                )
                flops = heads * (
                    decode_width * decode_tokens * decode_ctx + prefill_width * prefill_tokens * prefill_ctx
                )
            parts["attention"] += count * rates.attention_s(kv_read, flops)
            parts["kernels"] += count * _kernels(model, layer, layout) * rates.kernel_s()
            if tp > 1:
                parts["collectives"] += count * 2 * rates.collective_s("all_reduce", tokens * h * BF16, tp)
            # Experts split inside one replica (ep = tp) see every token after the attention all-reduce,
            # and the MoE output all-reduce above combines them: tokens move between GPUs only when
            # the experts are shared across DP replicas (ep = tp x dp).
            if layout.ep > tp and layer.routed_experts:
                message = routed_tokens / layout.dp * model.experts_per_token * h
                parts["collectives"] += count * 2 * rates.collective_s("all_to_all", message * act_bits / 8, layout.ep)
    lm_rows = decode_tokens + (1 if prefill_tokens else 0)
    parts["lm_head"] = rates.gemm_s(params.output_projection / tp * BF16, lm_rows, model.vocab_size // tp, h, bf16=True)
    if layout.pp > 1:
        parts["collectives"] += (layout.pp - 1) * rates.collective_s("all_reduce", tokens * h * BF16, 2)
    return sum(parts.values()), parts


@dataclass(frozen=True, slots=True)
class _Shape:
    """One replica's share of a closed-loop workload, in tokens: what every step below is sized from."""

    clients: int  # sequences per replica, those queued beyond the engine's running cap included
    batch: int  # sequences running
    prompt: int  # the mean prompt
    output: int  # the mean output
    new: int  # a prompt's tokens not in the cached prefix: what is prefilled
    cached: int
    budget: int  # prefill tokens a step holds beside the other sequences' decode tokens
    chunk: float  # one prompt's share of a step that prefills it
    context: float  # the mean context a decode token attends to
    micro: float  # sequences per pipeline stage (each stage holds a micro-batch)
    prefill_per_step: float  # the other sequences' prompt tokens arriving per decode step
    prefill_context: float  # what a prefill token attends to, on average


def _shape(workload: Workload, layout: Layout, engine: EngineSettings) -> _Shape:
    clients = max(1, -(-workload.concurrency // layout.dp))
    batch = min(clients, workload.max_num_seqs) if workload.max_num_seqs else clients
    # Lengths drawn from a range: the mean request stands for them (prefill work, KV read and output
    # tokens are linear in the lengths).
    prompt = max(1, round(mean_length(workload.input_len, workload.range_ratio, least=1)))
    output = max(1, round(mean_length(workload.output_len, workload.range_ratio)))
    # A cached prefix is not prefilled again (an engine recomputes at least the prompt's last token); with
    # lengths drawn from a range, the new tokens are the mean over the drawn prompts, not the mean prompt's.
    new = max(1, round(mean_new_tokens(workload.input_len, workload.range_ratio, workload.cached_prefix_len)))
    new = min(new, prompt)
    cached = prompt - new
    # The other sequences' decode tokens share each step's token budget (a lone one is not decoding
    # while its own prompt is prefilled).
    budget = max(engine.max_num_batched_tokens - (batch - 1), 16)
    return _Shape(
        clients=clients,
        batch=batch,
        prompt=prompt,
        output=output,
        new=new,
        cached=cached,
        budget=budget,
        chunk=float(min(new, budget)),
        context=prompt + output / 2,
        # Pipeline stages each hold a micro-batch: a token still crosses every stage.
        micro=max(1.0, batch / layout.pp),
        # The other sequences' prompts arrive as they finish: (batch - 1) x the uncached prompt tokens per
        # output_len steps, scheduled as whole chunks mixed into decode steps. A prefill token attends to
        # the cached prefix and to the new tokens before it.
        prefill_per_step=min((batch - 1) * new / output, budget),
        prefill_context=cached + new / 2,
    )


@dataclass(frozen=True, slots=True)
class _Steps:
    """The engine steps of one replica for a workload: `step_s` with the model, layout and rates
    bound (`common`), the host time of each step, and an eager engine's floor on a step that prefills."""

    common: Mapping[str, Any]
    shape: _Shape
    host_s: float
    # An engine that runs its prefill steps eagerly (SGLang before its piecewise CUDA graphs) launches
    # every kernel of the forward from Python: a step that prefills takes at least that host time,
    # however few tokens it holds. Each pipeline stage launches its own layers, one after another for a
    # prompt: the whole forward's host time.
    eager_s: float
    pp: int

    def with_prefill(self, step: float) -> float:
        return max(step, self.eager_s)

    def mixed_s(self, prefill_tokens: float) -> float:
        """A decode step of the whole batch that also prefills `prefill_tokens`."""
        shape = self.shape
        step, _ = step_s(
            **self.common,
            decode_tokens=shape.micro,
            decode_context=shape.context,
            prefill_tokens=prefill_tokens / self.pp,
            prefill_context=shape.prefill_context,
        )
        return self.with_prefill(step)

    def prefill_s(self, tokens: float) -> float:
        """Steps prefilling `tokens` in chunks of the step budget, the decode batch sharing them."""
        shape = self.shape
        total = 0.0
        for index in range(math.ceil(tokens / shape.budget)):
            size = min(shape.budget, tokens - index * shape.budget)
            step, _ = step_s(
                **self.common,
                decode_tokens=max(shape.micro - 1, 0.0) / 2,
                decode_context=shape.context,
                prefill_tokens=size / self.pp,
                prefill_context=shape.prefill_context,
            )
            total += self.with_prefill(step) + self.host_s
        return total

    def prefill_step_s(self, tokens: float) -> float:
        """A step that only prefills `tokens` (the GPU's time, without the eager floor)."""
        shape = self.shape
        return step_s(
            **self.common, decode_tokens=0.0, decode_context=shape.context, prefill_tokens=tokens / self.pp,
            prefill_context=shape.prefill_context,
        )[0]  # fmt: skip


@dataclass(frozen=True, slots=True)
class _Latency:
    """A request's latency in the steady state of a closed loop (seconds), and what set it."""

    ttft_s: float  # the mean over a finite run's first wave and the rest, when it has num_prompts
    cycle_s: float  # a request's whole time in a running slot: TTFT (without the queue) and its decode
    queue_s: float  # the wait in the engine's queue beyond its running cap
    first_s: float  # a finite run's first wave's TTFT (0 without num_prompts)
    own_s: float  # the prompt's own prefill
    host_bound: bool  # the host time, not the GPU's, sets a prefill step of this workload's chunk
    batched_prefill_s: float  # a prompt's GPU share of a full prefill step (open_loop only)


def _latency(
    steps: _Steps, workload: Workload, layout: Layout, engine: EngineSettings, tpot_s: float, open_loop: bool
) -> _Latency:
    shape = steps.shape
    batch, new, budget = shape.batch, shape.new, shape.budget
    # TTFT. At a fixed concurrency (a closed loop: each finished request is replaced at once), the
    # prompts that share one prefill step also finish together and come back together: they arrive
    # in groups of as many prompts as one step's budget holds (all of them when the whole batch
    # fits). Prompts that do not fit spread the group's completions by a step or more, so the next
    # prompts arrive apart. A prompt queues behind, on average, half of the rest of its group, and
    # behind the other groups' prefills still waiting when it arrives.
    # Outputs of unequal length finish apart, so a closed loop whose lengths are drawn from a range
    # sends its requests one at a time after the first wave, whatever the client's start.
    aligned = (
        workload.arrival == "burst"
        and shortest_length(workload.output_len, workload.range_ratio) >= workload.output_len
    )
    group = max(1, min(batch, int(budget // new))) if aligned else 1
    own_s = steps.prefill_s((group - 1) / 2 * new + new)
    # Whether the host time, not the GPU's, sets a prefill step of this workload's chunk; and the GPU time
    # a prompt's prefill takes when prompts share full steps (an open loop's waiting prompts are prefilled
    # together, a step's budget at a time), which bounds the rate a replica can take in.
    host_bound = bool(steps.eager_s) and steps.eager_s > steps.prefill_step_s(shape.chunk)
    batched_prefill_s = steps.prefill_step_s(budget) * new / budget if open_loop else 0.0
    # A request waits for the step in flight only when other sequences are decoding: at one
    # sequence per replica (closed loop) it arrives at an idle engine. An engine that takes in new
    # requests once every N decode steps (SGLang --scheduler-recv-interval) makes it wait N/2 steps.
    in_flight_s = engine.scheduler_recv_interval * tpot_s / 2 if batch > 1 else 0.0
    overhead_s = engine.request_overhead_ms / 1e3
    decoding_s = in_flight_s + (shape.output - 1) * tpot_s + 2 * overhead_s
    group_s = steps.prefill_s(group * new) if group > 1 else own_s  # a group of one is the prompt itself
    if host_bound:
        # Host-bound prefill steps take the same time for one prompt or several: the prompts that
        # arrive while one runs are prefilled together in the next, so a prompt waits for the rest of
        # the step in flight, not for each prompt ahead of it.
        wait_s = _batched_wait_s(batch, group_s, decoding_s)
    else:
        wait_s = _closed_loop_wait_s(math.ceil(batch / group), group_s, decoding_s)
    ttft_s = in_flight_s + own_s + wait_s + overhead_s
    cycle_s = ttft_s + (shape.output - 1) * tpot_s + overhead_s
    # Clients beyond the engine's running cap wait in its queue: the slots stay full, so a request's
    # whole latency is clients / batch service cycles (Little's law) and the wait is the excess, which
    # a client sees in its time to first token. TPOT and tokens/s are the running batch's.
    queue_s = (shape.clients / batch - 1) * cycle_s
    ttft_s += queue_s
    # A finite run: its first `batch` requests per replica reach an idle engine together (no step in
    # flight) and queue behind one another's prefill, each behind half of the rest on average; the
    # later ones arrive as earlier ones finish, at the steady state above. Its mean TTFT weighs the
    # two by their counts (TPOT and tokens/s stay the steady state's).
    first_s = 0.0
    if workload.num_prompts:
        runs = max(1, -(-workload.num_prompts // layout.dp))
        wave = min(batch, runs)
        first_s = steps.prefill_s((wave - 1) / 2 * new + new) + overhead_s
        ttft_s = (wave * first_s + (runs - wave) * ttft_s) / runs
    return _Latency(
        ttft_s=ttft_s,
        cycle_s=cycle_s,
        queue_s=queue_s,
        first_s=first_s,
        own_s=own_s,
        host_bound=host_bound,
        batched_prefill_s=batched_prefill_s,
    )


def _batch1_bound_s(
    model: ModelSpec,
    params: ParamBreakdown,
    precision: PrecisionSpec,
    gpu: GpuSpec,
    layout: Layout,
    keep: frozenset[str],
) -> float:
    """A true upper bound's step: one sequence, this GPU's share of the weights streamed at the HBM peak."""
    weights = sum(
        layer_weight_bytes(layer, model, precision, layout, keep) * count
        for groups in stage_groups(params, model, layout.pp)
        for layer, _w, count in groups
    )
    if model.is_moe:
        weights = weights * params.active_per_token / max(params.total, 1)
    return max(weights / (gpu.hbm_bandwidth_gb_per_s * 1e9), 1e-9)


def estimate(
    *,
    model: ModelSpec,
    params: ParamBreakdown,
    precision: PrecisionSpec,
    gpu: GpuSpec,
    layout: Layout,
    workload: Workload,
    kv_dtype: str = "bf16",
    keep: frozenset[str] = frozenset(),
    engine: EngineSettings | None = None,
    profile: CalibrationProfile | None = None,
    quick: bool = False,
    open_loop: bool = False,
) -> Throughput:
    """Steady state of `workload.concurrency` requests (spread over DP replicas), each a prompt of
    input_len tokens and output_len generated tokens, on an engine with chunked prefill. `open_loop`:
    also a prompt's GPU share of a full prefill step (`batched_prefill_ms`, what bounds a Poisson rate).
    The steps: the workload's shape per replica (_shape), the decode step, the steps that mix in the
    other sequences' prompts (TPOT), a request's latency (_latency), and the batch-1 bound."""
    engine = engine or engine_settings("vllm")
    if workload.arrival == "poisson" and not quick:
        return _open_loop(
            model=model,
            params=params,
            precision=precision,
            gpu=gpu,
            layout=layout,
            workload=workload,
            kv_dtype=kv_dtype,
            keep=keep,
            engine=engine,
            profile=profile,
        )
    marlin = precision.key == "w4a16" and gpu.key not in NON_MARLIN_GPUS
    # A release line whose block-FP8 kernels differ from the catalog's path (efficiency.fp8_path): its GEMM
    # calls' floor and its grouped experts' streaming efficiency (vLLM before 0.8 on DeepSeek-V3's layers).
    fp8_release = precision.key == "fp8" and (engine.fp8_gemm_floor_us > 0 or engine.fp8_moe_memory_scale != 1)
    floor_us = engine.w4a16_gemm_floor_us if marlin else engine.fp8_gemm_floor_us if fp8_release else 0.0
    rates = Rates(
        gpu,
        precision,
        profile,
        gemm_floor_us=floor_us,
        expert_memory_scale=engine.fp8_moe_memory_scale if fp8_release else 1.0,
    )
    shape = _shape(workload, layout, engine)
    batch = shape.batch
    common: dict[str, Any] = {
        "model": model,
        "params": params,
        "precision": precision,
        "layout": layout,
        "rates": rates,
        "keep": keep,
        "kv_dtype": kv_dtype,
    }
    decode_s, parts = step_s(**common, decode_tokens=shape.micro, decode_context=shape.context)
    floor_bound = rates.floor_bound  # in the decode step (the prefill steps below may not reach it)
    host_s = engine.step_overhead_ms / 1e3
    parts["host"] = host_s
    decode_s += host_s
    if quick:  # ranking layouts: the decode step alone
        return Throughput(
            decode_tokens_per_s=batch * layout.dp / decode_s,
            tpot_ms=decode_s * 1e3,
            ttft_ms=0.0,
            batch=batch,
            batch1_tokens_per_s_upper_bound=0.0,
            decode_step_ms=decode_s * 1e3,
        )
    eager_s = 0.0
    if engine.eager_prefill_kernel_us:
        kernels = eager_prefill_kernels(model, params, layout, precision, keep)
        eager_s = engine.eager_prefill_kernel_us * 1e-6 * kernels
    steps = _Steps(common=common, shape=shape, host_s=host_s, eager_s=eager_s, pp=layout.pp)
    # A step that prefills carries one prompt's chunk, or, when more prompt tokens arrive a step than one
    # chunk (many sequences, short outputs), all of them: every step then prefills.
    prefill_per_step = shape.prefill_per_step
    mixed_tokens = max(shape.chunk, prefill_per_step)
    mixed_s = steps.mixed_s(mixed_tokens)
    share = min(1.0, prefill_per_step / mixed_tokens) if mixed_tokens else 0.0
    tpot_s = (1 - share) * decode_s + share * (mixed_s + host_s)
    latency = _latency(steps, workload, layout, engine, tpot_s, open_loop)
    output = shape.output
    tokens_per_s = batch * layout.dp * output / latency.cycle_s
    delivered = output * tpot_s / (latency.cycle_s + latency.queue_s)
    bound_s = _batch1_bound_s(model, params, precision, gpu, layout, keep)
    return Throughput(
        decode_tokens_per_s=tokens_per_s,
        tpot_ms=tpot_s * 1e3,
        ttft_ms=latency.ttft_s * 1e3,
        batch=batch,
        batch1_tokens_per_s_upper_bound=1 / bound_s,
        decode_step_ms=decode_s * 1e3,
        prefill_tokens_per_step=prefill_per_step,
        delivered_fraction=delivered,
        input_len=max(1, workload.input_len),
        output_len=max(1, workload.output_len),
        cached_prefix_len=shape.cached,
        engine=engine.name,
        max_num_batched_tokens=engine.max_num_batched_tokens,
        scheduler_recv_interval=engine.scheduler_recv_interval,
        queued=shape.clients - batch,
        arrival=workload.arrival,
        range_ratio=workload.range_ratio,
        num_prompts=workload.num_prompts,
        first_wave_ttft_ms=latency.first_s * 1e3,
        prefill_ms=latency.own_s * 1e3,
        calibration=profile.label() if profile is not None else None,
        fallbacks=tuple(sorted(rates.fallbacks)),
        measured=tuple(sorted(rates.measured)),
        single_source=single_sources(
            gpu.key,
            engine.name,
            profile=profile is not None and profile.measures_gemms(),
            precision_key=precision.key,
            quantized_experts=model.is_moe and "experts" not in keep,
            fallbacks=rates.fallbacks,
            fp8_release_path=fp8_release,
        ),
        keep_bf16=tuple(sorted(keep)),
        w4a16_gemm_floor_us=rates.gemm_floor_us if floor_bound and marlin else 0.0,
        fp8_gemm_floor_us=rates.gemm_floor_us if fp8_release else 0.0,
        fp8_release_path=f"{engine.name} before {fp8_path_until(engine.name)}" if fp8_release else None,
        eager_prefill_ms=eager_s * 1e3 if latency.host_bound else 0.0,
        batched_prefill_ms=latency.batched_prefill_s * 1e3,
        breakdown_ms={k: v * 1e3 for k, v in parts.items()},
    )


def _open_loop(*, workload: Workload, layout: Layout, engine: EngineSettings, **rest: Any) -> Throughput:
    """A Poisson stream of `request_rate` requests/s (`vllm bench serve --request-rate`, its default
    burstiness 1): the sequences in flight are the rate times a request's latency (Little's law),
    found by fixed-point iteration; a prompt waits for the rest of the prefill step in flight and for the
    queued prefill work ahead of it (waiting prompts share full steps: M/D/1 at a prompt's share of one).
    The concurrency is the most sequences per replica the plan holds: a rate needing more, or more prefill
    than the GPU keeps up with, is refused."""
    rate = float(workload.request_rate or 0.0) / layout.dp  # per replica
    cap = max(1, -(-workload.concurrency // layout.dp))
    output = max(1, round(mean_length(workload.output_len, workload.range_ratio)))
    overhead_s = engine.request_overhead_ms / 1e3

    def closed(running: int) -> Throughput:
        alone = dataclasses.replace(
            workload,
            concurrency=running * layout.dp,
            arrival="spread",
            request_rate=None,
            max_num_seqs=None,
            num_prompts=None,
        )
        return estimate(workload=alone, layout=layout, engine=engine, open_loop=True, **rest)

    def refuse(served: Throughput) -> ValueError:
        cycle_s = (served.prefill_ms + (output - 1) * served.tpot_ms) / 1e3 + 2 * overhead_s
        most = cap * layout.dp / cycle_s
        return ValueError(
            f"request_rate: {workload.request_rate:g} requests/s exceeds what {cap * layout.dp} sequences in "
            f"flight serve (about {most:.2f} requests/s); raise the concurrency or the replicas"
        )

    def refuse_prefill(served: Throughput) -> ValueError:
        most = layout.dp * 1e3 / served.batched_prefill_ms
        return ValueError(
            f"request_rate: {workload.request_rate:g} requests/s exceeds what the prefill serves: each prompt "
            f"takes {served.batched_prefill_ms:.2f} ms of a replica's GPU in full prefill steps, about "
            f"{most:.2f} requests/s over {layout.dp} replica(s); raise the replicas"
        )

    in_flight = 0.0
    for _ in range(60):
        running = max(1, min(cap, round(in_flight)))
        served = closed(running)
        prefill_s, tpot_s = served.prefill_ms / 1e3, served.tpot_ms / 1e3
        # Waiting prompts are prefilled together, a step's budget at a time: the GPU spends rate x a
        # prompt's share of a full step prefilling, which must stay below 1. A prompt waits for the rest of
        # the step in flight (its own prefill's length, or an eager step's host time) when one runs, and
        # for the queued prefill work ahead of it (M/D/1 at that load).
        batched_s = served.batched_prefill_ms / 1e3
        load = rate * batched_s
        if load >= 1:
            raise refuse_prefill(served)
        prefilling = min(1.0, rate * prefill_s)  # the chance a prefill step is in flight
        queue_s = prefilling * prefill_s / 2 + load * batched_s / (2 * (1 - load))
        decoding = min(1.0, in_flight)  # the chance decode steps are running
        ttft_s = decoding * engine.scheduler_recv_interval * tpot_s / 2 + prefill_s + queue_s + overhead_s
        latency_s = ttft_s + (output - 1) * tpot_s + overhead_s
        settled = rate * latency_s
        if settled > cap + 0.5:
            raise refuse(closed(cap))
        if abs(settled - in_flight) < 0.01:
            break
        in_flight = (in_flight + settled) / 2
    return dataclasses.replace(
        served,
        ttft_ms=ttft_s * 1e3,
        decode_tokens_per_s=rate * layout.dp * output,
        delivered_fraction=rate * output * tpot_s / max(in_flight, 1e-9) if in_flight else 1.0,
        arrival="poisson",
        request_rate=workload.request_rate,
    )


def _batched_wait_s(clients: int, service_s: float, decoding_s: float) -> float:
    """Mean wait of a prompt for a prefill step already in flight when every step takes `service_s`
    and prefills all prompts waiting at its start: the step is busy a fraction min(1, arrival rate x
    step) of the time and has half of it left on average. One client: no wait."""
    if clients <= 1:
        return 0.0
    rate = (clients - 1) / (service_s + decoding_s)  # the other clients' arrivals
    busy = min(1.0, rate * service_s)
    return busy * service_s / 2


def _closed_loop_wait_s(groups: int, service_s: float, decoding_s: float) -> float:
    """Mean time a group of prompts waits for the other groups' prefills: mean value analysis of a
    closed loop of `groups` customers, each prefilled (a fixed `service_s`, so one found in service
    has half of it left) and then decoding for `decoding_s` before it comes back. Exact for one
    group (no wait); from light load (waits rare) to saturation (each waits for nearly all others)."""
    queue = busy = 0.0
    response = service_s
    for customers in range(1, groups + 1):
        response = service_s + service_s * (queue - busy) + busy * service_s / 2
        rate = customers / (response + decoding_s)
        queue, busy = rate * response, rate * service_s
    return response - service_s
