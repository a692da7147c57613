import pytest
from scipy.stats import beta

from planner.evaljob.metrics import case_verdict, summarize_kl
from planner.evaljob.stats import clopper_pearson_upper, gate


@pytest.mark.parametrize(("failures", "n"), [(0, 60), (1, 60), (1, 100), (5, 100), (0, 10), (3, 400), (40, 400)])
def test_upper_bound_matches_scipys_beta_quantile(failures: int, n: int) -> None:
    assert clopper_pearson_upper(failures, n) == pytest.approx(beta.ppf(0.95, failures + 1, n - failures), abs=1e-9)


def test_known_gate_cases() -> None:
    assert gate(0, 60)["pass"] is True  # bound 0.0487
    assert gate(1, 60)["pass"] is False  # bound 0.0766
    assert gate(1, 100)["pass"] is True  # bound 0.0466
    assert gate(0, 59)["pass"] is True  # 1 - 0.05^(1/59) = 0.0495
    assert gate(0, 58)["pass"] is False  # 0.0503: below 59 cases a 5% gate cannot pass at all
    assert clopper_pearson_upper(0, 60) == pytest.approx(1 - 0.05 ** (1 / 60))
    assert clopper_pearson_upper(7, 7) == 1.0


def test_case_verdict_counts_lost_items_and_contradictions() -> None:
    case = {"key_items": ["4711", "Alice"], "contradictions": ["4718"], "reference": "4711"}
    ok = case_verdict(case, "Alice, your order is 4711.", "Your order 4711, Alice.")
    assert ok["failed"] is False
    assert ok["baseline_correct"] is True
    lost = case_verdict(case, "Alice, your order is 4711.", "Your order is 4718, Alice.")
    assert lost["failed"] is True
    assert lost["lost_items"] == ["4711"]
    assert lost["contradictions"] == ["4718"]
    assert lost["quantized_correct"] is False
    # An item the baseline never produced cannot be lost.
    assert case_verdict(case, "no idea", "still no idea")["failed"] is False


def test_kl_summary() -> None:
    assert summarize_kl([0.0] * 99 + [5.0]) == {"mean": 0.05, "p99": 0.0}
    assert summarize_kl([float(i) for i in range(100)])["p99"] == 98.0
