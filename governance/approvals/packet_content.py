"""What the approval packet says, in words a legal reader signs under: facts as labelled values
(money with its currency, counts with separators, yes/no, "not stated"), the whole serving envelope
the gate checks, and the summary page. Pure functions of the evidence document; the template
(templates/approvals/packet.html) only lays them out."""

from __future__ import annotations

from collections import Counter
from typing import Any

from governance.deployments.envelope import approved_envelope

NOT_STATED = "not stated"
# The threshold an eval run gets unless someone chose a looser or stricter one (EvalRun's default).
DEFAULT_EVAL_THRESHOLD = 0.05

# Each fact as the request wizard asks it, in the wizard's order.
FACT_LABELS: tuple[tuple[str, str], ...] = (
    ("use_case", "Use case"),
    ("commercial_entity", "Commercial entity"),
    ("hosted_service", "Served to third parties (API, SaaS, app)"),
    ("production", "Production use"),
    ("monthly_active_users", "Monthly active users"),
    ("monthly_active_users_at_model_release", "Monthly active users on the model's release date"),
    ("monthly_revenue", "Monthly revenue"),
    ("org_country", "Principal place of business"),
    ("multimodal", "Multimodal model"),
    ("outputs_used_to_train_other_models", "Outputs used to train other models"),
    ("derivative", "Derivative"),
    ("redistributes_original_weights", "Original weights redistributed"),
    ("intended_uses", "Intended uses on an acceptable-use list"),
    ("guardrails_removed", "Safety guardrails removed"),
)
USE_CASES = {
    "external_commercial": "External commercial",
    "internal": "Internal use only",
    "evaluation": "Evaluation",
    "research": "Research",
}
DISTRIBUTIONS = {
    "none": "not distributed",
    "internal": "distributed inside the company",
    "public": "distributed publicly",
}
DECISIONS = {
    "allowed": "allowed",
    "allowed_with_obligations": "allowed with obligations",
    "licensor_approval_required": "licensor approval required",
    "prohibited": "prohibited",
}
ENVELOPE_LABELS = {
    "engine": "Serving engine",
    "precision": "Precision",
    "gpu": "GPU",
    "kv_dtype": "KV cache type",
    "tp": "Tensor parallel (tp)",
    "pp": "Pipeline parallel (pp)",
    "ep": "Expert parallel (ep)",
    "max_model_len": "Context length (tokens)",
    "gpu_memory_utilization": "GPU memory utilisation",
}


def format_count(value: Any) -> str:
    if value is None:
        return NOT_STATED
    return f"{int(value):,}"


def format_money(value: Any) -> str:
    """`{"amount": 25000000.0, "currency": "USD"}` as `USD 25,000,000.00`."""
    if not isinstance(value, dict) or value.get("amount") is None:
        return NOT_STATED
    return f"{value.get('currency') or '?'} {float(value['amount']):,.2f}"


def format_value(value: Any) -> str:
    """Any other evidence value in words: never a Python repr."""
    if value is None or value == "":
        return NOT_STATED
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int | float):
        return f"{value:,}"
    if isinstance(value, list | tuple):
        return ", ".join(format_value(item) for item in value) if value else "none"
    if isinstance(value, dict):
        return "; ".join(f"{key.replace('_', ' ')}: {format_value(item)}" for key, item in value.items())
    return str(value)


def _derivative(value: Any) -> str:
    if not isinstance(value, dict):
        return NOT_STATED
    kind = str(value.get("kind") or "none")
    if kind == "none":
        return "none: the weights as published"
    parts = [kind.replace("_", "-"), DISTRIBUTIONS.get(str(value.get("distribution") or "none"), NOT_STATED)]
    if value.get("name"):
        parts.append(f"named {value['name']}")
    return ", ".join(parts)


def fact_rows(facts: dict[str, Any]) -> list[tuple[str, str]]:
    """(label, value) for every fact; those left out read "not stated" (the engine assumed the
    most conservative value, and the findings say so)."""
    rows = []
    for key, label in FACT_LABELS:
        value = facts.get(key)
        if key == "use_case":
            shown = USE_CASES.get(str(value), format_value(value))
        elif key in ("monthly_active_users", "monthly_active_users_at_model_release"):
            shown = format_count(value)
        elif key == "monthly_revenue":
            shown = format_money(value)
        elif key == "derivative":
            shown = _derivative(value)
        elif key == "intended_uses":
            shown = ", ".join(str(use).replace("_", " ") for use in value) if value else "none"
            if value is None:
                shown = NOT_STATED
        else:
            shown = format_value(value)
        rows.append((label, shown))
    return rows


def envelope_rows(evidence: dict[str, Any]) -> list[tuple[str, str]]:
    """Every field the gate compares a rollout with, tp/pp/ep included."""
    envelope = approved_envelope(evidence)
    return [(ENVELOPE_LABELS[name], format_value(value)) for name, value in envelope.items()]


def _obligations(obligations: list[dict[str, Any]]) -> str:
    if not obligations:
        return "none"
    counts = Counter(str(item.get("status", "open")) for item in obligations)
    noun = "obligation" if len(obligations) == 1 else "obligations"
    return f"{len(obligations)} {noun}: " + ", ".join(f"{n} {status}" for status, n in sorted(counts.items()))


def summary(evidence: dict[str, Any], organisation: str) -> dict[str, Any]:
    """The first page: request, model, license decision, obligations, plan, eval, who signs what."""
    plan = (evidence.get("capacity_plan") or {}).get("result") or {}
    evals = evidence.get("eval_results") or []
    return {
        "organisation": organisation,
        "envelope": approved_envelope(evidence),
        "license_decisions": [
            (f"{item.get('license')} ({item.get('version')})", DECISIONS.get(str(item.get("decision")), "unknown"))
            for item in evidence.get("licenses") or []
        ],
        "obligations": _obligations(evidence.get("obligations") or []),
        "waivers": len(evidence.get("waivers") or []),
        "plan_fits": format_value(plan.get("fits")) if plan else NOT_STATED,
        "plan_gpus": format_count((plan.get("parallel") or {}).get("gpus")) if plan else NOT_STATED,
        "evals": [(str(item.get("scheme")), str(item.get("status"))) for item in evals],
        "loose_thresholds": [
            (str(item.get("scheme")), float(item["threshold"]))
            for item in evals
            if item.get("threshold") is not None and float(item["threshold"]) > DEFAULT_EVAL_THRESHOLD
        ],
    }
