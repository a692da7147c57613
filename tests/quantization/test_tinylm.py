"""The trained tiny model: its training data never holds an eval case, and the committed checkpoint
is the one the training log describes (digest per file, size under the 10 MB the repo allows)."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pytest

from planner.evaljob.cases import DEFAULT_SET, prompt_text
from planner.evaljob.families import eval_exclusions, examples
from planner.tinylm.train import SEED

CHECKPOINT = Path(__file__).resolve().parents[2] / "planner" / "tinylm" / "checkpoint"


def _eval_cases() -> list[dict]:
    return [json.loads(line) for line in DEFAULT_SET.read_text(encoding="utf-8").splitlines() if line.strip()]


def _values(case: dict) -> frozenset[str]:
    """What makes an eval case that case, read from its key items and its numbers (independently of
    the generator's own signatures)."""
    numbers = re.findall(r"\d+", case["turns"][0])
    return frozenset([*case["key_items"], *numbers])


@pytest.mark.slow
def test_training_pool_holds_no_eval_case() -> None:
    cases = _eval_cases()
    prompts = {prompt_text(case["turns"]) for case in cases}
    by_category: dict[str, set[frozenset[str]]] = {}
    for case in cases:
        by_category.setdefault(case["category"], set()).add(_values(case))
    pool = list(examples(SEED, 300_000))  # the pool train.py draws every batch from
    assert len(pool) == 300_000
    for example in pool:
        assert prompt_text(example.turns) not in prompts
        numbers = re.findall(r"\d+", example.turns[0])
        values = frozenset(str(v) for v in example.signature[1:]) | frozenset(numbers)
        # An eval case's values all present in a training example of its family = the same case.
        assert not any(case_values <= values for case_values in by_category[example.family]), example


def test_every_eval_case_is_excluded_and_the_pool_covers_each_family() -> None:
    signatures, prompts = eval_exclusions()
    assert len(prompts) == len({prompt_text(c["turns"]) for c in _eval_cases()}) >= 398
    assert {s[0] for s in signatures} == {"math", "code", "zh_summary", "multi_turn"}
    families = {e.family for e in examples(SEED, 200)}
    assert families == {"math", "code", "zh_summary", "multi_turn"}


def test_generator_is_reproducible_and_rejects_a_negative_count() -> None:
    assert list(examples(7, 50)) == list(examples(7, 50))
    assert list(examples(7, 50)) != list(examples(8, 50))
    with pytest.raises(ValueError, match="count"):
        list(examples(7, -1))


def test_committed_checkpoint_matches_its_training_log() -> None:
    log = json.loads((CHECKPOINT / "training-log.json").read_text(encoding="utf-8"))
    for name, digest in log["files"].items():
        assert digest == "sha256:" + hashlib.sha256((CHECKPOINT / name).read_bytes()).hexdigest(), name
    total = sum(p.stat().st_size for p in CHECKPOINT.iterdir())
    assert total <= 10 * 1024 * 1024
    assert log["seed"] == SEED
    assert log["eval_set_baseline"]["math"]["accuracy"] >= 0.7
    config = json.loads((CHECKPOINT / "config.json").read_text())
    assert config["model_type"] == "llama"
    assert config["architectures"] == ["LlamaForCausalLM"]
