"""Efficiencies of the throughput model: the defaults of catalog/efficiency.yaml (per GPU, scaled per
weight-format kernel path, per engine) and, per plan, the rates that prefer a calibration profile's
measured figures and remember which ones fell back to the defaults.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import yaml

from planner.engines import release_numbers
from planner.specs import CATALOG_DIR, GpuSpec, PrecisionSpec

if TYPE_CHECKING:
    from planner.calibrate.profile import CalibrationProfile

# A GEMM near the ridge point is neither compute- nor bandwidth-bound: it reaches neither peak at
# once (the H200 profile: BF16 cuBLAS at M = 256 ran at 0.51 of the tensor-core peak and 0.41 of HBM
# together). The default path combines the two times as a p-norm instead of their max; p = 1.5 puts
# that point within 10% and leaves GEMMs far from the ridge at their bound.
ROOFLINE_P = 1.5
# A compute-bound GEMM reaches its large-GEMM efficiency only when it is large: the H200 profile's
# dense and expert shapes (BF16 and FP8, M = 256 ... 16384) fit e x M / (M + M0) with M0 x n x k of
# 1.6-2.3e9 multiply-adds in BF16 and about twice that in FP8 (the same few microseconds at each
# precision's peak: pipeline fill and the last partial wave). At M = 1024 a 2048 x 2048 projection
# runs at 0.70 of the rate of a 16384-row one. Applied to dense GEMMs on the default path; the
# grouped MoE kernel runs every expert in one launch, and a calibration profile measures its shapes.
RAMP_MACS_BF16 = 1.9e9


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
    # SGLang's --scheduler-recv-interval: new requests are taken in once every this many decode steps.
    scheduler_recv_interval: int = 1
    # The shortest time one INT4 weight-only GEMM call (W4A16, the Marlin kernels) takes on this engine,
    # whatever its size, beyond the per-kernel overhead every kernel pays; 0: no floor.
    w4a16_gemm_floor_us: float = 0.0
    # Host time per kernel of a forward the engine runs eagerly (no CUDA graph): a step that prefills
    # takes at least the forward's kernels times this, the GPU waiting on Python and launches; 0: the
    # engine's prefill steps are graphed or compiled (their host time hides behind the GPU's).
    eager_prefill_kernel_us: float = 0.0
    # The engine's block-FP8 decode path where a release line's kernels differ from the catalog's default
    # path (engines.<name>.fp8_path_until: the releases before it): the shortest time one FP8 GEMM call takes,
    # however few bytes it reads, and the multiplier of the grouped experts' streaming efficiency. 0 and 1:
    # the default path (fp8_path).
    fp8_gemm_floor_us: float = 0.0
    fp8_moe_memory_scale: float = 1.0


# Factors standing in for the catalog's while a leave-one-source-out score refits them without one
# source (planner.corpus.leave_one_source_out); None: the catalog's own.
_substitute: dict[str, Any] | None = None


@contextlib.contextmanager
def substituted(catalog: dict[str, Any]) -> Iterator[None]:
    """Plan with `catalog` (efficiency.yaml's shape) in place of the committed factors, in this block."""
    global _substitute
    previous, _substitute = _substitute, catalog
    try:
        yield
    finally:
        _substitute = previous


def efficiency_catalog() -> dict[str, Any]:
    """The factors in force: the committed catalog, or a substitute (see `substituted`)."""
    return _substitute if _substitute is not None else _efficiency_catalog()


# Top-level keys of efficiency.yaml that are not a GPU's (or the default's) factors.
NON_FACTOR_KEYS = ("engines", "precisions", "gpu_precisions", "measured", "gpu_fitted_on", "gpu_precisions_fitted_on")


@functools.cache
def _efficiency_catalog() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((CATALOG_DIR / "efficiency.yaml").read_text(encoding="utf-8"))
    names = set(Factors.__slots__)
    for key, entry in data.items():
        if key in NON_FACTOR_KEYS:
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
    catalog = efficiency_catalog()
    factors = {**catalog["default"], **catalog.get(gpu_key, {})}
    # The format's kernel path on this GPU where it is not the default one (Marlin on Ampere and Ada).
    scales = {
        **catalog.get("precisions", {}).get(precision_key, {}),
        **catalog.get("gpu_precisions", {}).get(gpu_key, {}).get(precision_key, {}),
    }
    for name, scale in scales.items():
        factors[name] = factors[name] * float(scale)
    return Factors(**factors)


def engine_settings(
    name: str,
    max_num_batched_tokens: int | None = None,
    scheduler_recv_interval: int | None = None,
    release: tuple[int, ...] | None = None,
    *,
    eager_prefill: bool = False,
) -> EngineSettings:
    """The engine's scheduler figures; `release` (the version as numbers, None: the planner's default
    release) picks the ones that changed between releases. `eager_prefill`: the deployment prefills
    eagerly whatever the release (a setting the release's graphed prefill does not cover)."""
    engines = efficiency_catalog()["engines"]
    if name not in engines:
        raise ValueError(f"engine: must be one of {', '.join(sorted(engines))}")
    entry = engines[name]
    budget = max_num_batched_tokens or int(entry["max_num_batched_tokens"])
    if budget < 16:
        raise ValueError("max_num_batched_tokens: must be >= 16")
    interval = 1 if scheduler_recv_interval is None else scheduler_recv_interval
    if interval < 1:
        raise ValueError("scheduler_recv_interval: must be >= 1")
    if interval > 1 and name != "sglang":
        raise ValueError("scheduler_recv_interval: an SGLang option (--scheduler-recv-interval)")
    return EngineSettings(
        name,
        budget,
        float(entry["request_overhead_ms"]),
        float(entry["step_overhead_ms"]),
        interval,
        float(entry.get("w4a16_gemm_floor_us", 0.0)),
        _eager_prefill_kernel_us(entry, None if eager_prefill else release),
        *fp8_path(entry, release),
    )


def fp8_path_until(name: str) -> str | None:
    """The first release of the engine whose block-FP8 decode path is the catalog's default one (None: every
    release's is)."""
    until = efficiency_catalog()["engines"].get(name, {}).get("fp8_path_until")
    return None if until is None else str(until)


def fp8_path(entry: dict[str, Any], release: tuple[int, ...] | None) -> tuple[float, float]:
    """The engine's block-FP8 decode figures for `release` (`entry`: its efficiency.yaml entry): the per-call GEMM
    floor (us) and the grouped-expert streaming multiplier of releases before `fp8_path_until`; (0, 1), the
    default path, for later ones and for the planner's default release (None)."""
    until = entry.get("fp8_path_until")
    if not until or release is None or tuple(release) >= release_numbers(str(until)):
        return 0.0, 1.0
    return float(entry.get("fp8_gemm_floor_us", 0.0)), float(entry.get("fp8_moe_memory_scale", 1.0))


def eager_prefill_until(name: str) -> str | None:
    """The first release of the engine that graphs its prefill steps by default (None: none is known)."""
    until = efficiency_catalog()["engines"].get(name, {}).get("eager_prefill_until")
    return None if until is None else str(until)


def _eager_prefill_kernel_us(entry: dict[str, Any], release: tuple[int, ...] | None) -> float:
    """The engine's eager-prefill host time per kernel, for releases before `eager_prefill_until`
    (the first that graphs its prefill steps by default); None: any release."""
    value = float(entry.get("eager_prefill_kernel_us", 0.0))
    until = entry.get("eager_prefill_until")
    if value and until and release is not None and tuple(release) >= release_numbers(str(until)):
        return 0.0
    return value


def single_sources(
    gpu_key: str,
    engine: str,
    *,
    profile: bool,
    precision_key: str = "bf16",
    quantized_experts: bool = False,
    fallbacks: frozenset[str] | set[str] = frozenset(),
    fp8_release_path: bool = False,
) -> tuple[str, ...]:
    """The fitted figures this plan reads that stand on one corpus source (catalog `gpu_fitted_on`,
    `gpu_precisions_fitted_on` and the engines' `fitted_on`): the GPU's own factors and the weight format's
    kernel path on it unless a calibration profile measures them (a path's grouped-expert figures only when
    the plan has experts in that format; with a profile, when its GEMMs of that format fell back to the
    catalog, `fallbacks`), the engine's overheads, which no profile measures, and, with `fp8_release_path`,
    the engine release line's block-FP8 decode path (`fp8_path_fitted_on`), which no profile measures either
    (it is the engine's kernels, not the GPU's)."""
    catalog = efficiency_catalog()
    found = []
    gpu_sources: list[str] = (catalog.get("gpu_fitted_on") or {}).get(gpu_key) or []
    if not profile and len(gpu_sources) == 1:
        found.append(f"{gpu_key} efficiencies: {gpu_sources[0]}")
    path = ((catalog.get("gpu_precisions") or {}).get(gpu_key) or {}).get(precision_key) or {}
    path_sources: list[str] = ((catalog.get("gpu_precisions_fitted_on") or {}).get(gpu_key) or {}).get(
        precision_key
    ) or []
    kinds = {"expert" if name.startswith("moe_") else "dense" for name in path}
    read_kinds = [kind for kind in kinds if kind == "dense" or quantized_experts]
    # With a profile, its own figure replaces the path's, except where it had none (a fallback).
    read = any(f"{kind} GEMM {precision_key}" in fallbacks for kind in read_kinds) if profile else bool(read_kinds)
    if read and len(path_sources) == 1:
        found.append(f"{precision_key} on {gpu_key}: {path_sources[0]}")
    engine_sources: list[str] = catalog["engines"].get(engine, {}).get("fitted_on") or []
    if len(engine_sources) == 1:
        found.append(f"{engine} overheads: {engine_sources[0]}")
    entry = catalog["engines"].get(engine, {})
    fp8_sources: list[str] = entry.get("fp8_path_fitted_on") or []
    if fp8_release_path and len(fp8_sources) == 1:
        found.append(f"{engine} block-FP8 path before {entry.get('fp8_path_until')}: {fp8_sources[0]}")
    return tuple(found)


class Rates:
    """Efficiencies for one plan: the profile's measured figure where it has one, else the default;
    remembers which figures fell back."""

    def __init__(
        self,
        gpu: GpuSpec,
        precision: PrecisionSpec,
        profile: CalibrationProfile | None,
        *,
        gemm_floor_us: float = 0.0,
        expert_memory_scale: float = 1.0,
    ) -> None:
        self.gpu, self.precision, self.profile = gpu, precision, profile
        # A weight format's per-call floor on this engine (W4A16 through Marlin, block FP8 on a release line
        # whose kernels have one): no GEMM call of the format's weights takes less, however few bytes it reads
        # (see EngineSettings).
        self.gemm_floor_us = gemm_floor_us
        # The engine's own grouped-expert kernel for the format, where a release line's streams its weights
        # slower than the catalog's path (EngineSettings.fp8_moe_memory_scale): it multiplies the efficiency
        # of the quantized experts whichever figure, the catalog's or a profile's, the plan reads (a
        # calibration profile times planner.calibrate's kernel, not the engine's).
        self.expert_memory_scale = expert_memory_scale
        self.gemm_floor_s = gemm_floor_us * 1e-6
        self.floor_bound = False  # whether some GEMM call took the floor rather than its roofline
        self.factors = default_factors(gpu.key, precision.key)
        self.bf16_factors = default_factors(gpu.key)  # router, lm_head and kept-BF16 parts
        self.fallbacks: set[str] = set()
        self.measured: set[str] = set()  # the profile's figures read in place of the catalog's (collectives)
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
        calls: int = 1,
    ) -> float:
        """Time of GEMMs reading `weight_bytes` of weights for `tokens` tokens (n x k: a representative shape),
        in `calls` kernel calls of about equal size (each at least the format's floor)."""
        if weight_bytes <= 0:
            return 0.0
        seconds = self._gemm_s(weight_bytes, tokens, n, k, experts, rows_per_expert, touched, bf16)
        if bf16 or not self.gemm_floor_s:
            return seconds
        if calls * self.gemm_floor_s > seconds:
            self.floor_bound = True
            return calls * self.gemm_floor_s
        return seconds

    def _gemm_s(
        self,
        weight_bytes: float,
        tokens: float,
        n: int,
        k: int,
        experts: bool,
        rows_per_expert: float,
        touched: float,
        bf16: bool,
    ) -> float:
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
                if experts and not bf16:
                    efficiency *= self.expert_memory_scale
                return max(flops / peak, (weight_bytes + act) / self.bandwidth) / efficiency
            self._note(f"{'expert' if experts else 'dense'} GEMM {key}")
        factors = self.bf16_factors if bf16 else self.factors
        memory = factors.memory
        if experts:
            # A grouped GEMM over few experts leaves SMs idle: 8 experts reached 0.7 of the
            # bandwidth of 32 or more on the H200 (planner.calibrate's grouped points).
            memory = factors.moe_memory * min(1.0, 0.6 + 0.4 * touched / 32)
            if not bf16:
                memory *= self.expert_memory_scale
        compute = factors.moe_compute if experts else factors.compute
        compute_s, memory_s = flops / (peak * compute), (weight_bytes + act) / (self.bandwidth * memory)
        if not experts and compute_s > 0:
            # Below the ridge point the GEMM is bandwidth-bound and the ramp stops there, so the time
            # stays continuous in M.
            rows = max(tokens, tokens * memory_s / compute_s)
            ramp = RAMP_MACS_BF16 * peak / self.peak_bf16 / (n * k)
            compute_s *= (rows + ramp) / rows
        return _roofline(compute_s, memory_s)

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
        """One collective: the profile's median at this rank count where it measured one (noted in
        `measured`), else the catalog's latency plus the message at its bus bandwidth (noted as a fallback)."""
        if ranks <= 1 or message_bytes <= 0:
            return 0.0
        timed = self.profile.collective_s(op, message_bytes, ranks) if self.profile is not None else None
        if timed is not None:
            self.measured.add(timed.label(op, ranks))
            return timed.seconds
        self._note(f"{op} at {ranks} GPUs")
        factor = 2 * (ranks - 1) / ranks if op == "all_reduce" else (ranks - 1) / ranks
        latency = self.factors.collective_latency_us * 1e-6
        bus = self.gpu.nvlink_gb_per_s * 1e9 * self.factors.collective_bus_fraction
        return latency + message_bytes * factor / bus
