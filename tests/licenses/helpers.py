"""Evaluate the shipped catalog files directly (no database) from a benign, fully specified fact set."""

from __future__ import annotations

import functools
from typing import Any

from governance.licenses.catalog import load_documents, load_fx_defaults
from governance.licenses.engine import Evaluation, FxTable, LicenseSpec, evaluate

BASE_FACTS: dict[str, Any] = {
    "use_case": "external_commercial",
    "commercial_entity": True,
    "hosted_service": False,
    "production": True,
    "monthly_active_users": 1000,
    "monthly_active_users_at_model_release": None,
    "monthly_revenue": {"amount": 1000, "currency": "USD"},
    "org_country": "US",
    "multimodal": False,
    "outputs_used_to_train_other_models": False,
    "derivative": {"kind": "none", "distribution": "none", "name": None},
    "redistributes_original_weights": False,
    "intended_uses": [],
    "guardrails_removed": False,
}


@functools.cache
def specs() -> dict[str, LicenseSpec]:
    return {
        doc.key: LicenseSpec(key=doc.key, name=doc.name, version=doc.version, text_sha256="0" * 64, terms=doc.terms)
        for doc in load_documents()
    }


@functools.cache
def fx() -> FxTable:
    as_of, _source, rates = load_fx_defaults()
    return FxTable(usd_per_unit=rates, as_of=dict.fromkeys(rates, as_of))


def run(key: str, **overrides: Any) -> Evaluation:
    return evaluate(specs()[key], {**BASE_FACTS, **overrides}, fx())


def codes(evaluation: Evaluation) -> set[tuple[str, str]]:
    return {(f.code, f.severity) for f in evaluation.findings}


def finding(evaluation: Evaluation, code: str) -> dict[str, Any]:
    matches = [f for f in evaluation.findings if f.code == code]
    assert len(matches) == 1, [f.code for f in evaluation.findings]
    return matches[0].as_dict()


def public(kind: str = "fine_tune", name: str | None = None) -> dict[str, Any]:
    return {"kind": kind, "distribution": "public", "name": name}
