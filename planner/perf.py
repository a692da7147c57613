"""Throughput estimate of a serving engine at steady state: TPOT, TTFT and delivered tokens/s.

A decode step is summed per layer kind from rooflines (weights, experts touched, KV reads, FLOPs)
divided by efficiencies, plus per-kernel overhead and collectives; the prefill chunks of arriving
requests ride in the same steps (chunked prefill under `max_num_batched_tokens`), so long prompts at
high concurrency slow every token. Efficiencies come from a calibration profile measured on the
user's GPUs where it has the figure, else from the defaults in catalog/efficiency.yaml; the result
says which. Every figure is an estimate and carries the inputs it used.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import yaml

from planner.memory import Layout, kv_bytes_per_token_layer, layer_weight_bytes, stage_groups
from planner.params import LayerParams, ParamBreakdown
from planner.specs import CATALOG_DIR, GpuSpec, ModelSpec, PrecisionSpec

if TYPE_CHECKING:
    from planner.calibrate.profile import CalibrationProfile

BF16 = 2
ENGINES = ("vllm", "sglang", "trtllm")
# A GEMM near the ridge point is neither compute- nor bandwidth-bound: it reaches neither peak at
# once (the H200 profile: BF16 cuBLAS at M = 256 ran at 0.51 of the tensor-core peak and 0.41 of HBM
# together). The default path combines the two times as a p-norm instead of their max; p = 1.5 puts
# that point within 10% and leaves GEMMs far from the ridge at their bound.
ROOFLINE_P = 1.5


def _roofline(compute_s: float, memory_s: float) -> float:
    return float((compute_s**ROOFLINE_P + memory_s**ROOFLINE_P) ** (1 / ROOFLINE_P))


@dataclass(frozen=True, slots=True)
class Factors:
    memory: float
    moe_memory: float
    attention_memory: float
    compute: float
    moe_compute: float
    attention_compute: float
    kernel_overhead_us: float
    collective_latency_us: float
    collective_bus_fraction: float


@dataclass(frozen=True, slots=True)
class EngineSettings:
    name: str
    max_num_batched_tokens: int
    request_overhead_ms: float
    step_overhead_ms: float  # host work per step not hidden behind the GPU (scheduling, sampling)


@functools.cache
def _efficiency_catalog() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((CATALOG_DIR / "efficiency.yaml").read_text(encoding="utf-8"))
    names = set(Factors.__slots__)
    for key, entry in data.items():
        if key in ("engines", "precisions"):
            continue
        unknown = set(entry) - names
        if unknown:
            raise ValueError(f"efficiency {key!r}: unknown fields {sorted(unknown)}")
        for name, value in entry.items():
            if not 0 < float(value) <= (100 if name.endswith("_us") else 1):
                raise ValueError(f"efficiency {key!r}: {name} out of range")
    return data


def default_factors(gpu_key: str, precision_key: str = "bf16") -> Factors:
    """The GPU's factors, with the weight-streaming ones scaled for the precision's kernel path."""
    catalog = _efficiency_catalog()
    factors = {**catalog["default"], **catalog.get(gpu_key, {})}
    for name, scale in catalog.get("precisions", {}).get(precision_key, {}).items():
        factors[name] = factors[name] * float(scale)
    return Factors(**factors)


def engine_settings(name: str, max_num_batched_tokens: int | None = None) -> EngineSettings:
    engines = _efficiency_catalog()["engines"]
    if name not in engines:
        raise ValueError(f"engine: must be one of {', '.join(sorted(engines))}")
    entry = engines[name]
    budget = max_num_batched_tokens or int(entry["max_num_batched_tokens"])
    if budget < 16:
        raise ValueError("max_num_batched_tokens: must be >= 16")
    return EngineSettings(name, budget, float(entry["request_overhead_ms"]), float(entry["step_overhead_ms"]))


@dataclass(frozen=True, slots=True)
class Workload:
    input_len: int
    output_len: int
    concurrency: int  # requests in flight over all DP replicas


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
    engine: str = "vllm"
    max_num_batched_tokens: int = 0
    calibration: str | None = None
    fallbacks: tuple[str, ...] = ()
    breakdown_ms: dict[str, float] = field(default_factory=dict)

    def as_estimate(self) -> dict[str, Any]:
        """The figures with the inputs and basis they came from (the plan's `throughput_estimate`)."""
        return {
            "estimate": True,
            "inputs": {
                "input_len": self.input_len,
                "output_len": self.output_len,
                "sequences_per_replica": self.batch,
                "engine": self.engine,
                "max_num_batched_tokens": self.max_num_batched_tokens,
            },
            "output_tokens_per_s": round(self.decode_tokens_per_s, 1),
            "tpot_ms": round(self.tpot_ms, 2),
            "ttft_ms": round(self.ttft_ms, 1),
            "decode_step_ms": round(self.decode_step_ms, 3),
            "prefill_tokens_per_step": round(self.prefill_tokens_per_step, 1),
            "delivered_fraction": round(self.delivered_fraction, 3),
            "batch1_tokens_per_s_upper_bound": round(self.batch1_tokens_per_s_upper_bound, 1),
            "decode_step_breakdown_ms": {k: round(v, 3) for k, v in self.breakdown_ms.items()},
            "calibration": self.calibration,
            "fallbacks": list(self.fallbacks),
        }


def experts_touched(local_experts: float, total_experts: int, top_k: int, batch: float) -> float:
    """Expected distinct local experts hit by `batch` tokens under uniform routing."""
    if total_experts == 0:
        return 0.0
    return local_experts * (1 - (1 - top_k / total_experts) ** batch)


class _Rates:
    """Efficiencies for one plan: the profile's measured figure where it has one, else the default;
    remembers which figures fell back."""

    def __init__(self, gpu: GpuSpec, precision: PrecisionSpec, profile: CalibrationProfile | None) -> None:
        self.gpu, self.precision, self.profile = gpu, precision, profile
        self.factors = default_factors(gpu.key, precision.key)
        self.bf16_factors = default_factors(gpu.key)  # router, lm_head and kept-BF16 parts
        self.fallbacks: set[str] = set()
        self.bandwidth = gpu.hbm_bandwidth_gb_per_s * 1e9
        self.peak = gpu.peak_tflops(precision.compute) * 1e12
        self.peak_bf16 = gpu.bf16_tflops * 1e12
        self._kv_efficiency: float | None = None
        if profile is not None:
            self._kv_efficiency = profile.memory_read_efficiency(gpu)

    def _note(self, figure: str) -> None:
        if self.profile is not None:
            self.fallbacks.add(figure)

    def gemm_s(
        self,
        weight_bytes: float,
        tokens: float,
        n: int,
        k: int,
        *,
        experts: bool = False,
        rows_per_expert: float = 0.0,
        touched: float = 0.0,
        bf16: bool = False,
    ) -> float:
        """Time of GEMMs reading `weight_bytes` of weights for `tokens` tokens (n x k: a representative shape)."""
        if weight_bytes <= 0:
            return 0.0
        bits = 16.0 if bf16 else self.precision.bits_per_weight
        flops = 2.0 * tokens * weight_bytes * 8 / bits
        act = (2 if bf16 or self.precision.activation_bits >= 16 else 1) * tokens * (n + k)
        peak = self.peak_bf16 if bf16 else self.peak
        key = "bf16" if bf16 else self.precision.key
        if self.profile is not None:
            grouped = experts and rows_per_expert > 0
            efficiency = self.profile.gemm_efficiency(
                key, rows_per_expert if grouped else tokens, n, k, self.gpu, experts=experts, grouped=grouped
            )
            if efficiency is None and grouped:
                efficiency = self.profile.gemm_efficiency(key, rows_per_expert, n, k, self.gpu, experts=True)
            if efficiency:
                return max(flops / peak, (weight_bytes + act) / self.bandwidth) / efficiency
            self._note(f"{'expert' if experts else 'dense'} GEMM {key}")
        factors = self.bf16_factors if bf16 else self.factors
        memory = factors.memory
        if experts:
            # A grouped GEMM over few experts leaves SMs idle: 8 experts reached 0.7 of the
            # bandwidth of 32 or more on the H200 (planner.calibrate's grouped points).
            memory = factors.moe_memory * min(1.0, 0.6 + 0.4 * touched / 32)
        compute = factors.moe_compute if experts else factors.compute
        return _roofline(flops / (peak * compute), (weight_bytes + act) / (self.bandwidth * memory))

    def attention_s(self, kv_bytes: float, flops: float) -> float:
        efficiency = self._kv_efficiency
        if efficiency is None:
            self._note("KV read bandwidth")
            efficiency = self.factors.attention_memory
        return max(kv_bytes / (self.bandwidth * efficiency), flops / (self.peak_bf16 * self.factors.attention_compute))

    def kernel_s(self) -> float:
        if self.profile is not None:
            measured = self.profile.kernel_overhead_s()
            if measured:
                # The profile times a trivial kernel; a real small kernel adds its ramp and tail.
                return max(measured * 2, 1e-6)
            self._note("kernel launch overhead")
        return self.factors.kernel_overhead_us * 1e-6

    def collective_s(self, op: str, message_bytes: float, ranks: int) -> float:
        if ranks <= 1 or message_bytes <= 0:
            return 0.0
        factor = 2 * (ranks - 1) / ranks if op == "all_reduce" else (ranks - 1) / ranks
        latency = self.factors.collective_latency_us * 1e-6
        bus = self.gpu.nvlink_gb_per_s * 1e9 * self.factors.collective_bus_fraction
        fit = self.profile.collective(op) if self.profile is not None else None
        if fit is not None:
            bus = fit.bus_gb_per_s * 1e9
            if fit.in_graph:
                latency = fit.latency_s
        elif self.profile is not None:
            self._note(f"{op} bandwidth")
        return latency + message_bytes * factor / bus


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


def step_s(
    *,
    model: ModelSpec,
    params: ParamBreakdown,
    precision: PrecisionSpec,
    layout: Layout,
    rates: _Rates,
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
            total = layer_weight_bytes(layer, model, precision, layout, keep)
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
                    expert_bytes, per_touched, *shape, experts=True, rows_per_expert=rows, touched=touched
                )
                parts["experts"] += count * experts_s
                total -= all_local
            router = (layer.norms + layer.router) * BF16
            dense = max(total - router, 0.0)
            parts["dense_gemm"] += count * (
                rates.gemm_s(dense, tokens, *attn_shape)
                + rates.gemm_s(layer.router * BF16, tokens, model.n_routed_experts or 1, h, bf16=True)
            )
            decode_ctx = min(decode_context, window) if window else decode_context
            prefill_ctx = min(prefill_context, window) if window else prefill_context
            kv_read = decode_tokens * decode_ctx * kv_layer + (kv_layer * prefill_ctx * 2 if prefill_tokens else 0.0)
            flops = heads * (decode_width * decode_tokens * decode_ctx + prefill_width * prefill_tokens * prefill_ctx)
            parts["attention"] += count * rates.attention_s(kv_read, flops)
            parts["kernels"] += count * _kernels(model, layer, layout) * rates.kernel_s()
            if tp > 1:
                parts["collectives"] += count * 2 * rates.collective_s("all_reduce", tokens * h * BF16, tp)
            if layout.ep > 1 and layer.routed_experts:
                message = routed_tokens / max(layout.dp if layout.ep > tp else 1, 1) * model.experts_per_token * h
                parts["collectives"] += count * 2 * rates.collective_s("all_to_all", message * act_bits / 8, layout.ep)
    lm_rows = decode_tokens + (1 if prefill_tokens else 0)
    parts["lm_head"] = rates.gemm_s(params.lm_head / tp * BF16, lm_rows, model.vocab_size // tp, h, bf16=True)
    if layout.pp > 1:
        parts["collectives"] += (layout.pp - 1) * rates.collective_s("all_reduce", tokens * h * BF16, 2)
    return sum(parts.values()), parts


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
) -> Throughput:
    """Steady state of `workload.concurrency` requests (spread over DP replicas), each a prompt of
    input_len tokens and output_len generated tokens, on an engine with chunked prefill."""
    engine = engine or engine_settings("vllm")
    rates = _Rates(gpu, precision, profile)
    batch = max(1, -(-workload.concurrency // layout.dp))
    prompt, output = max(1, workload.input_len), max(1, workload.output_len)
    budget = max(engine.max_num_batched_tokens - batch, 16)
    chunk = float(min(prompt, budget))
    context = prompt + output / 2
    common: dict[str, Any] = {
        "model": model,
        "params": params,
        "precision": precision,
        "layout": layout,
        "rates": rates,
        "keep": keep,
        "kv_dtype": kv_dtype,
    }
    # Pipeline stages each hold a micro-batch: a token still crosses every stage.
    micro = max(1.0, batch / layout.pp)
    decode_s, parts = step_s(**common, decode_tokens=micro, decode_context=context)
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
    # The other sequences' prompts arrive as they finish: (batch - 1) x input_len prefill tokens per
    # output_len steps, scheduled as whole chunks mixed into decode steps.
    prefill_per_step = min((batch - 1) * prompt / output, budget)
    mixed_s, _ = step_s(
        **common,
        decode_tokens=micro,
        decode_context=context,
        prefill_tokens=chunk / layout.pp,
        prefill_context=prompt / 2,
    )
    share = min(1.0, prefill_per_step / chunk) if chunk else 0.0
    tpot_s = (1 - share) * decode_s + share * (mixed_s + host_s)
    # TTFT: wait for the step in flight, then prefill in chunks of the step budget. At a fixed
    # concurrency, requests of equal length start and finish together, so a prompt queues behind,
    # on average, half of the other prompts of its wave; the decode batch shares those steps.
    queued = (batch - 1) / 2 * prompt + prompt
    chunks = math.ceil(queued / budget)
    own_s = 0.0
    for index in range(chunks):
        size = min(budget, queued - index * budget)
        step, _ = step_s(
            **common,
            decode_tokens=max(micro - 1, 0.0) / 2,
            decode_context=context,
            prefill_tokens=size / layout.pp,
            prefill_context=prompt / 2,
        )
        own_s += step + host_s
    # A request waits for the step in flight only when other sequences are decoding: at one
    # sequence per replica (closed loop) it arrives at an idle engine.
    in_flight_s = tpot_s / 2 if batch > 1 else 0.0
    ttft_s = in_flight_s + own_s + engine.request_overhead_ms / 1e3
    cycle_s = ttft_s + (output - 1) * tpot_s + engine.request_overhead_ms / 1e3
    delivered = output * tpot_s / cycle_s
    tokens_per_s = batch * layout.dp * output / cycle_s
    # A true upper bound: one sequence, this GPU's share of the weights streamed at the HBM peak.
    weights = sum(
        layer_weight_bytes(layer, model, precision, layout, keep) * count
        for groups in stage_groups(params, model, layout.pp)
        for layer, _w, count in groups
    )
    if model.is_moe:
        weights = weights * params.active_per_token / max(params.total, 1)
    bound_s = max(weights / (gpu.hbm_bandwidth_gb_per_s * 1e9), 1e-9)
    return Throughput(
        decode_tokens_per_s=tokens_per_s,
        tpot_ms=tpot_s * 1e3,
        ttft_ms=ttft_s * 1e3,
        batch=batch,
        batch1_tokens_per_s_upper_bound=1 / bound_s,
        decode_step_ms=decode_s * 1e3,
        prefill_tokens_per_step=prefill_per_step,
        delivered_fraction=delivered,
        input_len=prompt,
        output_len=output,
        engine=engine.name,
        max_num_batched_tokens=engine.max_num_batched_tokens,
        calibration=profile.label() if profile is not None else None,
        fallbacks=tuple(sorted(rates.fallbacks)),
        breakdown_ms={k: v * 1e3 for k, v in parts.items()},
    )
