"""How sure the plan is: an interval around each figure, from the planner's own held-out errors (issue 47).

Each figure a plan gives (weights and KV pool per GPU, KV tokens, max concurrency, TPOT, TTFT, tokens/s)
comes with an interval at a stated coverage (80%), read off the residuals of that figure on runs the
planner was not fitted to: the published-benchmark corpus (`planner.corpus`) and the startup-log corpus
(`planner.validation`), each source's runs scored with what was fitted without that source
(leave-one-source-out). The residuals are computed offline by `bench/intervals.py` into
`catalog/intervals.json`, grouped by case class (engine, dense or MoE, GPU family, one GPU or several per
replica); a class with fewer than MIN_SOURCES sources or MIN_RUNS runs falls back to the figure's
residuals pooled over every class, taken at a wider coverage (85% for 80%) and widened again to the class's
own runs:
wider, never narrower. The quantiles are split-conformal ranks of the signed residuals, one tail each; a
sample too small to hold both ranks (fewer than 9 runs at 80%, 13 at 85%) takes the rank of the residuals'
distance from the neutral one instead, which needs about half the runs for the same coverage
(`conformal_bounds`): the interval is then symmetric about the figure.

Residuals come in two kinds:
- `ratio` (weights, TPOT, TTFT, tokens/s): measured / planned; the interval is the figure times the
  residual quantiles;
- `capacity` (KV pool, KV tokens): (measured - planned) in bytes, as a share of the GPU's capacity (HBM x
  gpu_memory_utilization): the pool's error comes from the reserves and weights taken out of the
  capacity, so a tight plan's small pool is not credited with a small error (a relative error of a
  1 GiB pool would be a few MiB).
Each interval also holds the figure itself (a one-sided residual set, TTFT planned low on every held-out
run, would otherwise give an interval above the figure): low <= figure <= high always.

Calibrated by the team's own startup logs (`TeamEvidence`, stored by the service per cluster, GPU, engine and
release line): with MIN_TEAM_LOGS logs or more, the plan's engine reserve is corrected by the median of their
KV-pool residuals (logged - planned pool, bytes per GPU), and the intervals of the figures a startup log
measures (weights, KV pool, KV tokens, max concurrency) become the spread of those residuals around that median
(the weights': of their logged / planned ratios), never narrower than MEASUREMENT_NOISE_BYTES either side. With
fewer logs the catalog's reserve and intervals stand and a note says why. A startup log measures no TPOT: the
throughput figures and intervals are corrected by the team's canary and fleet measurements instead
(`planner.measured.MeasuredEvidence`, the same minimum), or stay the catalog's.

An engine release older than every profile (EngineProfile.predates_profiles) is planned with the oldest profile;
every interval is then the range of every held-out run of every class, doubled (in log terms for ratios).

The fit verdict (`verdict`): `fits` when the plan fits at the pessimistic end of the KV interval,
`tight` when it fits at the central figure only, `does_not_fit` when it does not fit at the central figure
(`fits` false).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from planner.specs import CATALOG_DIR, GpuSpec

if TYPE_CHECKING:
    from planner.engines import EngineProfile
    from planner.plan import PlanResult

COVERAGE = 0.8  # what the plan states
MIN_SOURCES = 3  # a class with fewer held-out sources than this, or fewer runs than MIN_RUNS, falls back
MIN_RUNS = 8
# A class that falls back takes the pooled residuals at a coverage this share of the way from the stated one
# to 1 (0.8 -> 0.85), then widens to its own runs. Held out (bench/intervals.py), the pooled 80% quantiles
# alone already cover 77-82% of the throughput figures' runs; at 0.85 TPOT's coverage is 85.5%, at 0.9 (half
# the way) 90.9%, wider than 80% intervals should be.
FALLBACK_WIDENING = 0.25
DATA = CATALOG_DIR / "intervals.json"
POOLED = "*"  # the table's entry for a class with no runs of its own

KINDS = ("ratio", "capacity")
# The plan JSON's dotted path of each figure with its residual kind; max_concurrency is derived from the
# KV tokens' interval (no corpus measures it).
FIGURES: dict[str, str] = {
    "memory_per_gpu.weights": "ratio",
    "memory_per_gpu.kv_cache": "capacity",
    "kv_cache.capacity_tokens": "capacity",
    "throughput.tpot_ms": "ratio",
    "throughput.ttft_ms": "ratio",
    "throughput.decode_tokens_per_s": "ratio",
}
DERIVED = ("max_concurrency",)
PATHS = (*FIGURES, *DERIVED)
LABELS = {
    "memory_per_gpu.weights": "weights per GPU",
    "memory_per_gpu.kv_cache": "KV pool per GPU",
    "kv_cache.capacity_tokens": "KV tokens",
    "max_concurrency": "max concurrency",
    "throughput.tpot_ms": "TPOT",
    "throughput.ttft_ms": "TTFT",
    "throughput.decode_tokens_per_s": "tokens/s",
}
VERDICTS = ("fits", "tight", "does_not_fit")
GIB = 1 << 30
# The team's own startup logs (TeamEvidence): how many a cluster needs before they replace the catalog's
# reserve and intervals (three: one log may be that run's accident, two cannot say which of them is), and the
# least half-width of an interval they give. vLLM and SGLang print memory to 0.01 GiB, and two starts of one
# configuration differ by the profile run's torch peak and the CUDA context (tens of MiB); 0.1 GiB either side
# is a stated floor above both, not a measured one (no corpus holds repeated starts of one configuration).
MIN_TEAM_LOGS = 3
MEASUREMENT_NOISE_BYTES = int(0.1 * GIB)
# The weights' floor: loading them is deterministic, so only the log's printing (0.01 GiB) blurs them.
WEIGHTS_NOISE_BYTES = int(0.01 * GIB)
# A release older than every profile: each interval is the range of every held-out run, this many times as far
# from the neutral residual (in log terms for ratios).
OLD_RELEASE_WIDENING = 2.0
DASH = "\u2013"  # an en dash between an interval's ends

# GPU families by CUDA compute capability x 10 (the catalog's cuda_sm); ROCm GPUs have none.
_FAMILIES = ((120, "blackwell"), (100, "blackwell"), (90, "hopper"), (89, "ada"), (80, "ampere"), (70, "volta"))
ROCM_GPU_KEYS = frozenset({"mi300x", "mi325x", "mi355x"})


def gpu_family(device: GpuSpec) -> str:
    if device.key in ROCM_GPU_KEYS:
        return "rocm"
    if device.cuda_sm is None:
        return "other"
    return next((name for floor, name in _FAMILIES if device.cuda_sm >= floor), "other")


def case_class(engine: str, is_moe: bool, device: GpuSpec, gpus_per_replica: int) -> str:
    """The class a case's residuals are grouped by: engine/dense|moe/GPU family/single|multi (GPUs per
    replica: tp x pp; replicas run apart)."""
    return "/".join(
        (engine, "moe" if is_moe else "dense", gpu_family(device), "multi" if gpus_per_replica > 1 else "single")
    )


def describe_class(name: str) -> str:
    engine, moe, family, multi = name.split("/")
    shown = "ROCm" if family == "rocm" else family.capitalize()
    return f"{engine}, {'MoE' if moe == 'moe' else 'dense'}, {shown}, {multi}-GPU"


@dataclass(frozen=True, slots=True)
class Residual:
    """One held-out run's residual of one figure (see the module docstring for the kinds)."""

    source: str
    case: str
    case_class: str
    value: float


@dataclass(frozen=True, slots=True)
class Spread:
    """Residual quantiles around the neutral residual (1 for ratio, 0 for capacity): low <= neutral <= high."""

    low: float
    high: float
    runs: int  # held-out runs it stands on
    sources: int
    fallback: bool  # the class had too few: pooled residuals, widened
    class_runs: int = 0  # the class's own runs (with a fallback)
    class_sources: int = 0
    symmetric: bool = False  # too few runs for a rank in each tail: the distance rank, either side


def check_release_line(release_line: str) -> None:
    """A team's evidence names the release line it ran as major.minor ("0.10"): anything else is refused."""
    parts = release_line.split(".")
    if len(parts) != 2 or not all(part.isascii() and part.isdigit() for part in parts):
        raise ValueError(f"release_line: {release_line!r} is not a major.minor release line like 0.10")


def evidence_applies(engine_name: str, release_line: str, gpu: str, engine: EngineProfile, gpu_key: str) -> bool:
    """Whether a team's evidence (startup logs, canary measurements) of this engine, release line and GPU
    speaks for a plan of `engine` on `gpu_key`: a release older than every profile is planned wide, never
    calibrated."""
    release = engine.release
    return (
        engine_name == engine.name
        and release_line == f"{release[0]}.{release[1]}"
        and gpu == gpu_key
        and not engine.predates_profiles
    )


@dataclass(frozen=True, slots=True)
class TeamEvidence:
    """The team's startup logs of one cluster, GPU, engine and release line, as residuals against the plan of
    each log's own settings made with the catalog alone (the service computes them when a log is stored)."""

    where: str  # "cluster gpu-a": how the plan names them
    gpu: str  # catalog key of the GPUs the logs ran on
    engine: str  # vllm | sglang | trtllm
    release_line: str  # "0.10": the major.minor the logs' engine ran
    kv_pool_residuals_bytes: tuple[int, ...]  # logged - planned KV pool per GPU, one per log
    weights_ratios: tuple[float, ...] = ()  # logged model loading / planned loaded bytes, one per log that gave it
    # GPUs per replica (tp x pp) each log ran, aligned with kv_pool_residuals_bytes and weights_ratios: a log of
    # one-GPU replicas corrects only one-GPU layouts, and a multi-GPU one only multi-GPU layouts, as the catalog's
    # residuals are classed. A multi-GPU replica keeps NCCL and all-reduce buffers outside its pool (2 GiB on
    # vLLM) that a one-GPU log never measured: its residual taken off them could call a plan `fits` that is short.
    replica_gpus: tuple[int, ...] = ()
    weights_replica_gpus: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        check_release_line(self.release_line)
        if any(not isinstance(r, int) for r in self.kv_pool_residuals_bytes):
            raise ValueError("kv_pool_residuals_bytes: must be whole bytes")
        if any(not (isinstance(r, int | float) and math.isfinite(r) and r > 0) for r in self.weights_ratios):
            raise ValueError("weights_ratios: must be finite numbers > 0")
        if len(self.replica_gpus) != len(self.kv_pool_residuals_bytes):
            raise ValueError("replica_gpus: one per KV pool residual (the GPUs per replica each log ran)")
        if len(self.weights_replica_gpus) != len(self.weights_ratios):
            raise ValueError("weights_replica_gpus: one per weights ratio (the GPUs per replica each log ran)")
        if any(not isinstance(g, int) or g < 1 for g in (*self.replica_gpus, *self.weights_replica_gpus)):
            raise ValueError("replica_gpus: whole GPUs, at least 1")

    def of_shape(self, gpus_per_replica: int) -> TeamEvidence:
        """The logs of replicas shaped like `gpus_per_replica` (one GPU, or several)."""
        multi = gpus_per_replica > 1
        pools = [
            (r, g) for r, g in zip(self.kv_pool_residuals_bytes, self.replica_gpus, strict=True) if (g > 1) == multi
        ]
        weights = [
            (w, g) for w, g in zip(self.weights_ratios, self.weights_replica_gpus, strict=True) if (g > 1) == multi
        ]
        return dataclasses.replace(
            self,
            kv_pool_residuals_bytes=tuple(r for r, _ in pools),
            replica_gpus=tuple(g for _, g in pools),
            weights_ratios=tuple(w for w, _ in weights),
            weights_replica_gpus=tuple(g for _, g in weights),
        )

    @property
    def shape(self) -> str:
        """The replica shape of these logs, as notes say it ("" when they are of both or none)."""
        shapes = {replica_shape(g) for g in self.replica_gpus}
        return shapes.pop() if len(shapes) == 1 else ""

    @property
    def logs(self) -> int:
        return len(self.kv_pool_residuals_bytes)

    @property
    def enough(self) -> bool:
        return self.logs >= MIN_TEAM_LOGS

    @property
    def reserve_correction_bytes(self) -> int:
        """What the logs' pools ran above the catalog's plan (median): the reserve is that much smaller."""
        return int(statistics.median(self.kv_pool_residuals_bytes)) if self.kv_pool_residuals_bytes else 0

    def applies(self, engine: EngineProfile, gpu_key: str) -> bool:
        return evidence_applies(self.engine, self.release_line, self.gpu, engine, gpu_key)

    def note(self) -> str:
        head = f"{self.logs} of your startup logs"
        what = f"{self.engine} {self.release_line}, {self.gpu}" + (f", {self.shape}" if self.shape else "")
        if not self.enough:
            return (
                f"Your startup logs: {head} on {self.where} ({what}), fewer "
                f"than {MIN_TEAM_LOGS}: the catalog's reserve and intervals stand until there are {MIN_TEAM_LOGS}."
            )
        low, high = min(self.kv_pool_residuals_bytes), max(self.kv_pool_residuals_bytes)
        return (
            f"KV reserve from {head} on {self.where} ({what}): their KV pools "
            f"ran {self.reserve_correction_bytes / GIB:+.2f} GiB per GPU against the catalog's plan (median; "
            f"{low / GIB:+.2f} to {high / GIB:+.2f} GiB), so this plan's reserve is that much "
            f"{'smaller' if self.reserve_correction_bytes >= 0 else 'larger'}, and the intervals of weights, KV "
            f"pool, KV tokens and max concurrency are the spread of those logs (at least "
            f"±{MEASUREMENT_NOISE_BYTES / GIB:.1f} GiB: measurement noise), not the catalog's."
        )


@functools.lru_cache(maxsize=256)
def corrected_profile(engine: EngineProfile, evidence: TeamEvidence) -> EngineProfile:
    """The profile carrying the team's reserve corrections, one per replica shape with enough logs of it
    (planner.memory.corrected_reserves applies the one of each layout's shape). Cached: profiles key the memory
    caches by identity."""
    single, multi = evidence.of_shape(1), evidence.of_shape(2)
    return dataclasses.replace(
        engine,
        reserve_correction_bytes=single.reserve_correction_bytes if single.enough else 0,
        reserve_correction_multi_gpu_bytes=multi.reserve_correction_bytes if multi.enough else 0,
    )


def replica_shape(gpus_per_replica: int) -> str:
    return "several GPUs per replica" if gpus_per_replica > 1 else "one GPU per replica"


def neutral(kind: str) -> float:
    if kind not in KINDS:
        raise ValueError(f"kind: must be one of {', '.join(KINDS)}")
    return 1.0 if kind == "ratio" else 0.0


def widened(coverage: float) -> float:
    """The coverage a class that falls back takes the pooled residuals at (FALLBACK_WIDENING)."""
    return coverage + (1 - coverage) * FALLBACK_WIDENING


def quantile_bounds(values: Sequence[float], coverage: float) -> tuple[float, float]:
    """The split-conformal order statistics of `values` at `coverage`, two-sided: the floor((n+1)(1-c)/2)-th
    and ceil((n+1)(1+c)/2)-th smallest (1-based), clamped to the extremes where n is too small for them
    (the extremes then understate the range). Wider as coverage grows, never narrower."""
    if not 0 < coverage < 1:
        raise ValueError("coverage: must be between 0 and 1 (exclusive)")
    if not values:
        raise ValueError("values: no residuals")
    ordered = sorted(values)
    n = len(ordered)
    # (1e-9: 0.8's binary error must not move a rank: 100 x 0.1 is the 10th, not the 9th)
    low_rank = math.floor((n + 1) * (1 - coverage) / 2 + 1e-9)
    high_rank = math.ceil((n + 1) * (1 + coverage) / 2 - 1e-9)
    return ordered[max(low_rank, 1) - 1], ordered[min(high_rank, n) - 1]


def signed_ranks_held(runs: int, coverage: float) -> bool:
    """Whether `runs` residuals hold both of quantile_bounds's ranks at `coverage` unclamped (9 runs at 80%,
    13 at 85%): each tail spends (1 - coverage) / 2 of the n + 1 places, so it needs n >= (1 + c) / (1 - c)."""
    return (
        math.floor((runs + 1) * (1 - coverage) / 2 + 1e-9) >= 1
        and math.ceil((runs + 1) * (1 + coverage) / 2 - 1e-9) <= runs
    )


def conformal_bounds(values: Sequence[float], coverage: float, kind: str) -> tuple[float, float, bool]:
    """The interval's residual bounds at `coverage`, and whether they are symmetric. With enough runs
    (signed_ranks_held), quantile_bounds's signed ranks, one tail each. With fewer, those ranks fall beyond the
    sample and clamping them to its extremes covers a new run with probability (n - 1) / (n + 1) at best (75%
    for 7 runs, where 85% was asked); the split-conformal rank of the residuals' distance from the neutral one
    (|residual| for capacity, |log| for ratio), the ceil((n + 1) c)-th smallest, holds `coverage` from
    c / (1 - c) runs (4 at 80%, 6 at 85%), and is taken either side: in that range of n it is the largest
    distance. Never narrower than the signed bounds."""
    low, high = quantile_bounds(values, coverage)
    if signed_ranks_held(len(values), coverage):
        return low, high, False
    ratio = kind == "ratio"
    distances = sorted(abs(math.log(v)) if ratio else abs(v - neutral(kind)) for v in values)
    rank = math.ceil((len(distances) + 1) * coverage - 1e-9)
    far = distances[min(rank, len(distances)) - 1]
    either = (math.exp(-far), math.exp(far)) if ratio else (-far, far)
    return min(low, either[0]), max(high, either[1]), True


def spread(residuals: Sequence[Residual], kind: str, name: str, coverage: float = COVERAGE) -> Spread:
    """The interval of residuals for class `name` at `coverage`: the class's own when it has MIN_SOURCES
    sources and MIN_RUNS runs; else the residuals pooled over every class at a wider coverage (widened: 0.8 -> 0.85), widened to the class's own runs' range too. Both hold the neutral residual."""
    centre = neutral(kind)
    own = [r for r in residuals if r.case_class == name]
    own_sources = len({r.source for r in own})
    if len(own) >= MIN_RUNS and own_sources >= MIN_SOURCES:
        low, high, symmetric = conformal_bounds([r.value for r in own], coverage, kind)
        return Spread(
            min(low, centre), max(high, centre), len(own), own_sources, False, len(own), own_sources, symmetric
        )
    low, high, symmetric = conformal_bounds([r.value for r in residuals], widened(coverage), kind)
    for r in own:
        low, high = min(low, r.value), max(high, r.value)
    return Spread(
        min(low, centre),
        max(high, centre),
        len(residuals),
        len({r.source for r in residuals}),
        True,
        len(own),
        own_sources,
        symmetric,
    )


def union(first: Spread, second: Spread) -> Spread:
    """Both spreads' range (KV tokens: its own residuals and the pool's, in the same unit)."""
    return Spread(
        min(first.low, second.low),
        max(first.high, second.high),
        first.runs + second.runs,
        max(first.sources, second.sources),
        first.fallback or second.fallback,
        first.class_runs + second.class_runs,
        max(first.class_sources, second.class_sources),
        first.symmetric or second.symmetric,
    )


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


def basis(spread_: Spread, name: str, coverage: float) -> str:
    symmetric = (
        "; symmetric about the figure: too few runs for a rank in each tail, so the largest held-out error, "
        "taken either side"
        if spread_.symmetric
        else ""
    )
    if not spread_.fallback:
        return (
            f"{spread_.runs} held-out runs from {spread_.sources} sources of its class ({describe_class(name)}), "
            "each planned with what was fitted without its source" + symmetric
        )
    own = (
        f"{_count(spread_.class_runs, 'run')} from {_count(spread_.class_sources, 'source')}"
        if spread_.class_runs
        else "no held-out runs"
    )
    return (
        f"its class ({describe_class(name)}) has {own}, fewer than {MIN_SOURCES} sources or {MIN_RUNS} runs: "
        f"the residuals of {spread_.runs} held-out runs from {spread_.sources} sources of every class, taken at "
        f"{widened(coverage):.0%} rather than {coverage:.0%}"
        + (" and widened to the class's own runs" if spread_.class_runs else "")
        + symmetric
    )


# Held-out coverage of the intervals themselves: each source's runs against the interval computed without it.


@dataclass(frozen=True, slots=True)
class Coverage:
    runs: int
    covered: int
    median_width: float  # high - low in residual units (a fraction of the figure, or of the GPU capacity)

    @property
    def fraction(self) -> float:
        return self.covered / self.runs if self.runs else float("nan")


def held_out_coverage(
    residuals: Sequence[Residual], kind: str, coverage: float = COVERAGE, also: Sequence[Residual] = ()
) -> Coverage:
    """The fraction of runs whose residual falls inside the spread computed for their class without their
    source (and without `also`'s runs of it: KV tokens' interval is the union with the pool's)."""
    covered, widths = 0, []
    for r in residuals:
        rest = [o for o in residuals if o.source != r.source]
        if not rest:
            continue
        band = spread(rest, kind, r.case_class, coverage)
        others = [o for o in also if o.source != r.source]
        if others:
            band = union(band, spread(others, kind, r.case_class, coverage))
        covered += band.low <= r.value <= band.high
        widths.append(band.high - band.low)
    return Coverage(len(widths), covered, statistics.median(widths) if widths else float("nan"))


# The committed table (catalog/intervals.json), written by bench/intervals.py.


def build_table(residuals: dict[str, list[Residual]], coverage: float = COVERAGE) -> dict[str, Any]:
    """The data file's content: each figure's residuals, and its spread per class seen and for any other."""
    figures: dict[str, Any] = {}
    for path, kind in FIGURES.items():
        # Rounded as stored, so that the stored spreads are what the stored residuals give.
        rows = sorted(
            (Residual(r.source, r.case, r.case_class, round(r.value, 6)) for r in residuals[path]),
            key=lambda r: (r.case_class, r.source, r.case),
        )
        classes: dict[str, Any] = {}
        for name in [*sorted({r.case_class for r in rows}), POOLED]:
            band = spread(rows, kind, name if name != POOLED else "", coverage)
            classes[name] = {
                "low": band.low,
                "high": band.high,
                "runs": band.runs,
                "sources": band.sources,
                "fallback": band.fallback,
                "class_runs": band.class_runs,
                "class_sources": band.class_sources,
                "symmetric": band.symmetric,
            }
        figures[path] = {
            "kind": kind,
            "classes": classes,
            "residuals": [{"source": r.source, "case": r.case, "class": r.case_class, "value": r.value} for r in rows],
        }
    return {
        "coverage": coverage,
        "min_sources": MIN_SOURCES,
        "min_runs": MIN_RUNS,
        "generated_by": "bench/intervals.py --write",
        "figures": figures,
    }


def residuals_of(table: dict[str, Any], path: str) -> list[Residual]:
    return [
        Residual(row["source"], row["case"], row["class"], float(row["value"]))
        for row in table["figures"][path]["residuals"]
    ]


def validate_table(table: Any) -> dict[str, Any]:
    """The data file as the planner reads it; a ValueError names the bad field."""
    where = DATA.name
    if not isinstance(table, dict):
        raise ValueError(f"{where}: must be an object")
    coverage = table.get("coverage")
    if not isinstance(coverage, float) or not 0 < coverage < 1:
        raise ValueError(f"{where}: coverage must be a number between 0 and 1")
    if table.get("min_sources") != MIN_SOURCES or table.get("min_runs") != MIN_RUNS:
        raise ValueError(f"{where}: min_sources/min_runs differ from planner.intervals; regenerate it")
    figures = table.get("figures")
    if not isinstance(figures, dict) or set(figures) != set(FIGURES):
        raise ValueError(f"{where}: figures must be exactly {', '.join(FIGURES)}")
    for path, entry in figures.items():
        kind = FIGURES[path]
        if entry.get("kind") != kind:
            raise ValueError(f"{where}: figures.{path}.kind must be {kind}")
        classes = entry.get("classes")
        if not isinstance(classes, dict) or POOLED not in classes:
            raise ValueError(f"{where}: figures.{path}.classes must hold {POOLED!r}")
        for name, band in classes.items():
            field = f"{where}: figures.{path}.classes.{name}"
            if name != POOLED and (name.count("/") != 3):
                raise ValueError(f"{field}: a class is engine/dense|moe/family/single|multi")
            low, high = band.get("low"), band.get("high")
            if not all(isinstance(v, int | float) and math.isfinite(v) for v in (low, high)):
                raise ValueError(f"{field}: low and high must be finite numbers")
            if not low <= neutral(kind) <= high:
                raise ValueError(f"{field}: low <= {neutral(kind)} <= high does not hold")
            if kind == "ratio" and low <= 0:
                raise ValueError(f"{field}: a ratio's low must be > 0")
            for key in ("runs", "sources"):
                if not isinstance(band.get(key), int) or band[key] < 1:
                    raise ValueError(f"{field}: {key} must be an integer >= 1")
            for key in ("fallback", "symmetric"):
                if not isinstance(band.get(key), bool):
                    raise ValueError(f"{field}: {key} must be true or false")
        if not isinstance(entry.get("residuals"), list) or not entry["residuals"]:
            raise ValueError(f"{where}: figures.{path}.residuals must be a non-empty list")
    return table


@functools.cache
def table() -> dict[str, Any]:
    return validate_table(json.loads(DATA.read_text(encoding="utf-8")))


def stored_spread(path: str, name: str) -> Spread:
    band = table()["figures"][path]["classes"].get(name) or table()["figures"][path]["classes"][POOLED]
    return Spread(
        band["low"],
        band["high"],
        band["runs"],
        band["sources"],
        band["fallback"],
        band.get("class_runs", 0),
        band.get("class_sources", 0),
        band["symmetric"],
    )


# A plan's intervals and verdict.


@dataclass(frozen=True, slots=True)
class Judged:
    intervals: dict[str, dict[str, Any]]
    verdict: str
    notes: tuple[str, ...]


def _interval(low: float, high: float, spread_: Spread, basis_: str, coverage: float) -> dict[str, Any]:
    return {"low": low, "high": high, "coverage": coverage, "n": spread_.runs, "basis": basis_}


def _down(value: float, places: int) -> float:
    return float(math.floor(value * 10**places) / 10**places)


def _up(value: float, places: int) -> float:
    return float(math.ceil(value * 10**places) / 10**places)


def plan_class(result: PlanResult) -> str:
    layout = result.chosen.layout
    return case_class(result.engine.name, result.model.is_moe, result.gpu, layout.tp * layout.pp)


def old_release_spread(path: str) -> Spread:
    """A release older than every profile: the range of every held-out run of every class, OLD_RELEASE_WIDENING
    times as far from the neutral residual (in log terms for ratios)."""
    kind = FIGURES[path]
    rows = residuals_of(table(), path)
    values = [r.value for r in rows]
    low, high = min(min(values), neutral(kind)), max(max(values), neutral(kind))
    if kind == "ratio":
        low, high = low**OLD_RELEASE_WIDENING, high**OLD_RELEASE_WIDENING
    else:
        low, high = low * OLD_RELEASE_WIDENING, high * OLD_RELEASE_WIDENING
    return Spread(low, high, len(rows), len({r.source for r in rows}), True)


def old_release_basis(result: PlanResult, spread_: Spread) -> str:
    engine = result.engine
    return (
        f"{engine.name} {engine.version} is older than every profile ({engine.predates_profiles} and later): no "
        f"held-out run of it, so the range of all {spread_.runs} held-out runs from {spread_.sources} sources of "
        f"every class, {OLD_RELEASE_WIDENING:g} times as wide; widened, not measured"
    )


def team_evidence(result: PlanResult) -> TeamEvidence | None:
    """The request's team evidence when it is of this plan's cluster GPU, engine and release line: its logs of
    the chosen layout's replica shape (None when it has none of that shape)."""
    evidence = result.request.evidence
    if evidence is None or not evidence.applies(result.engine, result.gpu.key):
        return None
    layout = result.chosen.layout
    shaped = evidence.of_shape(layout.tp * layout.pp)
    return shaped if shaped.logs else None


def _team_bytes(evidence: TeamEvidence) -> tuple[float, float]:
    """The logs' KV-pool residuals around their median (what the corrected reserve leaves), as offsets in
    bytes from the plan's pool, at the stated coverage and at least the measurement noise either side."""
    centre = evidence.reserve_correction_bytes
    low, high = quantile_bounds([r - centre for r in evidence.kv_pool_residuals_bytes], COVERAGE)
    return min(low, -MEASUREMENT_NOISE_BYTES), max(high, MEASUREMENT_NOISE_BYTES)


def _team_basis(evidence: TeamEvidence, what: str, noise: int = MEASUREMENT_NOISE_BYTES) -> str:
    return (
        f"{evidence.logs} of your startup logs on {evidence.where} ({evidence.engine} {evidence.release_line}, "
        f"{evidence.gpu}): {what}, at least ±{noise / GIB:.2f} GiB (measurement noise), in place "
        "of the catalog's held-out residuals"
    )


def judge(result: PlanResult) -> Judged:
    """The plan's intervals (the contract's `intervals`) and its verdict, with a note when it is tight or when
    the team's startup logs or an old release shaped them."""
    coverage = float(table()["coverage"])
    name = plan_class(result)
    memory, layout = result.chosen.memory, result.chosen.layout
    intervals: dict[str, dict[str, Any]] = {}
    old = bool(result.engine.predates_profiles)
    evidence = team_evidence(result)
    team = evidence if evidence is not None and evidence.enough else None

    def stored(path: str) -> Spread:
        return old_release_spread(path) if old else stored_spread(path, name)

    def basis_of(spread_: Spread, residual: str) -> str:
        return (
            (old_release_basis(result, spread_) if old else basis(spread_, name, coverage)) + "; residual: " + residual
        )

    figure = memory.weights_per_gpu_bytes
    if team is not None and team.weights_ratios:
        ratio_low, ratio_high = quantile_bounds(team.weights_ratios, coverage)
        intervals["memory_per_gpu.weights"] = {
            "low": math.floor(min(figure * min(ratio_low, 1.0), figure - WEIGHTS_NOISE_BYTES)),
            "high": math.ceil(max(figure * max(ratio_high, 1.0), figure + WEIGHTS_NOISE_BYTES)),
            "coverage": coverage,
            "n": len(team.weights_ratios),
            "basis": _team_basis(
                team, "the spread of their logged model loading / the planned one", WEIGHTS_NOISE_BYTES
            ),
        }
    else:
        weights = stored("memory_per_gpu.weights")
        intervals["memory_per_gpu.weights"] = _interval(
            math.floor(figure * weights.low),
            math.ceil(figure * weights.high),
            weights,
            basis_of(weights, "the engine's logged model loading / the planned one"),
            coverage,
        )

    capacity = memory.capacity_bytes
    kv_token, block = memory.kv_bytes_per_token_per_gpu, result.engine.block_size_tokens

    def tokens_at(pool_bytes: float) -> int:
        return int(pool_bytes // kv_token) // block * block if pool_bytes > 0 and kv_token > 0 else 0

    kv_sequence = memory.kv_bytes_per_sequence_per_gpu

    def sequences_at(pool_bytes: float) -> int:
        return math.floor(pool_bytes / kv_sequence) if kv_sequence > 0 and pool_bytes > 0 else 0

    if team is not None:
        below, above = _team_bytes(team)
        pool_low, pool_high = memory.kv_pool_bytes + below, memory.kv_pool_bytes + above
        pool_basis = _team_basis(team, "the spread of their logged - planned KV pool around its median")
        entry = {"coverage": coverage, "n": team.logs}
        intervals["memory_per_gpu.kv_cache"] = {
            "low": max(0, math.floor(pool_low)),
            "high": max(0, math.ceil(pool_high)),
            **entry,
            "basis": pool_basis,
        }
        intervals["kv_cache.capacity_tokens"] = {
            "low": tokens_at(pool_low),
            "high": tokens_at(pool_high),
            **entry,
            "basis": pool_basis + "; the tokens that pool holds",
        }
        intervals["max_concurrency"] = {
            "low": sequences_at(pool_low) * layout.dp,
            "high": sequences_at(pool_high) * layout.dp,
            **entry,
            "basis": "derived from the KV tokens' interval (full-length sequences it holds); " + pool_basis,
        }
    else:
        pool = stored("memory_per_gpu.kv_cache")
        intervals["memory_per_gpu.kv_cache"] = _interval(
            max(0, math.floor(memory.kv_pool_bytes + pool.low * capacity)),
            max(0, math.ceil(memory.kv_pool_bytes + pool.high * capacity)),
            pool,
            basis_of(pool, "(logged - planned pool) / the GPU's capacity"),
            coverage,
        )
        tokens = union(stored("kv_cache.capacity_tokens"), pool)
        pool_low = memory.kv_pool_bytes + tokens.low * capacity
        pool_high = memory.kv_pool_bytes + tokens.high * capacity
        tokens_basis = basis_of(
            tokens,
            "(logged - planned tokens) x bytes per token / the GPU's capacity, joined with the KV pool's",
        )
        intervals["kv_cache.capacity_tokens"] = _interval(
            tokens_at(pool_low), tokens_at(pool_high), tokens, tokens_basis, coverage
        )
        intervals["max_concurrency"] = _interval(
            sequences_at(pool_low) * layout.dp,
            sequences_at(pool_high) * layout.dp,
            tokens,
            "derived from the KV tokens' interval (full-length sequences it holds); " + tokens_basis,
            coverage,
        )

    throughput = result.throughput
    # The team's canary measurements (planner.measured), where enough: the figure is already theirs (plan()
    # corrected it), and so is its interval.
    from planner.measured import corrections

    measured = corrections(result.request.measured, result.engine, result.gpu.key, layout.tp * layout.pp)
    for path, value, places in (
        ("throughput.tpot_ms", throughput.tpot_ms, 2),
        ("throughput.ttft_ms", throughput.ttft_ms, 1),
        ("throughput.decode_tokens_per_s", throughput.decode_tokens_per_s, 1),
    ):
        own = measured.interval(path)
        if own is not None:
            low, high, n, basis_ = own
            intervals[path] = {
                "low": _down(value * low, places),
                "high": _up(value * high, places),
                "coverage": coverage,
                "n": n,
                "basis": basis_,
            }
            continue
        band = stored(path)
        intervals[path] = _interval(
            _down(value * band.low, places),
            _up(value * band.high, places),
            band,
            basis_of(band, "measured / planned"),
            coverage,
        )

    verdict, notes = _verdict(result, sequences_at(pool_low), pool_low, coverage)
    if evidence is not None:
        notes = (evidence.note(), *notes)
    elif result.request.evidence is not None and result.request.evidence.applies(result.engine, result.gpu.key):
        other = result.request.evidence
        shape = replica_shape(layout.tp * layout.pp)
        notes = (
            f"Your startup logs: {other.logs} on {other.where} ({other.engine} {other.release_line}, {other.gpu}), "
            f"none of {shape} as this plan's are: the catalog's reserve and intervals stand (a replica's reserve "
            "differs by its shape: several GPUs keep NCCL and all-reduce buffers one GPU does not).",
            *notes,
        )
    return Judged(intervals, verdict, notes)


def _verdict(
    result: PlanResult, pessimistic_sequences: int, pessimistic_pool: float, coverage: float
) -> tuple[str, tuple[str, ...]]:
    """`fits`: the plan fits at the pessimistic end of the KV interval (each replica holds the sequences it
    runs, at least one); `tight`: at the central figure only; `does_not_fit`: not even there."""
    from planner.plan import running_sequences

    chosen = result.chosen
    if not chosen.fits:
        return "does_not_fit", ()
    layout, memory = chosen.layout, chosen.memory
    needed = max(1, -(-running_sequences(result.request, layout) // layout.dp))
    if pessimistic_sequences >= needed:
        return "fits", ()
    short = needed * memory.kv_bytes_per_sequence_per_gpu - pessimistic_pool
    margin = result.fit_margin()["kv_bytes_per_gpu"]
    what = (
        "the engine would not start (no full-length sequence per replica)"
        if pessimistic_sequences < 1
        else f"each replica holds {pessimistic_sequences} full-length sequences for the {needed} it runs"
    )
    return "tight", (
        f"Tight: it fits at the central KV pool ({memory.kv_pool_bytes / GIB:.2f} GiB per GPU, "
        f"{margin / GIB:+.2f} GiB of margin) but not at the {coverage:.0%} interval's pessimistic end "
        f"({max(pessimistic_pool, 0) / GIB:.2f} GiB): {what}, {short / GIB:.2f} GiB per GPU short. To fit "
        "there: fewer sequences or a shorter max_model_len, a higher gpu_memory_utilization, or more GPUs "
        "(a larger tp); engineering decides whether the central figure is enough.",
    )


PLACES = {"throughput.tpot_ms": 2, "throughput.ttft_ms": 1, "throughput.decode_tokens_per_s": 1}


def describe(path: str, figure: float, interval: dict[str, Any]) -> str:
    """One line for the text output: "TPOT 9.9 ms, 80% interval 8.6-19.5 ms, from 41 held-out runs"."""
    if path.startswith("memory_per_gpu."):
        scale, places, suffix = GIB, 2, " GiB"
    else:
        scale, places, suffix = 1, PLACES.get(path, 0), " ms" if path.endswith("_ms") else ""

    def unit(value: float) -> str:
        return f"{value / scale:,.{places}f}"

    fallback = " (pooled over every class, widened: its own has too few)" if "fewer than" in interval["basis"] else ""
    return (
        f"{LABELS[path]} {unit(figure)}{suffix}, {interval['coverage']:.0%} interval {unit(interval['low'])}{DASH}"
        f"{unit(interval['high'])}{suffix}, from {interval['n']} held-out runs{fallback}"
    )


def check_contract(contract: dict[str, Any]) -> Iterable[str]:
    """What is wrong with a plan JSON's intervals (empty when nothing): every path present, low <= figure
    <= high, the fields named in docs/contracts.md."""
    intervals = contract.get("intervals") or {}
    for path in PATHS:
        entry = intervals.get(path)
        if entry is None:
            yield f"intervals.{path}: missing"
            continue
        if set(entry) != {"low", "high", "coverage", "n", "basis"}:
            yield f"intervals.{path}: fields {sorted(entry)}"
        node: Any = contract
        for step in path.split("."):
            node = node[step]
        if not entry["low"] <= node <= entry["high"]:
            yield f"intervals.{path}: {entry['low']} <= {node} <= {entry['high']} does not hold"
    if contract.get("verdict") not in VERDICTS:
        yield f"verdict: {contract.get('verdict')!r}"
