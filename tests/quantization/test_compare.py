"""The comparison's records file: a run cut by a time limit keeps what it measured (every category
alike), a second run measures only the missing cases, and the file summarizes to the same figures."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from planner.evaljob.cases import load_cases
from planner.quantjob import compare

CHECKPOINT = Path(__file__).resolve().parents[2] / "planner" / "tinylm" / "checkpoint"


def record(case: dict[str, object], failed: bool) -> dict[str, object]:
    return {
        "id": case["id"],
        "category": case["category"],
        "lost_items": ["x"] if failed else [],
        "contradictions": [],
        "failed": failed,
        "tokens": {"positions": 4, "agree": 3.0, "kl": [0.0, 0.1, 0.2, 0.3]},
    }


def test_cases_go_round_robin_by_category_and_none_is_lost() -> None:
    cases, _ = load_cases(None, None)
    ordered = compare.interleaved(cases)
    assert sorted(c["id"] for c in ordered) == sorted(c["id"] for c in cases)
    first = [c["category"] for c in ordered[:8]]
    assert len(set(first[:4])) == 4  # a cut run holds every category alike
    assert first[:4] == first[4:]


def test_a_complete_records_file_is_summarized_and_a_rerun_measures_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    cases, _ = load_cases(None, 2)
    records = tmp_path / "records.jsonl"
    lines = [record(case, failed=index == 0) for index, case in enumerate(cases)]
    lines.append(record({"id": "not-in-this-set", "category": "math"}, failed=True))  # another set's case
    records.write_text("".join(json.dumps(line) + "\n" for line in lines))
    assert compare.main(["--summarize-records", str(records)]) == 0
    summarized = json.loads(capsys.readouterr().out)
    assert summarized["overall"]["n"] == len(cases) + 1
    # A rerun with the same file: every case of the set is in it, so no generation happens, and the
    # case of another set is left out of the summary.
    import planner.evaljob.run as evaljob

    monkeypatch.setattr(evaljob, "generate", lambda *a: pytest.fail("a measured case was generated again"))
    result = compare.compare(CHECKPOINT, CHECKPOINT, 2, 8, 0.05, records)
    assert result["overall"]["n"] == len(cases)
    assert result["overall"]["failures"] == 1


def test_compare_without_models_or_records_is_refused_naming_the_flags(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        compare.main(["--baseline", str(CHECKPOINT)])
    assert "--baseline and --candidate are required" in capsys.readouterr().err
