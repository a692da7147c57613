"""The plan's 80% intervals (planner/intervals.py): regenerate their residuals and print their held-out coverage.

.venv/bin/python bench/intervals.py [--write]

Collects each figure's leave-one-source-out residuals: TPOT, TTFT and tokens/s from the published-benchmark
corpus (planner.corpus.leave_one_source_out: each source's runs planned with the efficiency factors fitted
without it), weights, KV pool and KV tokens per GPU from the startup-log corpus
(planner.validation.leave_one_source_out: the reserves read off a source's own logs replaced). Then prints,
per figure, the held-out coverage of the intervals: the fraction of runs whose measured figure falls inside
the interval computed from the other sources' residuals (their class's, or the pooled fallback, as a plan
would take it), and the median interval width. --write stores the residuals and their spreads per class in
planner/catalog/intervals.json; without it, says whether the committed file is current.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from planner import corpus, intervals
from planner import validation as startup_logs
from planner.intervals import Residual, case_class
from planner.specs import gpu

THROUGHPUT = {
    "tpot_ms": "throughput.tpot_ms",
    "ttft_ms": "throughput.ttft_ms",
    "output_tokens_per_s": "throughput.decode_tokens_per_s",
}


def throughput_residuals(held_out: Sequence[corpus.HeldOut] | None = None) -> dict[str, list[Residual]]:
    """From `held_out` when given (the refits already computed: the tests share one), else refitted here."""
    found: dict[str, list[Residual]] = {path: [] for path in THROUGHPUT.values()}
    for held in corpus.leave_one_source_out() if held_out is None else held_out:
        for result in held.results:
            if result.refused:
                continue
            case = result.case
            layout = case["layout"]
            name = case_class(case["engine"], corpus._is_moe(case), gpu(case["gpu"]), layout["tp"] * layout["pp"])
            for metric, measured in case["measured"].items():
                ratio = float(measured) / result.planned[metric]
                found[THROUGHPUT[metric]].append(Residual(held.source, case["id"], name, ratio))
    return found


def memory_residuals() -> dict[str, list[Residual]]:
    """The startup-log corpus held out, with each case's plan recorded for its capacity and bytes per token
    (neither moves with the reserves the held-out runs replace)."""
    plans: dict[str, Any] = {}
    current: dict[str, Any] = {}
    run_case, plan = startup_logs.run_case, startup_logs.plan

    def recording_run_case(case: dict[str, Any]) -> Any:
        current["case"] = case
        return run_case(case)

    def recording_plan(request: Any) -> Any:
        result = plan(request)
        plans[current["case"]["id"]] = result
        return result

    startup_logs.run_case, startup_logs.plan = recording_run_case, recording_plan
    try:
        held_out = startup_logs.leave_one_source_out()
    finally:
        startup_logs.run_case, startup_logs.plan = run_case, plan
    found: dict[str, list[Residual]] = {
        "memory_per_gpu.weights": [],
        "memory_per_gpu.kv_cache": [],
        "kv_cache.capacity_tokens": [],
    }
    for held in held_out:
        for result in held.results:
            planned = plans[result.case_id]
            memory, layout = planned.chosen.memory, planned.chosen.layout
            name = case_class(planned.engine.name, planned.model.is_moe, planned.gpu, layout.tp * layout.pp)
            capacity = memory.capacity_bytes
            for check in result.checks:
                if check.name == "model_loading" and check.planned > 0:
                    value = check.logged / check.planned
                    path = "memory_per_gpu.weights"
                elif check.name == "available_kv_cache_memory":
                    value = (check.logged - check.planned) / capacity
                    path = "memory_per_gpu.kv_cache"
                elif check.name == "gpu_kv_cache_tokens":
                    value = (check.logged - check.planned) * memory.kv_bytes_per_token_per_gpu / capacity
                    path = "kv_cache.capacity_tokens"
                else:
                    continue
                found[path].append(Residual(held.source, result.case_id, name, value))
    return found


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--write", action="store_true", help="store the residuals in planner/catalog/intervals.json")
    args = parser.parse_args()
    residuals = {**memory_residuals(), **throughput_residuals()}
    table = intervals.build_table(residuals)
    text = json.dumps(table, indent=1, sort_keys=True) + "\n"
    print(
        f"{intervals.COVERAGE:.0%} intervals, held out (each source's runs against the interval computed "
        "without that source):"
    )
    for path, kind in intervals.FIGURES.items():
        also = residuals["memory_per_gpu.kv_cache"] if path == "kv_cache.capacity_tokens" else ()
        held = intervals.held_out_coverage(residuals[path], kind, also=also)
        sources = len({r.source for r in residuals[path]})
        width = "of the figure" if kind == "ratio" else "of the GPU's capacity"
        pooled = table["figures"][path]["classes"][intervals.POOLED]
        own = [name for name, band in table["figures"][path]["classes"].items() if not band["fallback"]]
        print(
            f"  {path}: {held.covered}/{held.runs} covered ({held.fraction:.1%}) from {sources} sources; "
            f"median width {held.median_width:.1%} {width}; pooled spread {pooled['low']:.3f}..{pooled['high']:.3f}; "
            f"classes with their own: {', '.join(own) or 'none'}"
        )
    print("  max_concurrency: derived from the KV tokens' interval (no corpus measures it)")
    if args.write:
        intervals.DATA.write_text(text, encoding="utf-8")
        print(
            f"wrote {intervals.DATA.relative_to(Path.cwd()) if intervals.DATA.is_relative_to(Path.cwd()) else intervals.DATA}"
        )
    else:
        current = intervals.DATA.exists() and intervals.DATA.read_text(encoding="utf-8") == text
        print(f"{intervals.DATA.name}: {'current' if current else 'STALE: run with --write'}")


if __name__ == "__main__":
    main()
