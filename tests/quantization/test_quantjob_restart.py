"""The quantize payload's restart rules, run for real in this interpreter: a requeued job whose
checkpoint is complete only re-hashes it; a killed attempt's staging directory is removed and never
becomes a checkpoint; a checkpoint whose files changed after registration fails the digest check."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from planner.manifest import manifest, manifest_digest
from planner.quantjob import recipes
from planner.quantjob.run import run

CHECKPOINT = Path(__file__).resolve().parents[2] / "planner" / "tinylm" / "checkpoint"


def spec(target: Path, **change: object) -> dict[str, object]:
    return {
        "model_path": str(CHECKPOINT),
        "parent_digest": manifest_digest(CHECKPOINT),
        "recipe": recipes.recipe("w4a16-gptq"),
        "output_dir": str(target),
        "output_name": "Llama-tiny-w4a16",
        "model_roots": [str(CHECKPOINT.parent), str(target.parent)],
        **change,
    }


def test_a_requeued_job_with_a_complete_checkpoint_resumes_with_the_same_digest(tmp_path: Path) -> None:
    target = tmp_path / "models" / "Llama-tiny-w4a16"
    shutil.copytree(CHECKPOINT, target)  # what the attempt killed after its rename left behind
    first = run(spec(target), tmp_path / "a2")
    assert first["resumed"] is True
    assert first["manifest_digest"] == manifest_digest(target)
    # The manifest it sends is the one its digest is made of (the service keeps it with the location).
    assert first["manifest"] == "".join(manifest(target))
    assert json.loads((tmp_path / "a2" / "result.json").read_text())["manifest_digest"] == first["manifest_digest"]
    assert run(spec(target), tmp_path / "a3")["manifest_digest"] == first["manifest_digest"]


def test_a_killed_attempts_staging_directory_never_becomes_the_checkpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import planner.quantjob.run as payload

    # Stop right after the clean-up (as if the tool were missing): what matters is what the restart removed.
    monkeypatch.setattr(payload, "available_presets", lambda: None)
    target = tmp_path / "models" / "Llama-tiny-w4a16"
    staging = tmp_path / "models" / ".Llama-tiny-w4a16.staging-1"
    staging.mkdir(parents=True)
    (staging / "model.safetensors").write_bytes(b"half written")
    with pytest.raises(ValueError, match="not installed"):
        run(spec(target), tmp_path / "a2")
    assert not staging.exists()
    assert not target.exists()


def test_a_checkpoint_changed_after_registration_fails_the_digest_check(tmp_path: Path) -> None:
    parent = tmp_path / "models" / "parent"
    shutil.copytree(CHECKPOINT, parent)
    registered = manifest_digest(parent)
    (parent / "tokenizer_config.json").write_text("{}")  # one file edited after registration
    with pytest.raises(ValueError, match="parent_digest"):
        run(spec(tmp_path / "models" / "out", model_path=str(parent), parent_digest=registered), tmp_path / "a1")
    assert not (tmp_path / "models" / "out").exists()


def test_a_recipe_the_installed_tool_cannot_apply_is_refused_naming_the_scheme(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import planner.quantjob.run as payload

    # The installed compressed-tensors' presets, minus W4A8: what an older release offers.
    monkeypatch.setattr(payload, "available_presets", lambda: frozenset({"W4A16", "W8A8", "FP8_DYNAMIC"}))
    with pytest.raises(ValueError, match=r"^scheme w4a8: .*W4A8"):
        run(spec(tmp_path / "m" / "x", recipe=recipes.recipe("w4a8-gptq")), tmp_path / "a1")


KILLED_DRIVER = """
import json, sys, time
from pathlib import Path
import planner.quantjob.run as payload

payload.available_presets = lambda: frozenset({"W4A16"})

def quantize(spec, data, staging):  # the tool, half-way through writing the checkpoint
    staging.mkdir(parents=True)
    (staging / "model.safetensors").write_bytes(b"half written")
    (staging.parent / "writing").write_text("")
    time.sleep(600)

payload.quantize = quantize
payload.run(json.loads(Path(sys.argv[1]).read_text()), Path(sys.argv[2]))
"""


def test_a_job_killed_mid_write_restarts_cleanly_and_then_resumes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A real SIGKILL of the payload's process while the checkpoint is being written (the tool itself
    stands in as a function here: these are the payload's restart rules; the real tool's path is
    tests/quantization/test_quantize_local_e2e.py)."""
    import os
    import signal
    import subprocess
    import sys
    import time

    import planner.quantjob.run as payload

    models = tmp_path / "models"
    target = models / "Llama-tiny-w4a16"
    (tmp_path / "spec.json").write_text(json.dumps(spec(target)))
    (tmp_path / "driver.py").write_text(KILLED_DRIVER)
    root = Path(__file__).resolve().parents[2]
    process = subprocess.Popen(
        [sys.executable, str(tmp_path / "driver.py"), str(tmp_path / "spec.json"), str(tmp_path / "a1")],
        env={**os.environ, "PYTHONPATH": str(root), "GOV_ATTEMPT": "1"},
    )
    try:
        deadline = time.monotonic() + 120
        while not (models / "writing").exists():
            assert process.poll() is None, "the payload ended before it started writing"
            assert time.monotonic() < deadline, "the payload never started writing"
            time.sleep(0.1)
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait()
    assert (models / ".Llama-tiny-w4a16.staging-1" / "model.safetensors").exists()
    assert not target.exists()  # killed mid-write: no checkpoint, so nothing to register
    assert not (tmp_path / "a1" / "result.json").exists()

    def tool(spec: dict[str, object], data: dict[str, object], staging: Path) -> dict[str, object]:
        shutil.copytree(CHECKPOINT, staging)
        (staging / "recipe.yaml").write_text("w4a16-gptq\n")
        return {"used": True}

    monkeypatch.setattr(payload, "available_presets", lambda: frozenset({"W4A16"}))
    monkeypatch.setattr(payload, "quantize", tool)
    monkeypatch.setenv("GOV_ATTEMPT", "2")
    second = run(spec(target), tmp_path / "a2")
    assert second["resumed"] is False
    assert not (models / ".Llama-tiny-w4a16.staging-1").exists()  # the killed attempt's half is gone
    assert not list(models.glob(".*staging*"))
    assert second["manifest_digest"] == manifest_digest(target)
    assert (target / "recipe.yaml").exists()
    monkeypatch.setenv("GOV_ATTEMPT", "3")
    third = run(spec(target), tmp_path / "a3")
    assert third["resumed"] is True
    assert third["manifest_digest"] == second["manifest_digest"]
