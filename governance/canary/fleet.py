"""The fleet after promotion, as pure functions: a promoted deployment's serving series over a window
held against its capacity plan. A figure beyond its limit in at least `fraction` of the window's
samples is *sustained* (a moment's spike is not): an alert.

| metric | limit | why |
|---|---|---|
| `kv_cache_usage` | the saturated pool (0.95) | the plan sized the pool for its concurrency |
| `queue_time_seconds` | the plan's TTFT | waiting in the queue as long as the planned first token: past the planned load |
| `preemptions_per_second` | 0 | a pool sized as planned preempts nothing |

A metric with no samples is `no_data`: shown, never an alert (the fleet check does not page on a
scrape gap; the canary analysis, where no data fails, is the gate's)."""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

FLEET_METRICS = ("kv_cache_usage", "queue_time_seconds", "preemptions_per_second")


@dataclass(frozen=True, slots=True)
class FleetFigure:
    metric: str
    value: float | None  # the window's median
    limit: float | None
    breaching: float | None  # the share of the window's samples beyond the limit
    samples: int
    alert: bool
    detail: str

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def fleet_limits(plan_result: Mapping[str, Any], *, kv_saturated: float) -> dict[str, float | None]:
    ttft_ms = (plan_result.get("throughput") or {}).get("ttft_ms")
    return {
        "kv_cache_usage": kv_saturated,
        "queue_time_seconds": None if ttft_ms is None else float(ttft_ms) / 1000,
        "preemptions_per_second": 0.0,
    }


def sustained(metric: str, samples: Sequence[float], limit: float | None, fraction: float) -> FleetFigure:
    values = [float(v) for v in samples if v is not None and math.isfinite(float(v))]
    if limit is None:
        return FleetFigure(metric, None, None, None, len(values), False, f"{metric}: the plan has no limit for it")
    if not values:
        return FleetFigure(metric, None, limit, None, 0, False, f"{metric}: no samples in the window (no data)")
    beyond = [v for v in values if (v >= limit if metric == "kv_cache_usage" else v > limit)]
    share = len(beyond) / len(values)
    median = float(statistics.median(values))
    alert = share >= fraction
    detail = (
        f"{metric}: beyond {limit:.4g} in {len(beyond)} of {len(values)} samples ({share:.0%}; "
        f"sustained from {fraction:.0%}), median {median:.4g}"
    )
    return FleetFigure(metric, round(median, 6), limit, round(share, 4), len(values), alert, detail)


def judge_fleet(
    plan_result: Mapping[str, Any], samples: Mapping[str, Sequence[float]], *, kv_saturated: float, fraction: float
) -> list[FleetFigure]:
    limits = fleet_limits(plan_result, kv_saturated=kv_saturated)
    return [sustained(metric, samples.get(metric, []), limits[metric], fraction) for metric in FLEET_METRICS]
