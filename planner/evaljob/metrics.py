"""Per-case metrics: key items the baseline kept that the quantized output lost, contradictions,
accuracy against a reference, and token-level agreement / KL on teacher-forced baseline text."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # torch only where logits are compared in process (screening); the served job has none
    import torch


def present(item: str, text: str) -> bool:
    return item in text


def case_verdict(case: dict[str, Any], baseline: str, quantized: str) -> dict[str, Any]:
    """A case fails when the quantized output drops a key item the baseline output had, or
    states a contradicting value (multi-turn)."""
    kept_by_baseline = [item for item in case.get("key_items", []) if present(item, baseline)]
    lost = [item for item in kept_by_baseline if not present(item, quantized)]
    contradictions = [v for v in case.get("contradictions", []) if present(v, quantized) and not present(v, baseline)]
    reference = case.get("reference")
    verdict: dict[str, Any] = {
        "lost_items": lost,
        "contradictions": contradictions,
        "failed": bool(lost or contradictions),
    }
    if reference is not None:
        verdict["baseline_correct"] = present(reference, baseline)
        verdict["quantized_correct"] = present(reference, quantized)
    return verdict


def token_agreement(baseline_logits: torch.Tensor, quantized_logits: torch.Tensor) -> dict[str, Any]:
    """Top-1 agreement and KL(baseline || quantized) per position of one teacher-forced sequence."""
    import torch

    with torch.no_grad():
        return _token_agreement(baseline_logits, quantized_logits)


def _token_agreement(baseline_logits: torch.Tensor, quantized_logits: torch.Tensor) -> dict[str, Any]:
    import torch

    p = torch.log_softmax(baseline_logits.float(), dim=-1)
    q = torch.log_softmax(quantized_logits.float(), dim=-1)
    kl = (p.exp() * (p - q)).sum(dim=-1)
    agree = (baseline_logits.argmax(-1) == quantized_logits.argmax(-1)).float()
    return {"positions": int(kl.numel()), "agree": float(agree.sum()), "kl": [float(v) for v in kl.flatten()]}


def summarize_kl(values: list[float]) -> dict[str, float]:
    if not values:
        return {"mean": 0.0, "p99": 0.0}
    ordered = sorted(values)
    return {
        "mean": sum(ordered) / len(ordered),
        "p99": ordered[min(len(ordered) - 1, math.ceil(0.99 * len(ordered)) - 1)],
    }
