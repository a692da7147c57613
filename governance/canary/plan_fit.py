"""The plan meets reality, as pure functions: a deployment's measured TTFT, TPOT and KV-cache usage
held against its capacity plan's figures and, where the plan states them, their 80% intervals
(planner/intervals.py: `intervals["throughput.ttft_ms"]` and `["throughput.tpot_ms"]`), what
`planner check-log` does for a startup log's memory figures. Each figure keeps the engine-side
median (Prometheus) and the service's own client-side median (the live regression's requests), so
the planner's calibration can be fitted per cluster and engine from the exported rows.

A figure measured worse than planned by more than the tolerance (`limit` = planned x (1 +
tolerance); for KV-cache usage the saturated pool) is `worse`: a finding for engineering (the plan,
or the calibration it used, is wrong for this cluster). A latency outside the plan's interval, either
way (`position` below or above), is flagged to engineering too (`outside_interval`). No measurement is
`no_data`, never a pass. Each latency also keeps its ratio to the catalog's figure (`catalog_ratio`):
a plan the team's earlier measurements corrected states its factor, and the next plans are calibrated
from ratios to the catalog, not to a corrected figure (planner/measured.py)."""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

AS_PLANNED, WORSE, NO_DATA = "as_planned", "worse", "no_data"

# (figure, the engine-side metric of the analysis, the client-side measurement, the plan's path)
LATENCY_FIGURES: tuple[tuple[str, str, str, str], ...] = (
    ("ttft_ms", "ttft_seconds", "client_ttft_seconds", "throughput.ttft_ms"),
    ("tpot_ms", "inter_token_latency_seconds", "client_tpot_seconds", "throughput.tpot_ms"),
)
KV_FIGURE = "kv_cache_usage"


@dataclass(frozen=True, slots=True)
class PlanFigure:
    figure: str  # ttft_ms, tpot_ms (milliseconds) or kv_cache_usage (a fraction of the pool)
    planned: float | None  # the plan's figure; for KV-cache usage the saturated pool's fraction
    low: float | None  # the plan's interval where it has one
    high: float | None
    measured: float | None  # engine-side median
    client: float | None  # the service's own client-side median (latencies only)
    limit: float | None  # above it the figure is worse than planned
    ratio: float | None  # measured / planned
    position: str  # against the interval: below, inside, above; "" without one
    verdict: str  # as_planned, worse, no_data
    detail: str
    # measured / the catalog's figure: the ratio over the team's correction the plan applied (its
    # throughput_estimate.team_correction, planner/measured.py), what the next plans are calibrated from
    catalog_ratio: float | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _median(values: Sequence[float]) -> float | None:
    clean = [float(v) for v in values if v is not None and math.isfinite(float(v))]
    return float(statistics.median(clean)) if clean else None


def _round(value: float | None, places: int = 4) -> float | None:
    return None if value is None else round(value, places)


def _dig(result: Mapping[str, Any], path: str) -> Any:
    value: Any = result
    for part in path.split("."):
        value = value.get(part) if isinstance(value, Mapping) else None
    return value


def _interval(result: Mapping[str, Any], path: str) -> tuple[float | None, float | None]:
    interval = (result.get("intervals") or {}).get(path) or {}
    low, high = interval.get("low"), interval.get("high")
    return (None if low is None else float(low)), (None if high is None else float(high))


def latency_figure(
    figure: str,
    planned: float | None,
    interval: tuple[float | None, float | None],
    engine_samples_s: Sequence[float],
    client_median_s: float | None,
    tolerance: float,
    correction: float = 1.0,
) -> PlanFigure:
    """One latency figure in milliseconds: the engine-side median against planned x (1 + tolerance).
    `correction`: the factor the team's measurements put on the catalog's figure to give `planned`."""
    low, high = interval
    measured = _median(engine_samples_s)
    measured_ms = None if measured is None else measured * 1000
    client_ms = None if client_median_s is None else client_median_s * 1000
    if planned is None:
        return PlanFigure(figure, None, low, high, _round(measured_ms), _round(client_ms), None, None, "", NO_DATA,
                          f"{figure}: the capacity plan has no figure")  # fmt: skip
    limit = planned * (1 + tolerance)
    if measured_ms is None:
        return PlanFigure(figure, planned, low, high, None, _round(client_ms), _round(limit), None, "", NO_DATA,
                          f"{figure}: no engine-side samples measured")  # fmt: skip
    position = ""
    if low is not None and high is not None:
        position = "below" if measured_ms < low else "above" if measured_ms > high else "inside"
    ratio = measured_ms / planned if planned else None
    worse = measured_ms > limit
    detail = f"{figure}: measured {measured_ms:.4g} ms against the plan's {planned:.4g} ms"
    if position:
        detail += f" (interval {low:.4g} to {high:.4g} ms: {position})"
    detail += f"; limit {limit:.4g} ms (+{tolerance:.0%})"
    if client_ms is not None:
        detail += f"; the service's own requests measured {client_ms:.4g} ms"
    catalog_ratio = None if ratio is None else ratio * correction
    return PlanFigure(figure, planned, low, high, _round(measured_ms), _round(client_ms), _round(limit),
                      _round(ratio), position, WORSE if worse else AS_PLANNED, detail, _round(catalog_ratio))  # fmt: skip


def kv_figure(samples: Sequence[float], saturated: float) -> PlanFigure:
    """KV-cache usage (a fraction of the planned pool): worse when its median reaches saturation."""
    measured = _median(samples)
    if measured is None:
        return PlanFigure(KV_FIGURE, saturated, None, None, None, None, saturated, None, "", NO_DATA,
                          f"{KV_FIGURE}: no engine-side samples measured")  # fmt: skip
    worse = measured >= saturated
    detail = f"{KV_FIGURE}: measured {measured:.1%} of the planned pool; saturated at {saturated:.0%}"
    return PlanFigure(KV_FIGURE, saturated, None, None, _round(measured), None, saturated, _round(measured / saturated),
                      "", WORSE if worse else AS_PLANNED, detail)  # fmt: skip


def plan_vs_measured(
    plan_result: Mapping[str, Any],
    engine_samples: Mapping[str, Sequence[float]],
    client: Mapping[str, Any],
    *,
    tolerance: float,
    kv_saturated: float,
) -> list[PlanFigure]:
    """TTFT, TPOT and KV-cache usage held against the plan (see the module docstring)."""
    figures = []
    corrected = _dig(plan_result, "throughput_estimate.team_correction") or {}
    for figure, metric, client_key, path in LATENCY_FIGURES:
        planned = _dig(plan_result, path)
        factor = corrected.get(figure) if isinstance(corrected, Mapping) else None
        figures.append(
            latency_figure(
                figure,
                None if planned is None else float(planned),
                _interval(plan_result, path),
                engine_samples.get(metric, []),
                (client.get(client_key) or {}).get("median"),
                tolerance,
                float(factor) if isinstance(factor, int | float) and factor > 0 else 1.0,
            )
        )
    figures.append(kv_figure(engine_samples.get("kv_cache_usage", []), kv_saturated))
    return figures


def worse_than_planned(figures: Sequence[PlanFigure]) -> list[PlanFigure]:
    return [f for f in figures if f.verdict == WORSE]


OUTSIDE = ("below", "above")


def outside_interval(figures: Sequence[PlanFigure]) -> list[PlanFigure]:
    """The figures measured outside the plan's interval, either way: the plan, or the calibration it took, is
    off for this cluster (faster than planned too: the next plans would be sized on a wrong figure)."""
    return [f for f in figures if f.position in OUTSIDE]


def outside_text(figures: Sequence[PlanFigure]) -> str:
    """ "tpot_ms 30 ms measured, interval 18.5-21.5 ms (above)", for the audit event and the message."""
    return "; ".join(
        f"{f.figure} {f.measured:.4g} ms measured, interval {f.low:.4g}\u2013{f.high:.4g} ms ({f.position})"
        for f in figures
        if f.measured is not None and f.low is not None and f.high is not None
    )
