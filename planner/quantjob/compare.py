"""python -m planner.quantjob.compare --baseline DIR --candidate DIR [--max-cases-per-category N] [--records F]

The eval job's metrics (planner.evaljob: greedy generations, key items, contradictions, accuracy
against references, top-1 agreement and KL on teacher-forced baseline text, the Clopper-Pearson
gate) applied to a real derivative checkpoint instead of a simulated quantization: baseline and
candidate are both loaded from disk (a compressed-tensors checkpoint decompresses on load).
Prints the summary as JSON. With --records, each case's record is appended to that JSON-lines file as
soon as it is measured, so a comparison stopped by a time limit keeps what it measured; run again with
the same file, it measures only the cases not in it (`--summarize-records F` summarizes such a file)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any


def interleaved(cases: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The cases round-robin by category (the set is stored category by category). The summary does not
    depend on the order; a comparison cut short by a time limit then holds every category alike."""
    queues: dict[str, list[dict[str, Any]]] = {}
    for case in cases:
        queues.setdefault(case["category"], []).append(case)
    ordered = []
    for index in range(max((len(q) for q in queues.values()), default=0)):
        ordered += [queue[index] for queue in queues.values() if index < len(queue)]
    return ordered


def compare(
    baseline: Path,
    candidate: Path,
    limit: int | None,
    max_new_tokens: int,
    threshold: float,
    records_file: Path | None = None,
) -> dict[str, Any]:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from planner.evaljob.cases import load_cases, prompt_text
    from planner.evaljob.metrics import case_verdict, token_agreement
    from planner.evaljob.run import generate, summarize

    device = "cuda" if torch.cuda.is_available() else "cpu"
    cases, set_sha = load_cases(None, limit)
    cases = interleaved(cases)
    records: list[dict[str, Any]] = []
    if records_file is not None and records_file.exists():  # a run cut short: keep its cases, measure the rest
        records = [json.loads(line) for line in records_file.read_text().splitlines() if line.strip()]
        wanted = {case["id"] for case in cases}
        records = [record for record in records if record["id"] in wanted]
        done = {record["id"] for record in records}
        cases = [case for case in cases if case["id"] not in done]
    tokenizer = AutoTokenizer.from_pretrained(str(baseline), local_files_only=True)
    # Any: transformers' `.to` wrapper confuses mypy
    base: Any = AutoModelForCausalLM.from_pretrained(str(baseline), dtype=torch.bfloat16, local_files_only=True)
    cand: Any = AutoModelForCausalLM.from_pretrained(str(candidate), dtype=torch.bfloat16, local_files_only=True)
    base, cand = base.to(device).eval(), cand.to(device).eval()
    with torch.no_grad():
        for case in cases:
            text = prompt_text(case["turns"])
            base_text, base_tokens = generate(base, tokenizer, text, max_new_tokens, device)
            cand_text, _ = generate(cand, tokenizer, text, max_new_tokens, device)
            ids = torch.tensor([base_tokens], device=device)
            record = {
                "id": case["id"],
                "category": case["category"],
                **case_verdict(case, base_text, cand_text),
                "tokens": token_agreement(base(ids).logits[0], cand(ids).logits[0]),
            }
            records.append(record)
            if records_file is not None:
                with records_file.open("a") as handle:
                    handle.write(json.dumps(record) + "\n")
    result = summarize(records, threshold)
    result["eval_set_sha256"] = set_sha
    result["versions"] = {"torch": torch.__version__, "device": device}
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--baseline", type=Path, default=None)
    parser.add_argument("--candidate", type=Path, default=None)
    parser.add_argument("--max-cases-per-category", type=int, default=None)
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--threshold", type=float, default=0.05)
    parser.add_argument("--records", type=Path, default=None, help="append each case's record here (JSON lines)")
    parser.add_argument("--summarize-records", type=Path, default=None, help="summarize such a file; no models")
    args = parser.parse_args(argv)
    if args.summarize_records is not None:
        from planner.evaljob.summary import summarize

        lines = args.summarize_records.read_text().splitlines()
        result = summarize([json.loads(line) for line in lines if line.strip()], args.threshold)
    elif args.baseline is None or args.candidate is None:
        parser.error("--baseline and --candidate are required (or --summarize-records)")
    else:
        result = compare(
            args.baseline,
            args.candidate,
            args.max_cases_per_category,
            args.max_new_tokens,
            args.threshold,
            args.records,
        )
    print(json.dumps(result, sort_keys=True))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
