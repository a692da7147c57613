"""Registering a location end to end, less the web request: what the service does in-process on the
local executor (hash every file into the manifest, the digest check) and what the inspection job
runs (`python -m planner.inspectjob DIR --out result.json --job`, a fresh interpreter, as the local
executor and a Slurm node start it), against a bare interpreter started the same way in the same
run (the floor any job pays).

    python bench/registration.py [--repeats 5]

Prints one JSON object: medians in ms for the tiny checkpoint (planner/tinylm/checkpoint) and a
4-shard 1 GiB checkpoint (sparse data regions behind real headers), and each job's ratio to the
bare interpreter.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.inspection import generate  # noqa: E402
from planner.manifest import digest_of_manifest, manifest_lines  # noqa: E402


def _median_ms(samples: list[float]) -> float:
    return round(statistics.median(samples) * 1000, 1)


def _job(argv: list[str], cwd: Path) -> float:
    started = time.perf_counter()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{argv} failed:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    return wall


def measure(directory: Path, repeats: int, work: Path) -> dict[str, float]:
    hashing, inspection, bare = [], [], []
    for _ in range(repeats):
        started = time.perf_counter()
        digest_of_manifest(manifest_lines(directory))
        hashing.append(time.perf_counter() - started)
        bare.append(_job([sys.executable, "-c", "pass"], work))
        argv = [sys.executable, "-m", "planner.inspectjob", str(directory), "--out", "result.json", "--job"]
        inspection.append(_job(argv, work))
    return {
        "service_manifest_ms": _median_ms(hashing),
        "inspection_job_ms": _median_ms(inspection),
        "bare_interpreter_ms": _median_ms(bare),
        "inspection_job_over_bare": round(statistics.median(inspection) / statistics.median(bare), 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-registration-"))
    try:
        tiny = work / "tiny"
        shutil.copytree(ROOT / "planner" / "tinylm" / "checkpoint", tiny)
        sharded = work / "sharded"
        sharded.mkdir()
        generate(sharded, total_bytes=1 << 30, shards=4, dense=False)
        figures = {
            "tiny": measure(tiny, args.repeats, work),
            "4_shards_1_GiB": measure(sharded, args.repeats, work),
        }
        print(json.dumps(figures, indent=2))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
