"""Cases/s of the eval through `transformers serve` (the served path: the model in the engine, the job
a client) against the in-process path (screening: HF generate in the job's own process), on the same
tiny checkpoint, the same cases and the same answer length, in one run; and the client's share of
the time per case. Runs on CPU here and on a GPU (--device cuda) through the device tool.

    python bench/served_eval.py [--cases-per-category 5] [--max-new-tokens 16] [--device cpu]

Prints one JSON object; ratios are served / in-process (above 1: the served path is faster).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from planner.evaljob.engines import transformers_launch  # noqa: E402
from planner.evaljob.tiny import save_tiny_checkpoint  # noqa: E402
from planner.manifest import manifest_lines, weights_digest  # noqa: E402  (stdlib only)


def job(kind: str, spec: dict[str, Any], out: Path) -> tuple[dict[str, Any], float]:
    out.mkdir(parents=True, exist_ok=True)
    (out / "spec.json").write_text(json.dumps(spec))
    module = "planner.evaljob.served" if kind == "served" else "planner.evaljob"
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", module, "run", "--spec", "spec.json", "--out", "."],
        cwd=out,
        # ROOT first, the caller's path kept: a GPU node's carried packages (fastapi, openai…) live there.
        env={**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))},
        capture_output=True,
        text=True,
        check=False,
    )
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{kind} job failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return json.loads((out / "result.json").read_text()), wall


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cases-per-category", type=int, default=5)
    parser.add_argument("--max-new-tokens", type=int, default=16)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="served-bench-"))
    base = save_tiny_checkpoint(work / "models" / "base")
    candidate = work / "models" / "candidate"
    shutil.copytree(base, candidate)
    (candidate / "NOTICE").write_text("same tensors, another artifact\n")
    cases = 4 * args.cases_per_category

    served_spec = {
        "scheme": "w4a8",
        "artifacts": {
            role: {"path": str(path), "digest": weights_digest(path), "manifest": "".join(manifest_lines(path))}
            for role, path in (("baseline", base), ("candidate", candidate))
        },
        "engine": {
            **transformers_launch(device=args.device, dtype=args.dtype).as_spec(health_timeout_s=600),
        },
        "serving": {"precision": "w4a8", "tp": 1, "pp": 1, "ep": 1, "dp": 1},
        "generation": {"seed": 0, "max_new_tokens": args.max_new_tokens},
        "max_cases_per_category": args.cases_per_category,
        "concurrency": args.concurrency,
        "threshold": 0.5,
        "cache_dir": "../cache",
        "baseline_cache_dir": str(work / "baseline-answers"),
    }
    served, served_wall = job("served", served_spec, work / "served" / "attempt-1")
    timing = served["timing"]
    answer_s = timing["runs"]["baseline"]["wall_s"] + timing["runs"]["candidate"]["wall_s"]
    start_s = timing["runs"]["baseline"]["healthy_after_s"] + timing["runs"]["candidate"]["healthy_after_s"]

    in_process_spec = {
        "model": {"path": str(base), "dtype": "bfloat16" if args.device.startswith("cuda") else args.dtype},
        "scheme": "w4a8",
        "max_cases_per_category": args.cases_per_category,
        "max_new_tokens": args.max_new_tokens,
        "device": args.device,
        "threshold": 0.5,
    }
    in_process, in_process_wall = job("in-process", in_process_spec, work / "in-process")
    generate_s = len_cases_s = 0.0
    rate_base = in_process["timing"]["baseline_cases_per_s"]
    rate_quant = in_process["timing"]["quantized_cases_per_s"]
    generate_s = cases / rate_base + cases / rate_quant
    len_cases_s = generate_s / (2 * cases)

    served_case_s = answer_s / (2 * cases)
    client_cpu = timing["client_cpu_s_per_case"]
    report = {
        "device": args.device,
        "cases": cases,
        "max_new_tokens": args.max_new_tokens,
        "concurrency": args.concurrency,
        "engine": served["engine"]["version"],
        "served": {
            "answer_s_per_case": round(served_case_s, 4),
            "cases_per_s_answering": round(1 / served_case_s, 2),
            "engine_start_s_total": round(start_s, 1),
            "job_wall_s": round(served_wall, 1),
            "client_cpu_s_per_case": client_cpu,
            "client_share_of_case_time": round(client_cpu / served_case_s, 3) if client_cpu else None,
            "client_peak_rss_mib": served["client"]["peak_rss_mib"],
        },
        "in_process": {
            "generate_s_per_case": round(len_cases_s, 4),
            "cases_per_s_generating": round(1 / len_cases_s, 2),
            "job_wall_s": round(in_process_wall, 1),
            "load_and_quantize_s": in_process["timing"]["quantize_s"],
        },
        "ratio_served_over_in_process": {
            "cases_per_s_answering": round(len_cases_s / served_case_s, 2),
            "whole_job_wall": round(in_process_wall / served_wall, 2),
        },
    }
    print(json.dumps(report, indent=2))
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / f"served_eval_{args.device.split(':')[0]}.json").write_text(json.dumps(report, indent=2))
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
