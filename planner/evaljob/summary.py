"""Per-category and overall verdicts of an eval: failures, the gate bound, token metrics when measured.
Standard library only (the served job imports it without torch)."""

from __future__ import annotations

from typing import Any

from planner.evaljob.metrics import summarize_kl
from planner.evaljob.stats import gate


def summarize(records: list[dict[str, Any]], threshold: float) -> dict[str, Any]:
    categories: dict[str, list[dict[str, Any]]] = {}
    for record in records:
        categories.setdefault(record["category"], []).append(record)

    def block(items: list[dict[str, Any]]) -> dict[str, Any]:
        failures = [r for r in items if r["failed"]]
        # Token metrics only from cases where they were measured (an engine that returns no logprobs
        # measures none): absent, never estimated from the text.
        measured = [r["tokens"] for r in items if r.get("tokens")]
        kl = [v for tokens in measured for v in tokens["kl"]]
        positions = sum(tokens["positions"] for tokens in measured)
        with_reference = [r for r in items if "baseline_correct" in r]
        summary: dict[str, Any] = {
            **gate(len(failures), len(items), threshold),
            "failing_cases": [
                {"id": r["id"], "lost_items": r["lost_items"], "contradictions": r["contradictions"]} for r in failures
            ],
            "top1_agreement": sum(tokens["agree"] for tokens in measured) / positions if positions else None,
            "kl": summarize_kl(kl) if kl else None,
        }
        if with_reference:
            base = sum(r["baseline_correct"] for r in with_reference)
            quant = sum(r["quantized_correct"] for r in with_reference)
            summary.update(
                baseline_accuracy=base / len(with_reference),
                quantized_accuracy=quant / len(with_reference),
                recovery=(quant / base) if base else None,
                flips={
                    "correct_to_wrong": sum(
                        r["baseline_correct"] and not r["quantized_correct"] for r in with_reference
                    ),
                    "wrong_to_correct": sum(
                        not r["baseline_correct"] and r["quantized_correct"] for r in with_reference
                    ),
                },
            )
        return summary

    per_category = {name: block(items) for name, items in sorted(categories.items())}
    overall = block(records)
    return {
        "categories": per_category,
        "overall": overall,
        "pass": overall["pass"] and all(c["pass"] for c in per_category.values()),
    }
