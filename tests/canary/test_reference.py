"""The eval's summary keeps the candidate's answers the canary's live regression compares with."""

from __future__ import annotations

from governance.evaluations.evals import summarise


def test_the_summary_keeps_the_candidate_answers() -> None:
    result = {"mode": "served", "pass": True, "overall": {}, "candidate_answers": {"math-000": "254"}}
    assert summarise(result)["candidate_answers"] == {"math-000": "254"}
