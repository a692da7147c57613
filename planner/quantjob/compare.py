"""python -m planner.quantjob.compare --baseline DIR --candidate DIR [--max-cases-per-category N]

The eval job's metrics (planner.evaljob: greedy generations, key items, contradictions, accuracy
against references, top-1 agreement and KL on teacher-forced baseline text, the Clopper-Pearson
gate) applied to a real derivative checkpoint instead of a simulated quantization: baseline and
candidate are both loaded from disk (a compressed-tensors checkpoint decompresses on load).
Prints the summary as JSON."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any


def compare(
    baseline: Path, candidate: Path, limit: int | None, max_new_tokens: int, threshold: float
) -> dict[str, Any]:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from planner.evaljob.metrics import case_verdict, token_agreement
    from planner.evaljob.run import generate, load_cases, prompt_text, summarize

    device = "cuda" if torch.cuda.is_available() else "cpu"
    cases, set_sha = load_cases(None, limit)
    tokenizer = AutoTokenizer.from_pretrained(str(baseline), local_files_only=True)
    # Any: transformers' `.to` wrapper confuses mypy
    base: Any = AutoModelForCausalLM.from_pretrained(str(baseline), dtype=torch.bfloat16, local_files_only=True)
    cand: Any = AutoModelForCausalLM.from_pretrained(str(candidate), dtype=torch.bfloat16, local_files_only=True)
    base, cand = base.to(device).eval(), cand.to(device).eval()
    records = []
    with torch.no_grad():
        for case in cases:
            text = prompt_text(case)
            base_text, base_tokens = generate(base, tokenizer, text, max_new_tokens, device)
            cand_text, _ = generate(cand, tokenizer, text, max_new_tokens, device)
            ids = torch.tensor([base_tokens], device=device)
            records.append(
                {
                    "id": case["id"],
                    "category": case["category"],
                    **case_verdict(case, base_text, cand_text),
                    "tokens": token_agreement(base(ids).logits[0], cand(ids).logits[0]),
                }
            )
    result = summarize(records, threshold)
    result["eval_set_sha256"] = set_sha
    result["versions"] = {"torch": torch.__version__, "device": device}
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--baseline", required=True, type=Path)
    parser.add_argument("--candidate", required=True, type=Path)
    parser.add_argument("--max-cases-per-category", type=int, default=None)
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--threshold", type=float, default=0.05)
    args = parser.parse_args(argv)
    result = compare(args.baseline, args.candidate, args.max_cases_per_category, args.max_new_tokens, args.threshold)
    print(json.dumps(result, sort_keys=True))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
