"""The canary's verdict, as pure functions: each check's evidence (metric, the canary's and the stable
deployment's value, the threshold, the p-value, the verdict) and the analysis' overall verdict.

**Canary vs stable** (Kayenta's method): per metric, a one-sided Mann-Whitney U test of the canary's
samples against the stable deployment's at 98% confidence (alpha 0.02), plus an effect size, the
relative change of the medians, against the metric's allowed relative increase:

| the canary's median is, relative to stable's | test significant (p < 0.02) | not significant |
|---|---|---|
| worse by more than the allowed change | **failed** | **inconclusive** (a large effect the samples cannot confirm) |
| worse by more than `BORDERLINE` x the allowed change, within it | **inconclusive** (close to the limit) | passed |
| within `BORDERLINE` x the allowed change, or better | passed | passed |

**Against the plan**: the canary's median TTFT / TPOT must be at most the capacity plan's figure x
(1 + tolerance), its KV-cache usage below the plan's pool (usage fraction 1.0 + tolerance = saturated).

**No data is a failed check** (Flagger): a metric with no samples on either side, or no plan figure
measured, fails naming what is missing. The analysis passes only when every check passes; any
failed check fails it; otherwise an inconclusive check makes it inconclusive, for an engineering
reviewer to promote or roll back with a recorded reason.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal

CONFIDENCE = 0.98
ALPHA = 1 - CONFIDENCE
BORDERLINE = 0.8  # of the allowed change: closer than this to the limit with significance is borderline

PASSED, FAILED, INCONCLUSIVE = "passed", "failed", "inconclusive"


@dataclass(frozen=True, slots=True)
class MetricRule:
    """How one metric is judged: `worse` says which direction is a regression; `allowed_change` is
    the relative change of the median allowed in that direction (0.2 = 20%)."""

    metric: str
    allowed_change: float
    worse: str = "increase"  # or "decrease" (a hit rate)


@dataclass(frozen=True, slots=True)
class Check:
    """One check's evidence, stored in the analysis' `checks` and shown as it is."""

    kind: str  # "stable" (canary vs stable), "plan" (canary vs the capacity plan), "regression" (live eval)
    metric: str
    canary: float | None
    stable: float | None  # the stable deployment's median, or the plan's figure, or the eval's bound
    threshold: float | None
    p_value: float | None
    verdict: str
    detail: str

    def as_dict(self) -> dict[str, Any]:
        return {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in asdict(self).items()}


def _median(values: Sequence[float]) -> float:
    return float(statistics.median(values))


def _clean(values: Iterable[float]) -> list[float]:
    return [float(v) for v in values if v is not None and math.isfinite(float(v))]


def compare_with_stable(rule: MetricRule, canary: Iterable[float], stable: Iterable[float]) -> Check:
    """Canary vs stable for one metric (see the module's table)."""
    from scipy.stats import mannwhitneyu

    canary_s, stable_s = _clean(canary), _clean(stable)
    if not canary_s or not stable_s:
        missing = " and ".join(side for side, s in (("canary", canary_s), ("stable", stable_s)) if not s)
        return Check(
            "stable",
            rule.metric,
            _median(canary_s) if canary_s else None,
            _median(stable_s) if stable_s else None,
            rule.allowed_change,
            None,
            FAILED,
            f"no data: no samples of {rule.metric} for the {missing} deployment",
        )
    c, s = _median(canary_s), _median(stable_s)
    sign = 1.0 if rule.worse == "increase" else -1.0
    change = (0.0 if c == 0 else math.inf) if s == 0 else sign * (c - s) / abs(s)
    alternative: Literal["greater", "less"] = "greater" if rule.worse == "increase" else "less"
    if len(set(canary_s) | set(stable_s)) == 1:
        p_value = 1.0  # one value on both sides: nothing to test
    else:
        p_value = float(mannwhitneyu(canary_s, stable_s, alternative=alternative).pvalue)
    significant = p_value < ALPHA
    limit = rule.allowed_change
    if change > limit:
        verdict = FAILED if significant else INCONCLUSIVE
    elif change > BORDERLINE * limit and significant:
        verdict = INCONCLUSIVE
    else:
        verdict = PASSED
    direction = "above" if c >= s else "below"
    detail = (
        f"{rule.metric}: canary median {c:.6g} is {abs(c - s) / abs(s) * 100 if s else math.inf:.1f}% {direction} "
        f"stable {s:.6g} (allowed {rule.worse} {limit * 100:.0f}%); Mann-Whitney U one-sided p = {p_value:.3g} "
        f"({'significant' if significant else 'not significant'} at {CONFIDENCE:.0%}; "
        f"n = {len(canary_s)} canary, {len(stable_s)} stable)"
    )
    return Check("stable", rule.metric, c, s, limit, p_value, verdict, detail)


def compare_with_plan(metric: str, canary: Iterable[float], planned: float | None, tolerance: float) -> Check:
    """The canary's median against the plan's figure x (1 + tolerance): above it fails."""
    samples = _clean(canary)
    if planned is None:
        return Check("plan", metric, None, None, None, None, FAILED, f"no data: the capacity plan has no {metric}")
    limit = planned * (1 + tolerance)
    if not samples:
        return Check(
            "plan", metric, None, planned, limit, None, FAILED, f"no data: no samples of {metric} for the canary"
        )
    value = _median(samples)
    verdict = PASSED if value <= limit else FAILED
    return Check(
        "plan",
        metric,
        value,
        planned,
        limit,
        None,
        verdict,
        f"{metric}: canary median {value:.6g} against the plan's {planned:.6g} x (1 + {tolerance:g}) = {limit:.6g}",
    )


def overall(checks: Sequence[Check]) -> str:
    """passed when every check passed; failed when any failed (or there is none); else inconclusive."""
    if not checks or any(c.verdict == FAILED for c in checks):
        return FAILED
    if any(c.verdict == INCONCLUSIVE for c in checks):
        return INCONCLUSIVE
    return PASSED
