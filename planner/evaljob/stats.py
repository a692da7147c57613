"""The gate statistic: one-sided 95% Clopper-Pearson upper bound of a failure rate (exact, stdlib only)."""

from __future__ import annotations

import math


def _binom_cdf(k: int, n: int, p: float) -> float:
    if p <= 0:
        return 1.0
    if p >= 1:
        return 1.0 if k >= n else 0.0
    log_p, log_q = math.log(p), math.log1p(-p)
    total = 0.0
    for i in range(k + 1):
        total += math.exp(
            math.lgamma(n + 1) - math.lgamma(i + 1) - math.lgamma(n - i + 1) + i * log_p + (n - i) * log_q
        )
    return min(total, 1.0)


def clopper_pearson_upper(failures: int, n: int, confidence: float = 0.95) -> float:
    """The p with P(X <= failures | n, p) = 1 - confidence (the Beta(k+1, n-k) quantile); 1 when k = n."""
    if n <= 0:
        return 1.0
    if not 0 <= failures <= n:
        raise ValueError("failures must be between 0 and n")
    if failures == n:
        return 1.0
    alpha = 1 - confidence
    low, high = failures / n, 1.0
    for _ in range(200):  # bisection: the CDF falls as p grows
        middle = (low + high) / 2
        if _binom_cdf(failures, n, middle) > alpha:
            low = middle
        else:
            high = middle
    return high


def gate(failures: int, n: int, threshold: float = 0.05) -> dict[str, float | int | bool]:
    bound = clopper_pearson_upper(failures, n)
    return {
        "n": n,
        "failures": failures,
        "fail_rate": failures / n if n else 0.0,
        "upper_bound_95": bound,
        "threshold": threshold,
        "pass": bound <= threshold,
    }
