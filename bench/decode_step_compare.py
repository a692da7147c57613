"""The planner's decode step for Qwen3-30B-A3B on one H200 (default factors, and the committed H200
calibration profile) next to the direct measurement of bench/decode_step_gpu.py, as ratios.

    .venv/bin/python bench/decode_step_compare.py [--measured bench/decode_step_h200.json]
ratio = planner decode tokens/s / measured decode tokens/s (> 1: the planner is optimistic).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from planner import specs
from planner.calibrate.profile import load
from planner.efficiency import Rates
from planner.memory import Layout
from planner.params import count_params
from planner.perf import step_s

ROOT = Path(__file__).resolve().parent.parent
PROFILE = ROOT / "planner" / "catalog" / "calibration" / "h200-2026-11-29-torch2.11-cu130.json"


def planned_step_s(precision: str, batch: int, context: int, profile: object) -> float:
    model = specs.model("qwen3-30b-a3b")
    scheme = specs.precision(precision)
    rates = Rates(specs.gpu("h200"), scheme, profile)  # type: ignore[arg-type]
    seconds, _parts = step_s(
        model=model,
        params=count_params(model),
        precision=scheme,
        layout=Layout(1, 1, 1, 1),
        rates=rates,
        keep=frozenset(),
        kv_dtype="bf16",
        decode_tokens=batch,
        decode_context=context,
    )
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--measured", default=str(ROOT / "bench" / "decode_step_h200.json"))
    args = parser.parse_args()
    measured = json.loads(Path(args.measured).read_text())
    profile = load(PROFILE)
    print(f"measured on {measured['gpu']} (torch {measured['torch']}); profile {PROFILE.name}")
    print("precision batch | measured tok/s | planner default tok/s (ratio) | planner + profile tok/s (ratio)")
    for row in measured["results"]:
        batch, context = row["batch"], row["context"]
        real = row["decode_tokens_per_s"]
        default = batch / planned_step_s(row["precision"], batch, context, None)
        calibrated = batch / planned_step_s(row["precision"], batch, context, profile)
        print(
            f"{row['precision']:5} {batch:5} | {real:10.1f} | {default:10.1f} ({default / real:.2f}) "
            f"| {calibrated:10.1f} ({calibrated / real:.2f})"
        )


if __name__ == "__main__":
    main()
