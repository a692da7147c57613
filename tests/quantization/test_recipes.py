"""Recipes as data, the refusal that names the scheme, and the node's manifest digest (the same as
the service's artifact digest)."""

from __future__ import annotations

from pathlib import Path

import pytest

from governance.artifacts.manifest import weights_digest
from planner.quantjob import recipes
from planner.quantjob.calibration import DEFAULT_CALIBRATION, load
from planner.quantjob.manifest import manifest_digest
from planner.tinylm.data import eval_exclusions

CHECKPOINT = Path(__file__).resolve().parents[2] / "planner" / "tinylm" / "checkpoint"


def test_every_recipe_is_valid_data_for_a_scheme_the_planner_knows() -> None:
    for name in recipes.RECIPES:
        data = recipes.validate(recipes.recipe(name))
        assert data["scheme"] in {"w4a16", "w8a8", "fp8", "w4a8"}
        assert all("lm_head" in m.get("ignore", ["lm_head"]) for m in data["modifiers"])


def test_unknown_recipe_and_bad_modifiers_are_refused_naming_the_field() -> None:
    with pytest.raises(ValueError, match="recipe: unknown 'w3a3'"):
        recipes.recipe("w3a3")
    bad = recipes.recipe("w4a16-rtn")
    bad["modifiers"][0]["type"] = "os.system"
    with pytest.raises(ValueError, match=r"recipe.modifiers\[0\].type"):
        recipes.validate(bad)
    extra = recipes.recipe("w4a16-rtn")
    extra["modifiers"][0]["exec"] = "x"
    with pytest.raises(ValueError, match="unknown arguments exec"):
        recipes.validate(extra)


def test_a_recipe_the_tool_cannot_apply_is_refused_naming_the_scheme() -> None:
    reason = recipes.refusal(recipes.recipe("w4a8-gptq"), {"W4A16", "W8A8", "FP8_DYNAMIC"})
    assert reason is not None
    assert reason.startswith("scheme w4a8:")
    assert "W4A8" in reason
    assert recipes.refusal(recipes.recipe("w4a16-gptq"), {"W4A16"}) is None


def test_node_manifest_digest_is_the_services_artifact_digest(tmp_path: Path) -> None:
    assert manifest_digest(CHECKPOINT) == weights_digest(CHECKPOINT)
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "a.bin").write_bytes(b"x" * 10)
    (tmp_path / "b.json").write_text("{}")
    assert manifest_digest(tmp_path) == weights_digest(tmp_path)
    (tmp_path / "b.json").write_text("{ }")  # a changed file changes the digest
    assert manifest_digest(tmp_path) == weights_digest(tmp_path)
    with pytest.raises(ValueError, match="no files"):
        manifest_digest(tmp_path / "sub" / "empty") if (tmp_path / "sub" / "empty").mkdir() is None else None


def test_calibration_set_is_never_an_eval_case_and_its_digest_is_recorded() -> None:
    texts, sha256 = load(DEFAULT_CALIBRATION, 1000)
    assert len(texts) == 256
    assert len(sha256) == 64
    _, prompts = eval_exclusions()
    assert not any(text.startswith(prompt) for text in texts for prompt in prompts)


def test_calibration_file_errors_name_the_line(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    path.write_text('{"text": "ok"}\n{"txt": 1}\n')
    with pytest.raises(ValueError, match="line 2"):
        load(path, 10)
