"""Read an engine's startup log (vLLM V0/V1, SGLang) and hold the plan for the same settings against it.

`parse_log(text)` pulls the settings (model, parallel sizes, memory fraction, batch limits) and the
memory figures the engine printed; `compare(log, result)` lines them up with the plan, figure by
figure, in the engine's own names. Figures are bytes (memory) or tokens.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

from planner.engines import engine_profile
from planner.memory import LOG_FIGURES
from planner.plan import PlanRequest, PlanResult
from planner.specs import GpuSpec, gpus

GIB = 1 << 30
# Figures whose error the validation corpus bounds (planner/validation/README.md).
BOUNDS = {"model_loading": 0.02, "available_kv_cache_memory": 0.05, "gpu_kv_cache_tokens": 0.05}


@dataclass(frozen=True, slots=True)
class EngineLog:
    engine: str  # vllm | sglang
    version: str | None
    settings: dict[str, Any] = field(default_factory=dict)
    figures: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class FigureCheck:
    name: str
    planned: float
    logged: float

    @property
    def error(self) -> float | None:
        """Relative error of the plan against the log (None when the log says zero)."""
        return (self.planned - self.logged) / abs(self.logged) if self.logged else None


def _gib(text: str) -> float:
    value = float(text) * GIB
    if not math.isfinite(value):  # 400 digits read as inf: no JSON (nor PostgreSQL's jsonb) holds it
        raise ValueError(f"{text[:40]!r} is not a finite size")
    return value


def _number(text: str) -> int:
    return int(text.replace(",", ""))


# (pattern, figure or setting name, converter): the first pattern that matches gives the name its
# value. The memory figures first, then the settings the plan is re-run with; vLLM
# prints "GB" where it means GiB.
_PATTERNS: tuple[tuple[str, str, Any], ...] = (
    (r"Model loading took ([\d.]+) Gi?B", "model_loading", _gib),
    (r"Loading model weights took ([\d.]+) Gi?B", "model_loading", _gib),
    (r"Available KV cache memory: (-?[\d.]+) GiB", "available_kv_cache_memory", _gib),
    (r"GPU KV cache size: ([\d,]+) tokens", "gpu_kv_cache_tokens", _number),
    (r"total_gpu_memory[ =(]+([\d.]+) ?GiB", "total_gpu_memory", _gib),
    (r"requested GPU memory: ([\d.]+) GiB", "requested_memory", _gib),
    (r"torch peak memory increase: ([\d.]+) ?GiB", "torch_peak_increase", _gib),
    (r"non-torch forward increase memory: ([\d.]+) ?GiB", "non_torch_memory", _gib),
    (r"weights memory: ([\d.]+) ?GiB", "model_loading", _gib),
    (r"model weights take ([\d.]+)GiB", "model_loading", _gib),
    (r"non_torch_memory takes ([\d.]+)GiB", "non_torch_memory", _gib),
    (r"PyTorch activation peak memory takes ([\d.]+)GiB", "torch_peak_increase", _gib),
    (r"the rest of the memory reserved for KV Cache is (-?[\d.]+)GiB", "available_kv_cache_memory", _gib),
    (r"non_torch_memory=([\d.]+)GiB", "non_torch_memory", _gib),
    (r"kv_cache_size=(-?[\d.]+)GiB", "available_kv_cache_memory", _gib),
    (r"peak_torch_memory=([\d.]+)GiB", "peak_torch_memory", _gib),
    (r"# (?:GPU|cuda|CUDA) blocks: ([\d,]+)", "gpu_blocks", _number),
    (r"KV Cache is allocated\.(?: dtype: [\w.]+,)? #tokens: ([\d,]+)", "gpu_kv_cache_tokens", _number),
    # bounded: ".*?" rescanned the rest of the line from every "Load weight end." (a 2 MB log: hours)
    (r"Load weight end\.[^\n]{0,300}?mem usage=([\d.]+) GB", "model_loading", _gib),
    (r"tensor_parallel_size[=:'\" ]+(\d+)", "tp", int),
    (r"pipeline_parallel_size[=:'\" ]+(\d+)", "pp", int),
    (r"\btp_size=(\d+)", "tp", int),
    (r"\bpp_size=(\d+)", "pp", int),
    (r"gpu_memory_utilization['\"]?[=:(]+ ?([\d.]+)", "gpu_memory_utilization", float),
    (r"mem_fraction_static=([\d.]+)", "gpu_memory_utilization", float),
    (r"max_seq_len=(\d+)", "max_model_len", int),
    (r"['\"]max_model_len['\"]: (\d+)", "max_model_len", int),
    (r"Using max model len (\d+)", "max_model_len", int),
    (r"context_length=(\d+)", "max_model_len", int),
    (r"max_num_batched_tokens[=:'\" ]+(\d+)", "max_num_batched_tokens", int),
    (r"['\"]max_num_seqs['\"]: (\d+)", "max_num_seqs", int),
    (r"max_running_requests=(\d+)", "max_num_seqs", int),
    (r"kv_cache_dtype[=:'\" ]+(fp8\w*)", "kv_dtype", lambda text: "fp8"),
    (r"\bmodel=['\"]([^'\"]+)['\"]", "model_path", str),
    (r"model_path=['\"]([^'\"]+)['\"]", "model_path", str),
    (r"['\"]model['\"]: ['\"]([^'\"]+)['\"]", "model_path", str),
    (r"Resolved architecture: (\w+)", "architecture", str),
)
# A figure is a memory size or a token count; every other name is a setting.
_SETTINGS = frozenset(name for _pattern, name, convert in _PATTERNS if convert not in (_gib, _number))
_VERSIONS = (
    r"LLM engine \(v([\d.]+)",
    r"vLLM API server version ([\d.]+)",
    r"█ +version ([\d.]+)",
    r"sglang[ =]+v?([\d.]+)",
)


def parse_log(text: str) -> EngineLog:
    engine = "sglang" if ("ServerArgs(" in text or "KV Cache is allocated" in text) else "vllm"
    values: dict[str, Any] = {}
    for pattern, name, convert in _PATTERNS:
        first = re.search(pattern, text)  # the first rank's line
        if first and name not in values:
            try:
                values[name] = convert(first.group(1))
            except (ValueError, OverflowError):  # '1.2.3', '.', 5,000 digits: not what an engine prints
                raise ValueError(f"text: {name} {first.group(1)[:40]!r} is not a number") from None
    settings = {name: value for name, value in values.items() if name in _SETTINGS}
    figures: dict[str, float] = {name: value for name, value in values.items() if name not in _SETTINGS}
    version = None
    for pattern in _VERSIONS:
        found = re.search(pattern, text)
        if found:
            version = found.group(1)
            break
    if "peak_torch_memory" in figures and "model_loading" in figures:
        # vLLM 0.6.4 printed the torch peak including the weights.
        figures["torch_peak_increase"] = figures.pop("peak_torch_memory") - figures["model_loading"]
    if "gpu_blocks" in figures and "gpu_kv_cache_tokens" not in figures:
        figures["gpu_kv_cache_tokens"] = figures["gpu_blocks"] * 16  # V0 logged blocks of 16 tokens
    figures.pop("gpu_blocks", None)
    if engine == "sglang":
        sizes = re.search(r"K size: ([\d.]+) GB, V size: ([\d.]+) GB", text)
        if sizes:
            figures["available_kv_cache_memory"] = _gib(sizes.group(1)) + _gib(sizes.group(2))
    return EngineLog(engine=engine, version=version, settings=settings, figures=figures)


# A memory figure a log of one GPU prints is at most that GPU's memory (CUDA's total; 2% for the printing and
# a driver that reports a little more than the catalog's). A larger one is not a startup log of that GPU: a
# typo or a forged line, which as a team's evidence would move the cluster's reserves and intervals.
GPU_MEMORY_SLACK = 1.02


def implausible_figure(log: EngineLog, gpu: GpuSpec) -> str | None:
    """Why the log cannot be of `gpu` (a memory figure beyond the GPU's memory, either sign), or None."""
    limit = gpu.memory_bytes * GPU_MEMORY_SLACK
    for name, value in log.figures.items():
        if name.endswith("tokens") or abs(value) <= limit:
            continue
        return (
            f"{name} {value / GIB:,.2f} GiB is more than a {gpu.key} holds ({gpu.memory_bytes / GIB:.2f} GiB): "
            "not a startup log of one of these GPUs"
        )
    return None


def compare(log: EngineLog, result: PlanResult) -> list[FigureCheck]:
    """Each figure the log printed next to the plan's figure of the same name."""
    memory = result.chosen.memory

    return [
        FigureCheck(name=name, planned=float(getattr(memory, LOG_FIGURES[name])), logged=float(logged))
        for name, logged in log.figures.items()
        if name in LOG_FIGURES  # parse_log gives vLLM's names for every engine's log
    ]


def format_checks(checks: list[FigureCheck]) -> str:
    lines = [f"{'figure':28} {'plan':>14} {'log':>14} {'error':>8}"]
    for check in checks:
        tokens = check.name.endswith("tokens")
        plan_text = f"{check.planned:,.0f}" if tokens else f"{check.planned / GIB:.2f} GiB"
        log_text = f"{check.logged:,.0f}" if tokens else f"{check.logged / GIB:.2f} GiB"
        error = f"{check.error:+.1%}" if check.error is not None else "-"
        bound = BOUNDS.get(check.name)
        flag = "" if bound is None or check.error is None or abs(check.error) <= bound else f"  (outside ±{bound:.0%})"
        lines.append(f"{check.name:28} {plan_text:>14} {log_text:>14} {error:>8}{flag}")
    return "\n".join(lines)


def log_request(
    log: EngineLog,
    *,
    model: str | dict[str, Any],
    precision: str,
    gpu: str | GpuSpec,
    engine_version: str | None = None,
    **overrides: Any,
) -> PlanRequest:
    """The plan request of the log's own settings (one replica of its tp x pp), the engine's defaults where the
    log gives none; `overrides` (PlanRequest fields, None: not given) come first."""
    given = {name: value for name, value in overrides.items() if value is not None}
    settings = log.settings
    engine = given.pop("engine", None) or log.engine
    version = engine_version or log.version
    profile = engine_profile(engine, version)
    max_len = given.pop("max_model_len", None) or settings.get("max_model_len")
    spec_gpu = gpu if isinstance(gpu, GpuSpec) else gpus()[gpu]
    default_tokens, default_seqs = profile.defaults(spec_gpu, max_len or 8192)
    tp = given.pop("tp", None) or settings.get("tp", 1)
    fields: dict[str, Any] = {
        "kv_dtype": settings.get("kv_dtype", "bf16"),
        "pp": settings.get("pp", 1),
        "gpu_memory_utilization": settings.get("gpu_memory_utilization", 0.9),
        "max_num_batched_tokens": settings.get("max_num_batched_tokens", default_tokens),
        "max_num_seqs": settings.get("max_num_seqs", default_seqs),
        **given,
    }
    return PlanRequest(
        model=model,
        precision=precision,
        gpu=gpu,
        max_model_len=max_len,
        tp=tp,
        ep=1,
        dp=1,
        gpus_per_node=max(8, tp),
        engine=engine,
        engine_version=version,
        **fields,
    )


@dataclass(frozen=True, slots=True)
class LogResiduals:
    """What one startup log says of the plan for its own settings: the team evidence the service stores
    (planner.intervals.TeamEvidence)."""

    kv_pool_bytes: int | None  # logged - planned KV pool per GPU; None: the log printed no pool
    weights_ratio: float | None  # logged model loading / planned loaded bytes; None: not printed


def log_residuals(log: EngineLog, result: PlanResult) -> LogResiduals:
    memory = result.chosen.memory
    pool = log.figures.get("available_kv_cache_memory")
    loading = log.figures.get("model_loading")
    return LogResiduals(
        kv_pool_bytes=None if pool is None else int(pool) - memory.kv_pool_bytes,
        weights_ratio=None if not loading or memory.loaded_bytes <= 0 else loading / memory.loaded_bytes,
    )
