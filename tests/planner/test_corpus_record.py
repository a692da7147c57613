"""No silent regressions (issue 47): the corpus errors recorded in bench/corpus_errors.json hold. A change that
makes any figure's median or max |error| worse than recorded by more than planner.corpus.RECORD_TOLERANCE, or
scores fewer cases, fails here; one that improves them rewrites the record (bench/corpus.py --write-record)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from planner import corpus

RECORD = Path(__file__).resolve().parents[2] / "bench" / "corpus_errors.json"


def _recorded() -> dict[str, Any]:
    return dict(json.loads(RECORD.read_text(encoding="utf-8")))


def test_the_in_sample_errors_are_no_worse_than_recorded() -> None:
    results = [corpus.run_case(case) for case in corpus.cases()]
    now = corpus.error_record(results)
    assert set(now) == {"in_sample"}
    assert corpus.record_regressions(_recorded(), now) == []


@pytest.mark.cpu_bound  # the shared refits (tests/planner/conftest.py), in the serial process (docs/testing.md)
def test_the_leave_one_source_out_errors_are_no_worse_than_recorded(
    corpus_held_out: tuple[corpus.HeldOut, ...],
) -> None:
    now = corpus.error_record([], list(corpus_held_out))
    now.pop("in_sample")
    assert corpus.record_regressions(_recorded(), now) == []


def test_a_worse_figure_or_a_lost_case_is_named() -> None:
    recorded = _recorded()
    worse = copy.deepcopy(recorded)
    del worse["generated_by"]
    tpot = worse["leave_one_source_out"]["all"]["tpot_ms"]
    tpot["median"] += corpus.RECORD_TOLERANCE["median"] + 0.001
    worse["in_sample"]["all"]["ttft_ms"]["n"] -= 1
    within = copy.deepcopy(recorded)
    del within["generated_by"]
    within["in_sample"]["all"]["tpot_ms"]["max"] += corpus.RECORD_TOLERANCE["max"] - 0.001
    assert corpus.record_regressions(recorded, within) == []
    problems = corpus.record_regressions(recorded, worse)
    assert len(problems) == 2
    assert problems[0].startswith("in_sample.all.ttft_ms: scored on")
    assert problems[1].startswith("leave_one_source_out.all.tpot_ms.median:")
