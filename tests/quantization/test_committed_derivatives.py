"""The derivatives committed in planner/tinylm/derivatives are what the quantize job makes: their files
hash to the recorded manifest digest (always), and a fresh run of the job on the committed parent gives
the same digest (where the quantize environment is installed; round to nearest is deterministic on a
CPU). GPTQ derivatives are not committed: GPTQ is not bit-reproducible (docs/quantization.md)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from planner.manifest import manifest, manifest_digest
from planner.quantjob import recipes
from planner.tinylm import derivatives

ROOT = Path(__file__).resolve().parents[2]
QUANTIZE_PYTHON = os.environ.get("QUANTIZE_PYTHON") or str(ROOT / "var" / "quantenv" / "bin" / "python")


@pytest.mark.parametrize("recipe", derivatives.RECIPES)
def test_the_committed_derivative_is_the_recorded_one(recipe: str) -> None:
    made = derivatives.record(recipe)
    path = derivatives.DERIVATIVES / recipe
    assert "".join(manifest(path)) == made["manifest"]
    assert manifest_digest(path) == made["manifest_digest"]
    assert made["parent_digest"] == manifest_digest(derivatives.CHECKPOINT)
    assert made["recipe"] == recipes.recipe(recipe)
    assert made["calibration"] == {"used": False}
    assert {"llmcompressor", "compressed_tensors", "torch", "transformers"} <= set(made["versions"])
    assert made["made_by"] == f"python -m planner.tinylm.derivatives --recipe {recipe}"


@pytest.mark.slow
@pytest.mark.skipif(not Path(QUANTIZE_PYTHON).exists(), reason=f"no quantize environment at {QUANTIZE_PYTHON}")
def test_the_quantize_job_makes_the_committed_derivatives_again(tmp_path: Path) -> None:
    completed = subprocess.run(
        [QUANTIZE_PYTHON, "-m", "planner.tinylm.derivatives", "--out", str(tmp_path)],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "2"},
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    for recipe in derivatives.RECIPES:
        again = derivatives.record(recipe, tmp_path)
        assert again["manifest_digest"] == derivatives.record(recipe)["manifest_digest"], recipe
        assert manifest_digest(tmp_path / recipe) == again["manifest_digest"]
