"""Facts validation and conservative defaults (the evaluate contract of docs/contracts.md)."""

import pytest

from governance.licenses.engine import evaluate
from governance.licenses.facts import CONSERVATIVE_DEFAULTS, FactsError
from tests.licenses.helpers import BASE_FACTS, fx, run, specs


def test_missing_facts_are_assumed_conservatively_with_info_findings() -> None:
    evaluation = evaluate(specs()["llama-3.1"], {}, fx())
    assumed = {f.params["field"] for f in evaluation.findings if f.code == "facts.assumed"}
    assert assumed == set(CONSERVATIVE_DEFAULTS)
    assert all(f.severity == "info" for f in evaluation.findings if f.code == "facts.assumed")
    # Unknown MAU counts as above the limit; assumed public derivative without a name needs the prefix.
    assert evaluation.decision == "licensor_approval_required"
    assert {"threshold.licensor_approval", "naming.prefix", "attribution.display"} <= {
        f.code for f in evaluation.findings
    }


def test_one_missing_fact_is_named() -> None:
    facts = {k: v for k, v in BASE_FACTS.items() if k != "guardrails_removed"}
    evaluation = evaluate(specs()["nvidia-open-model"], facts, fx())
    assert [f.params["field"] for f in evaluation.findings if f.code == "facts.assumed"] == ["guardrails_removed"]
    assert evaluation.decision == "prohibited"  # assumed removed guardrails


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"surprise": 1}, "facts.surprise"),
        ({"monthly_active_users": -1}, "facts.monthly_active_users"),
        ({"monthly_active_users": "many"}, "facts.monthly_active_users"),
        ({"monthly_active_users": True}, "facts.monthly_active_users"),
        ({"hosted_service": "yes"}, "facts.hosted_service"),
        ({"use_case": "fun"}, "facts.use_case"),
        ({"monthly_revenue": {"amount": 5, "currency": "XYZ"}}, "facts.monthly_revenue.currency"),
        ({"monthly_revenue": {"amount": -5, "currency": "USD"}}, "facts.monthly_revenue.amount"),
        ({"monthly_revenue": {"amount": 5, "currency": "USD", "period": "m"}}, "facts.monthly_revenue.period"),
        ({"org_country": "XX"}, "facts.org_country"),
        ({"org_country": "USA"}, "facts.org_country"),
        ({"derivative": {"kind": "clone", "distribution": "none", "name": None}}, "facts.derivative.kind"),
        ({"derivative": {"kind": "none", "distribution": "none", "name": None, "x": 1}}, "facts.derivative.x"),
        ({"intended_uses": ["military", "gardening"]}, "facts.intended_uses[1]"),
        ({"intended_uses": "military"}, "facts.intended_uses"),
    ],
)
def test_bad_facts_name_the_field(overrides: dict, field: str) -> None:
    with pytest.raises(FactsError) as raised:
        run("mit", **overrides)
    assert field in raised.value.fields


def test_country_code_is_case_insensitive_and_eu_is_by_principal_place_of_business() -> None:
    assert run("llama-3.2", org_country="fr", multimodal=True).decision == "prohibited"
    assert run("llama-3.2", org_country=None, multimodal=True).decision == "prohibited"  # unknown counts as EU
