"""Planner against the published-benchmark corpus: the error table (markdown) and its summary.

.venv/bin/python bench/corpus.py [--calibration planner/catalog/calibration/FILE.json] [--update-docs] [--in-sample-only]
    [--write-record]

Beside the in-sample figures (every case scored with the factors set against all of them) it prints
the leave-one-source-out ones: each source's cases scored with the efficiency factors fitted without
that source (planner.corpus.leave_one_source_out: a factor only that source backs falls back, one
other sources back too is refitted on them), and which factors only one source backs.

--update-docs rewrites the table (and, in docs/planner.md, the causes and the summary) in README.md
and docs/planner.md with this output (tests/planner/test_benchmark_corpus.py checks they match).
--write-record rewrites bench/corpus_errors.json, the in-sample and leave-one-source-out errors per figure that
tests/planner/test_corpus_record.py holds the planner to (planner.corpus.RECORD_TOLERANCE): only when a change
improves them, or worsens them for a stated reason (the commit says which).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from planner import corpus

RECORD = Path(__file__).resolve().parent / "corpus_errors.json"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calibration")
    parser.add_argument("--update-docs", action="store_true")
    parser.add_argument("--in-sample-only", action="store_true", help="skip the leave-one-source-out refits")
    parser.add_argument("--write-record", action="store_true", help="rewrite bench/corpus_errors.json")
    args = parser.parse_args()
    profile = None
    if args.calibration:
        from planner.calibrate.profile import load

        profile = load(args.calibration)
    results = [corpus.run_case(case, profile) for case in corpus.cases()]
    table, summary = corpus.markdown(results), _summary(results)
    held = corpus.leave_one_source_out() if not args.in_sample_only and profile is None else None
    if held is not None:
        summary += _held_out_summary(held)
    if args.write_record:
        if held is None:
            parser.error(
                "--write-record needs the leave-one-source-out figures (no --in-sample-only, no --calibration)"
            )
        record = {"generated_by": "bench/corpus.py --write-record", **corpus.error_record(results, held)}
        RECORD.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    print(table)
    print()
    print("\n".join(summary))
    if args.update_docs:
        _update_docs(table.splitlines(), summary)


def _summary(results: list[corpus.CaseResult]) -> list[str]:
    lines = []
    for label, table in (
        ("all cases", corpus.summary(results)),
        ("without the † figures", corpus.summary(results, with_outside=False)),
    ):
        for metric, figures in table.items():
            lines.append(
                f"{label}: {metric}: n={figures['n']:.0f} median |err| {figures['median']:.1%} "
                f"max |err| {figures['max']:.1%}"
            )
    refused = [r.case["id"] for r in results if r.refused]
    lines.append(f"refused: {len(refused)} {refused}")
    return lines


def _held_out_summary(held: list[corpus.HeldOut]) -> list[str]:
    results = [result for one in held for result in one.results]
    lines = [
        f"leave one source out{label}: {metric}: n={figures['n']:.0f} median |err| {figures['median']:.1%} "
        f"max |err| {figures['max']:.1%}"
        for label, with_outside in (("", True), (", without the † figures", False))
        for metric, figures in corpus.summary(results, with_outside=with_outside).items()
    ]
    for one in held:
        figures = corpus.summary(list(one.results))
        errors = ", ".join(f"{m} {f['median']:.1%}/{f['max']:.1%}" for m, f in figures.items())
        backed = "; only it backs: " + ", ".join(one.fallen_back) if one.fallen_back else ""
        lines.append(f"  without {one.source} ({len(one.results)} cases): median/max {errors}{backed}")
    return lines


def _update_docs(output: list[str], summary: list[str]) -> None:
    """Replace, in each document, the block from the table's header row to the fence closing the
    summary that follows it."""
    root = Path(__file__).resolve().parent.parent
    table = [line for line in output if line.startswith("|")]
    causes = [line for line in output if not line.startswith("|")]
    for name, with_causes in (("README.md", False), ("docs/planner.md", True)):
        lines = (root / name).read_text(encoding="utf-8").split("\n")
        start = next(i for i, line in enumerate(lines) if line.startswith("| case |"))
        opening = lines.index("```", start)
        closing = lines.index("```", opening + 1)
        block = table + ([*causes, ""] if with_causes else [""]) + ["```", *summary, "```"]
        (root / name).write_text("\n".join(lines[:start] + block + lines[closing + 1 :]), encoding="utf-8")


if __name__ == "__main__":
    main()
