"""Eval-set case ids never become paths (issue 43): the node refuses ids outside a safe pattern, cache
files are named by a hash of the id, and a cached answer counts only when it says which case and which
key (baseline digest, engine, version, serving, eval set, generation) produced it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from planner.evaljob import served
from planner.evaljob.cases import case_file_name, case_id_problem, load_cases

GENERATION = {"seed": 0, "max_new_tokens": 8}


def _set(tmp_path: Path, *ids: Any) -> Path:
    path = tmp_path / "set.jsonl"
    lines = [json.dumps({"id": i, "category": "ops", "turns": ["hi"], "key_items": ["x"]}) for i in ids]
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize(
    "bad",
    ["../../runs/other/cache/x", "a/b", "/etc/passwd", "..", ".hidden", "a\\b", "a b", "", "x" * 129, -1, True, 1.5],
)
def test_the_node_refuses_a_case_id_outside_the_safe_pattern_naming_the_line(tmp_path: Path, bad: Any) -> None:
    assert case_id_problem(bad) is not None
    with pytest.raises(ValueError, match=r"eval set line 2: id"):
        load_cases(str(_set(tmp_path, "ok-1", bad)), None)


def test_the_node_refuses_a_case_id_that_appears_twice(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"eval set line 3: id 'a' appears twice"):
        load_cases(str(_set(tmp_path, "a", "b", "a")), None)


def test_safe_ids_and_the_default_set_load() -> None:
    for good in ("math-000", "case_1.v2", "A:1", 0, 12345):
        assert case_id_problem(good) is None, good
    cases, _ = load_cases(None, 1)
    assert len(cases) == 4


def test_cache_file_names_are_a_hash_of_the_id_and_tell_an_integer_from_a_string() -> None:
    name = case_file_name("math-000")
    assert name.endswith(".json")
    assert "math" not in name
    assert "/" not in name
    assert case_file_name(1) != case_file_name("1")
    assert case_file_name("../../x") == Path(case_file_name("../../x")).name


def _fake_chat(asked: list[Any]) -> Any:
    def chat(base_url: str, model: str, case: dict[str, Any], generation: dict[str, Any], logprobs: bool) -> Any:
        asked.append(case["id"])
        return {"id": case["id"], "text": f"answer {case['id']}", "logprobs": None, "latency_s": 0.0}

    return chat


def _answer(cache: Path, cases: list[dict[str, Any]], key: str) -> dict[str, Any]:
    return served.answer_all("http://127.0.0.1:9", "m", cases, cache, GENERATION, False, 2, "baseline", key)


def test_answers_stay_in_their_cache_whatever_the_id(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[Any] = []
    monkeypatch.setattr(served, "chat", _fake_chat(asked))
    cache = tmp_path / "runs" / "r1" / "cache"
    escape = "../../../planted/x"  # an id that the loader refuses, written here directly
    _answer(cache, [{"id": escape, "turns": ["hi"]}, {"id": "a", "turns": ["hi"]}], "k1")
    assert sorted(p.name for p in cache.iterdir()) == sorted([case_file_name(escape), case_file_name("a")])
    assert not (tmp_path / "planted").exists()
    assert [p for p in tmp_path.rglob("*.json") if cache not in p.parents] == []


def test_a_cached_answer_counts_only_for_its_own_case_and_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[Any] = []
    monkeypatch.setattr(served, "chat", _fake_chat(asked))
    cache = tmp_path / "baseline-answers" / "k1"
    cases = [{"id": name, "turns": ["hi"]} for name in ("a", "b", "c", "d")]
    assert _answer(cache, cases, "k1")["asked"] == 4
    assert served.read_answer(cache, cases[0], "k1") == {
        "id": "a",
        "text": "answer a",
        "logprobs": None,
        "latency_s": 0.0,
        "key": "k1",
    }
    # planted: another key's answer, another case's answer, a foreign file, and a stray .json
    (cache / case_file_name("a")).write_text(json.dumps({"id": "a", "text": "planted", "key": "k2"}))
    (cache / case_file_name("b")).write_text(json.dumps({"id": "c", "text": "planted", "key": "k1"}))
    (cache / case_file_name("c")).write_text("not json at all")
    (cache / "d.json").write_text(json.dumps({"id": "d", "text": "planted", "key": "k1"}))
    for case in cases[:3]:
        assert served.read_answer(cache, case, "k1") is None, case
    assert served.read_answer(cache, cases[3], "k1") is not None  # its own file, untouched
    asked.clear()
    assert _answer(cache, cases, "k1")["asked"] == 3
    assert sorted(asked) == ["a", "b", "c"]
    assert all((served.read_answer(cache, case, "k1") or {}).get("text") == f"answer {case['id']}" for case in cases)
    # the same files under another key are not that key's answers
    assert all(served.read_answer(cache, case, "k2") is None for case in cases)
