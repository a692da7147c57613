"""Derivatives of the trained tiny model, made by this repo's quantize job and committed beside it.

    python -m planner.tinylm.derivatives [--recipe w2a16-rtn] [--out DIR]     # in the quantize environment

runs the quantize job's payload (`planner.quantjob.run`, what `python -m planner.quantjob run` runs on a
cluster) on `planner/tinylm/checkpoint` for each recipe, on the CPU, and writes the checkpoint to
`DIR/<recipe>/` and what made it to `DIR/<recipe>.json` (the recipe, the parent's digest, the manifest
and its digest, the tool versions). DIR defaults to `planner/tinylm/derivatives`, the committed copies:

- `w2a16-rtn`: the careless derivative (int2 group 128, round to nearest, no calibration). On the
  whole default set it fails 67 of 400 cases (docs/quantization.md), so its served eval fails the gate.
- `w4a16-rtn`: a good one (int4 group 128, round to nearest): 0 of 400, it passes.

Both are round-to-nearest: no calibration forward, deterministic on a CPU, so a second run gives the
same manifest digest (tests/quantization/test_committed_derivatives.py checks it where the quantize
environment is installed). GPTQ is left out: it is not bit-reproducible (docs/quantization.md).
The CI needs no quantize environment: it evaluates the committed copies.
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent
CHECKPOINT = ROOT / "checkpoint"
DERIVATIVES = ROOT / "derivatives"
RECIPES = ("w2a16-rtn", "w4a16-rtn")
# Names the Llama license's naming rule accepts (a derivative's name starts with "Llama").
NAMES = {"w2a16-rtn": "Llama-tiny-w2a16-rtn", "w4a16-rtn": "Llama-tiny-w4a16-rtn"}
COMMAND = "python -m planner.tinylm.derivatives"


def record(recipe: str, root: Path = DERIVATIVES) -> dict[str, Any]:
    """What made the derivative `recipe` under `root` (its `<recipe>.json`)."""
    data: dict[str, Any] = json.loads((root / f"{recipe}.json").read_text(encoding="utf-8"))
    return data


def make(recipe: str, out: Path) -> dict[str, Any]:
    """Run the quantize job's payload for `recipe` on the committed checkpoint; the checkpoint goes to
    `out/<recipe>` (replaced), the record to `out/<recipe>.json`. Needs llm-compressor."""
    from planner.manifest import manifest_digest
    from planner.quantjob import recipes
    from planner.quantjob.run import run

    target = out / recipe
    with tempfile.TemporaryDirectory(prefix=f"derivative-{recipe}-") as work:
        spec = {
            "model_path": str(CHECKPOINT),
            "parent_digest": manifest_digest(CHECKPOINT),
            "recipe": recipes.recipe(recipe),
            "output_dir": str(Path(work) / "checkpoint"),
            "output_name": NAMES[recipe],
            "device": "cpu",
            # the job confines every path to the cluster's model roots: here, the checkout's and the work dir
            "model_roots": [str(CHECKPOINT.parent), work],
            # what the derivative's model card names (planner.quantjob.obligations)
            "base_model": "planner/tinylm/checkpoint",
            "license": "other",
        }
        result = run(spec, Path(work) / "job")
        if target.exists():
            shutil.rmtree(target)
        out.mkdir(parents=True, exist_ok=True)
        shutil.copytree(result["checkpoint"], target)
    if manifest_digest(target) != result["manifest_digest"]:
        raise ValueError(f"{target}: the copy does not hash to the job's {result['manifest_digest']}")
    made = {
        "name": NAMES[recipe],
        "recipe": result["recipe"],
        "parent": "planner/tinylm/checkpoint",
        "parent_digest": result["parent_digest"],
        "manifest_digest": result["manifest_digest"],
        "manifest": result["manifest"],
        "calibration": result["calibration"],
        "quantization_config": result["quantization_config"],
        "versions": result["versions"],
        "device": "cpu",
        "seconds": result["seconds"],
        "made_by": f"{COMMAND} --recipe {recipe}",
    }
    (out / f"{recipe}.json").write_text(json.dumps(made, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return made


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=COMMAND, description=__doc__.split("\n\n")[0])
    parser.add_argument("--recipe", action="append", choices=RECIPES, help="default: all of them")
    parser.add_argument("--out", type=Path, default=DERIVATIVES)
    args = parser.parse_args(argv)
    for recipe in args.recipe or RECIPES:
        made = make(recipe, args.out.resolve())
        print(f"{recipe}: {made['manifest_digest']} in {made['seconds']:.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
