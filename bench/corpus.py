"""Planner against the published-benchmark corpus: the error table (markdown) and its summary.

.venv/bin/python bench/corpus.py [--calibration planner/catalog/calibration/FILE.json]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from planner import corpus


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calibration")
    args = parser.parse_args()
    profile = None
    if args.calibration:
        from planner.calibrate.profile import load

        profile = load(args.calibration)
    results = [corpus.run_case(case, profile) for case in corpus.cases()]
    print(corpus.markdown(results))
    print()
    for label, table in (
        ("all cases", corpus.summary(results)),
        ("without the † figures", corpus.summary(results, with_outside=False)),
    ):
        for metric, figures in table.items():
            print(
                f"{label}: {metric}: n={figures['n']:.0f} median |err| {figures['median']:.1%} "
                f"max |err| {figures['max']:.1%}"
            )
    refused = [r.case["id"] for r in results if r.refused]
    print(f"refused: {len(refused)} {refused}")


if __name__ == "__main__":
    main()
