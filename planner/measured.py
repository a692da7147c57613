"""The team's own canary and fleet measurements of TPOT and TTFT, ahead of the catalog's (issue 47).

What `planner.intervals.TeamEvidence` is to the memory figures (startup logs), this is to the latency figures:
the service stores each canary analysis' and fleet re-check's measured TTFT and TPOT against the deployment's
plan (governance/canary/plan_fit.py, as measured / planned ratios against the catalog's figure) and hands the
planner those of one team, cluster, GPU, engine and release line (`MeasuredEvidence`). One *measurement* is one
canary analysis: its own window and the fleet re-checks of the deployment it became, folded into their median
ratio (a fleet re-check every few minutes re-measures the same deployment; it is not a new one).

Comparable measurements, for a plan: those of the same cluster, GPU, engine and release line (the evidence the
service hands over), and of the same replica shape (one GPU per replica or several: tp x pp), which the
catalog's held-out residuals are grouped by too (`planner.intervals.case_class`): a multi-GPU replica's step
holds collectives whose share of the error is the cluster's interconnect, which a single-GPU deployment never
measures. Models, precisions and workloads may differ: a ratio to the plan of each measurement's own model and
workload is what carries over (the planner's own error on this cluster, not the model's figure).

With MIN_MEASUREMENTS or more comparable measurements of a figure, the plan's figure is the catalog's times
their median ratio (tokens/s, derived from TPOT, divided by TPOT's), and its interval is the spread of the ratios
around that median, at least LATENCY_NOISE either side; with fewer the catalog's figure and interval stand and a
note says why. The plan states the factors it applied (`throughput_estimate.team_correction`), so a measurement
of a corrected plan is turned back into a ratio to the catalog's figure before it calibrates the next plan.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from planner.intervals import (
    COVERAGE,
    MIN_TEAM_LOGS,
    check_release_line,
    evidence_applies,
    quantile_bounds,
    replica_shape,
)

if TYPE_CHECKING:
    from planner.engines import EngineProfile
    from planner.perf import Throughput

# The startup logs' minimum, for the same reason: one measurement may be that deployment's accident, two cannot
# say which of them is.
MIN_MEASUREMENTS = MIN_TEAM_LOGS
# The least half-width of an interval the measurements give, as a share of the figure: a stated floor, not a
# measured one (no corpus holds repeated canary windows of one deployment). A canary's median TPOT moves with the
# batch the traffic of its window keeps running (a few percent between windows of one deployment); its median
# TTFT moves also with the prompts drawn and with queueing behind other prefills, and the planner's own bounds
# hold TTFT to 2.5 times TPOT's error (planner.corpus.BOUNDS: 25% against 10% median).
LATENCY_NOISE: dict[str, float] = {"tpot_ms": 0.05, "ttft_ms": 0.10}
# The figures measured, with the plan JSON's path and the name a note gives them.
MEASURED_FIGURES: dict[str, tuple[str, str]] = {
    "tpot_ms": ("throughput.tpot_ms", "TPOT"),
    "ttft_ms": ("throughput.ttft_ms", "TTFT"),
}
TOKENS_PATH = "throughput.decode_tokens_per_s"  # derived from TPOT: output tokens/s = concurrency / TPOT


_shape = replica_shape  # as the startup logs' notes say it


@dataclass(frozen=True, slots=True)
class LatencyRatio:
    """One measurement of one figure: a canary analysis' (with its fleet re-checks') median measured / planned
    ratio, against the catalog's figure for that deployment's own plan."""

    figure: str  # tpot_ms | ttft_ms
    ratio: float
    gpus_per_replica: int  # tp x pp of the deployment measured

    def __post_init__(self) -> None:
        if self.figure not in MEASURED_FIGURES:
            raise ValueError(f"figure: {self.figure!r} is not one of {', '.join(MEASURED_FIGURES)}")
        if isinstance(self.ratio, bool) or not (
            isinstance(self.ratio, int | float) and math.isfinite(self.ratio) and self.ratio > 0
        ):
            raise ValueError("ratio: must be a finite number > 0 (measured / planned)")
        if isinstance(self.gpus_per_replica, bool) or not isinstance(self.gpus_per_replica, int):
            raise ValueError("gpus_per_replica: must be a whole number >= 1")
        if self.gpus_per_replica < 1:
            raise ValueError("gpus_per_replica: must be a whole number >= 1")


@dataclass(frozen=True, slots=True)
class MeasuredEvidence:
    """The team's canary and fleet measurements of one cluster, GPU, engine and release line (the service
    selects them; the planner decides which are comparable to a plan and whether they are enough)."""

    where: str  # "cluster gpu-a": how the plan names them
    gpu: str  # catalog key of the GPUs measured
    engine: str  # vllm | sglang | trtllm: the memory profile's name
    release_line: str  # "0.10": the major.minor the measured engines ran
    ratios: tuple[LatencyRatio, ...]

    def __post_init__(self) -> None:
        check_release_line(self.release_line)
        if any(not isinstance(r, LatencyRatio) for r in self.ratios):
            raise ValueError("ratios: must be LatencyRatio measurements")

    def applies(self, engine: EngineProfile, gpu_key: str) -> bool:
        return evidence_applies(self.engine, self.release_line, self.gpu, engine, gpu_key)

    def comparable(self, figure: str, gpus_per_replica: int) -> tuple[float, ...]:
        """The ratios of `figure` measured on replicas of the plan's shape (one GPU, or several)."""
        multi = gpus_per_replica > 1
        return tuple(r.ratio for r in self.ratios if r.figure == figure and (r.gpus_per_replica > 1) == multi)


@dataclass(frozen=True, slots=True)
class Correction:
    """What enough measurements of one figure make of it: the factor on the catalog's figure (their median
    ratio) and the interval, as factors on the corrected figure."""

    figure: str
    factor: float
    low: float  # <= 1 - LATENCY_NOISE[figure]
    high: float  # >= 1 + LATENCY_NOISE[figure]
    ratios: tuple[float, ...]
    where: str
    what: str  # "vllm 0.10, h100-80g, one GPU per replica"

    @property
    def n(self) -> int:
        return len(self.ratios)

    def basis(self) -> str:
        noise = LATENCY_NOISE[self.figure]
        return (
            f"{self.n} of your canary measurements on {self.where} ({self.what}): the spread of their measured / "
            f"planned ratios around their median, at least ±{noise:.0%} (measurement noise), in place of the "
            "catalog's held-out residuals"
        )


@dataclass(frozen=True, slots=True)
class Corrections:
    """The measurements' effect on one plan: the figures they correct, and a note per figure measured."""

    by_figure: dict[str, Correction]
    notes: tuple[str, ...]

    def factor(self, figure: str) -> float:
        found = self.by_figure.get(figure)
        return found.factor if found is not None else 1.0

    def interval(self, path: str) -> tuple[float, float, int, str] | None:
        """The interval of the plan JSON's `path` as factors on its (corrected) figure, the measurements it
        stands on and its basis; None where the catalog's stands. Tokens/s takes TPOT's, inverted."""
        if path == TOKENS_PATH:
            tpot = self.by_figure.get("tpot_ms")
            if tpot is None:
                return None
            return 1 / tpot.high, 1 / tpot.low, tpot.n, tpot.basis() + "; tokens/s is concurrency / TPOT: derived"
        figure = next((name for name, (where, _) in MEASURED_FIGURES.items() if where == path), None)
        found = self.by_figure.get(figure) if figure is not None else None
        if found is None:
            return None
        return found.low, found.high, found.n, found.basis()

    def apply(self, throughput: Throughput) -> Throughput:
        """The throughput with the corrected figures: TPOT (and tokens/s, concurrency / TPOT) and TTFT (and the
        first wave's). The decode step and its breakdown stay the model's: the correction is not placed in any
        one part of it."""
        if not self.by_figure:
            return throughput
        tpot, ttft = self.factor("tpot_ms"), self.factor("ttft_ms")
        return replace(
            throughput,
            tpot_ms=throughput.tpot_ms * tpot,
            decode_tokens_per_s=throughput.decode_tokens_per_s / tpot,
            ttft_ms=throughput.ttft_ms * ttft,
            first_wave_ttft_ms=throughput.first_wave_ttft_ms * ttft,
            team_correction=tuple((figure, round(c.factor, 4)) for figure, c in sorted(self.by_figure.items())),
        )


NO_CORRECTIONS = Corrections({}, ())


def corrections(
    evidence: MeasuredEvidence | None, engine: EngineProfile, gpu_key: str, gpus_per_replica: int
) -> Corrections:
    """What the team's measurements make of a plan of `engine` on `gpu_key` with replicas of `gpus_per_replica`
    GPUs (see the module docstring). Evidence of another engine, release line or GPU does nothing, silently: it
    is not this plan's."""
    if evidence is None or not evidence.applies(engine, gpu_key):
        return NO_CORRECTIONS
    what = f"{evidence.engine} {evidence.release_line}, {evidence.gpu}, {_shape(gpus_per_replica)}"
    found: dict[str, Correction] = {}
    notes: list[str] = []
    for figure, (_, label) in MEASURED_FIGURES.items():
        ratios = evidence.comparable(figure, gpus_per_replica)
        if not ratios:
            continue
        if len(ratios) < MIN_MEASUREMENTS:
            notes.append(
                f"{label}: {len(ratios)} of your canary measurements on {evidence.where} ({what}), fewer than "
                f"{MIN_MEASUREMENTS}: the catalog's {label} and its interval stand until there are {MIN_MEASUREMENTS}."
            )
            continue
        factor = float(statistics.median(ratios))
        low, high = quantile_bounds([r / factor for r in ratios], COVERAGE)
        noise = LATENCY_NOISE[figure]
        correction = Correction(
            figure, factor, min(low, 1 - noise), max(high, 1 + noise), tuple(ratios), evidence.where, what
        )
        found[figure] = correction
        derived = " (tokens/s divided by it)" if figure == "tpot_ms" else ""
        notes.append(
            f"{label} from {correction.n} of your canary measurements on {evidence.where} ({what}): they ran a "
            f"median {factor:.2f}x the catalog's plan ({min(ratios):.2f}x to {max(ratios):.2f}x), so this plan's "
            f"{label} is the catalog's x {factor:.2f}{derived}, and its interval is the spread of those measurements "
            f"(at least ±{noise:.0%}: measurement noise), not the catalog's."
        )
    return Corrections(found, tuple(notes))
