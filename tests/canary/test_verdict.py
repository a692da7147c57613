"""The canary verdict as pure functions (no database): Kayenta's Mann-Whitney U at 98% plus an
allowed relative change, the plan's figures x tolerance, and Flagger's 'no data is a failed check'."""

from __future__ import annotations

import random

import pytest

from governance.canary.verdict import (
    ALPHA,
    FAILED,
    INCONCLUSIVE,
    PASSED,
    Check,
    MetricRule,
    compare_with_plan,
    compare_with_stable,
    overall,
)

TTFT = MetricRule("ttft_seconds", allowed_change=0.2)


def samples(center: float, n: int = 40, spread: float = 0.05, seed: int = 0) -> list[float]:
    rng = random.Random(seed)
    return [center * (1 + rng.uniform(-spread, spread)) for _ in range(n)]


def test_a_canary_ttft_40_percent_above_stable_fails_stating_metric_values_p_value_and_threshold() -> None:
    stable = samples(0.200, seed=1)
    canary = samples(0.280, seed=2)

    check = compare_with_stable(TTFT, canary, stable)

    assert check.verdict == FAILED
    assert check.metric == "ttft_seconds"
    assert check.canary == pytest.approx(0.28, rel=0.05)
    assert check.stable == pytest.approx(0.20, rel=0.05)
    assert check.threshold == 0.2
    assert check.p_value is not None
    assert check.p_value < ALPHA
    for text in ("ttft_seconds", f"{check.canary:.6g}", f"{check.stable:.6g}", "allowed increase 20%", "p = "):
        assert text in check.detail, (text, check.detail)
    assert check.as_dict()["p_value"] == check.p_value


def test_a_canary_like_stable_passes() -> None:
    check = compare_with_stable(TTFT, samples(0.2, seed=3), samples(0.2, seed=4))
    assert check.verdict == PASSED
    assert check.p_value is not None
    assert check.p_value > ALPHA


def test_a_significant_but_small_increase_passes_the_effect_size_decides() -> None:
    # 5% slower, many samples: significant, but within the allowed 20%
    check = compare_with_stable(TTFT, samples(0.210, n=400, spread=0.01, seed=5), samples(0.2, n=400, spread=0.01))
    assert check.p_value is not None
    assert check.p_value < ALPHA
    assert check.verdict == PASSED


def test_a_large_increase_on_too_few_samples_is_inconclusive() -> None:
    check = compare_with_stable(TTFT, [0.30, 0.27], [0.20, 0.21])
    assert check.p_value is not None
    assert check.p_value >= ALPHA
    assert check.verdict == INCONCLUSIVE


def test_a_significant_increase_close_to_the_limit_is_inconclusive() -> None:
    check = compare_with_stable(TTFT, samples(0.236, spread=0.01, seed=6), samples(0.2, spread=0.01, seed=7))
    assert check.verdict == INCONCLUSIVE  # 18% above: beyond 0.8 x 20%, within 20%


def test_a_metric_where_lower_is_worse() -> None:
    hit_rate = MetricRule("prefix_cache_hit_rate", allowed_change=0.1, worse="decrease")
    assert compare_with_stable(hit_rate, samples(0.5, seed=8), samples(0.8, seed=9)).verdict == FAILED
    assert compare_with_stable(hit_rate, samples(0.9, seed=8), samples(0.8, seed=9)).verdict == PASSED


@pytest.mark.parametrize(("canary", "stable"), [([], [0.2]), ([0.2], []), ([], [])])
def test_no_series_is_a_failed_check_naming_the_missing_side(canary: list[float], stable: list[float]) -> None:
    check = compare_with_stable(TTFT, canary, stable)
    assert check.verdict == FAILED
    assert "no data" in check.detail
    assert ("canary" in check.detail) == (not canary)


def test_the_plan_check_uses_the_planned_figure_times_the_tolerance() -> None:
    assert compare_with_plan("tpot_seconds", [0.011, 0.012], planned=0.01, tolerance=0.25).verdict == PASSED
    failed = compare_with_plan("tpot_seconds", [0.013, 0.014], planned=0.01, tolerance=0.25)
    assert failed.verdict == FAILED
    assert failed.threshold == pytest.approx(0.0125)
    assert compare_with_plan("tpot_seconds", [], planned=0.01, tolerance=0.25).verdict == FAILED
    assert compare_with_plan("tpot_seconds", [0.01], planned=None, tolerance=0.25).verdict == FAILED


def check(verdict: str) -> Check:
    return Check("stable", "m", 1.0, 1.0, 0.2, 0.5, verdict, "")


def test_the_overall_verdict() -> None:
    assert overall([check(PASSED), check(PASSED)]) == PASSED
    assert overall([check(PASSED), check(INCONCLUSIVE)]) == INCONCLUSIVE
    assert overall([check(INCONCLUSIVE), check(FAILED)]) == FAILED
    assert overall([]) == FAILED  # nothing measured is not a pass
