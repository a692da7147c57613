"""Recipes as data, the refusal that names the scheme, and the node's manifest digest (the service's
artifact digest: one implementation)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from governance.artifacts import manifest as artifact_manifest
from governance.artifacts.manifest import weights_digest
from planner import manifest as quantjob_manifest
from planner.evaljob import manifest as evaljob_manifest
from planner.evaljob.families import eval_exclusions
from planner.manifest import manifest_digest
from planner.quantjob import recipes
from planner.quantjob.calibration import DEFAULT_CALIBRATION, load


def test_every_recipe_is_valid_data_for_a_scheme_the_planner_knows() -> None:
    for name in recipes.RECIPES:
        data = recipes.validate(recipes.recipe(name))
        # w2a16: the careless-vs-good pair of the docs' table; planned as BF16 (see the next test).
        assert data["scheme"] in {"w4a16", "w8a8", "fp8", "w4a8", "w2a16"}
        assert all("lm_head" in m.get("ignore", ["lm_head"]) for m in data["modifiers"])


def test_config_groups_are_data_with_known_keys_only() -> None:
    for name in ("w4a16-tensor-rtn", "w4a16-channel-rtn"):
        recipes.validate(recipes.recipe(name))
    bad = recipes.recipe("w4a16-channel-rtn")
    bad["modifiers"][0]["config_groups"]["group_0"]["weights"]["observer"] = "os.system"
    with pytest.raises(ValueError, match=r"recipe.modifiers\[0\].config_groups.group_0.weights"):
        recipes.validate(bad)
    bad = recipes.recipe("w4a16-channel-rtn")
    bad["modifiers"][0]["config_groups"]["group_0"]["weights"]["num_bits"] = 1
    with pytest.raises(ValueError, match=r"group_0.weights.num_bits: an integer from 2 to 8"):
        recipes.validate(bad)
    bad = recipes.recipe("w4a16-tensor-rtn")
    bad["modifiers"][0]["config_groups"]["group_0"]["weights"]["strategy"] = "block"
    with pytest.raises(ValueError, match=r"group_0.weights.strategy"):
        recipes.validate(bad)
    bad = recipes.recipe("w4a16-tensor-rtn")
    bad["modifiers"][0]["config_groups"]["group_0"]["format"] = "x"
    with pytest.raises(ValueError, match="unknown keys format"):
        recipes.validate(bad)
    bad = recipes.recipe("w4a16-tensor-rtn")
    bad["modifiers"][0]["config_groups"] = []
    with pytest.raises(ValueError, match="config_groups: an object"):
        recipes.validate(bad)


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


def test_the_service_digests_artifacts_with_the_planners_one_implementation(tmp_path: Path) -> None:
    # One implementation, not two kept equal by a test: the service re-exports the node's code.
    assert weights_digest is manifest_digest
    assert artifact_manifest.manifest_lines is quantjob_manifest.manifest_lines
    assert artifact_manifest.file_sha256 is quantjob_manifest.file_sha256 is evaljob_manifest.file_sha256
    # The format itself, pinned by a digest worked out by hand from its definition.
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "a.bin").write_bytes(b"x" * 10)
    (tmp_path / "b.json").write_text("{}")
    lines = f"{hashlib.sha256(b'{}').hexdigest()} 2 b.json\n{hashlib.sha256(b'x' * 10).hexdigest()} 10 sub/a.bin\n"
    assert "".join(quantjob_manifest.manifest(tmp_path)) == lines
    # OpenSSF model-signing: SHA-256 over the files' raw SHA-256 digests, in path order
    by_hand = hashlib.sha256(hashlib.sha256(b"{}").digest() + hashlib.sha256(b"x" * 10).digest()).hexdigest()
    assert manifest_digest(tmp_path) == "sha256:" + by_hand
    evaljob_manifest.verify_artifact(tmp_path, manifest_digest(tmp_path), lines)  # the served job agrees
    (tmp_path / "b.json").write_text("{ }")  # a changed file changes the digest
    assert manifest_digest(tmp_path) != "sha256:" + by_hand
    (tmp_path / "sub" / "empty").mkdir()
    with pytest.raises(ValueError, match="no files"):
        manifest_digest(tmp_path / "sub" / "empty")
    (tmp_path / "link").symlink_to(tmp_path / "b.json")
    with pytest.raises(ValueError, match="symbolic links"):
        manifest_digest(tmp_path)


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
