"""Deployment facts of the license contract: validation, conservative defaults, derived values.

Pure Python (no Django): the API, the management command, deployment requests and the
benchmark all validate facts through `normalize_facts`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import pycountry

from governance.core.names import printed_name_problem

USE_CASES = ("research", "evaluation", "internal", "external_commercial")
DERIVATIVE_KINDS = ("none", "fine_tune", "quantize", "distill", "merge")
DISTRIBUTIONS = ("none", "internal", "public")
# The intended-use vocabulary (`intended_uses`): what a product does or touches, in the words of
# the licenses' acceptable-use policies. A license maps the categories it prohibits to the clause
# that prohibits each (catalog `aup` terms); docs/contracts.md lists the same table.
AUP_CATEGORY_MEANINGS: dict[str, str] = {
    "military": "military or warfare use, espionage, nuclear applications, ITAR-controlled work",
    "weapons": "weapons, including their development (guns, explosives, chemical or biological weapons)",
    "critical_infrastructure": "operating critical infrastructure, transport technology or heavy machinery",
    "medical_advice": "giving medical advice or interpreting medical results",
    "unlicensed_professional_practice": "practising a licensed profession (legal, medical, financial, accounting) without a licence",
    "law_enforcement": "law enforcement, administration of justice, predicting crime",
    "immigration": "immigration or asylum processes",
    "surveillance": "tracking or monitoring people without their consent",
    "automated_legal_decisions": "fully automated decisions affecting people's legal rights or material well-being",
    "discrimination": "discriminating against or harming people by protected or personal characteristics",
    "personal_data": "generating or disclosing personal data without authorisation or consent",
    "disinformation": "misinformation or disinformation: false or misleading content meant to deceive or harm",
    "fraud": "fraud, scams, phishing",
    "spam": "generating or distributing spam",
    "impersonation": "impersonating a person without consent or disclosure",
    "undisclosed_ai_content": "presenting generated content as human-made, or not disclosing that it is machine-generated",
    "defamation": "defamatory or disparaging content about people",
    "csam": "child sexual abuse material, or exploiting or harming minors",
    "sexually_explicit": "sexually explicit content for pornography or sexual gratification (e.g. sexual chatbots)",
    "violent_extremism": "violent extremism or terrorism",
    "self_harm": "promoting self-harm, suicide or eating disorders",
    "illegal_activity": "any other illegal activity or content",
    "ip_infringement": "infringing intellectual-property or other rights (e.g. copyright)",
    "malware": "malicious code, malware, attacks on computer systems",
    "harassment": "harassment, bullying, hateful or abusive content",
    "safety_circumvention": "circumventing or removing the model's safety filters, guardrails or usage restrictions",
}
AUP_CATEGORIES = tuple(AUP_CATEGORY_MEANINGS)
# Member states of the European Union (ISO 3166-1 alpha-2), for the Llama 3.2+ multimodal clause.
EU_COUNTRIES = frozenset(
    [
        "AT",
        "BE",
        "BG",
        "HR",
        "CY",
        "CZ",
        "DK",
        "EE",
        "FI",
        "FR",
        "DE",
        "GR",
        "HU",
        "IE",
        "IT",
        "LV",
        "LT",
        "LU",
        "MT",
        "NL",
        "PL",
        "PT",
        "RO",
        "SK",
        "SI",
        "ES",
        "SE",
    ]
)

# The most conservative value of each fact, used when the fact is missing (with an info finding).
CONSERVATIVE_DEFAULTS: dict[str, Any] = {
    "use_case": "external_commercial",
    "commercial_entity": True,
    "hosted_service": True,
    "production": True,
    "monthly_active_users": None,  # unknown: every MAU threshold counts as crossed
    "monthly_active_users_at_model_release": None,  # unknown: the current MAU is used
    "monthly_revenue": None,  # unknown: every revenue threshold counts as crossed
    "org_country": None,  # unknown: territorial restrictions count as applying
    "multimodal": True,
    "outputs_used_to_train_other_models": True,
    "derivative": {"kind": "fine_tune", "distribution": "public", "name": None},
    "redistributes_original_weights": True,
    "intended_uses": [],
    "guardrails_removed": True,
}
BOOLEAN_FACTS = (
    "commercial_entity",
    "hosted_service",
    "production",
    "multimodal",
    "outputs_used_to_train_other_models",
    "redistributes_original_weights",
    "guardrails_removed",
)


class FactsError(ValueError):
    """Bad facts; `fields` maps a dotted field name to what is wrong with it."""

    def __init__(self, fields: dict[str, str]) -> None:
        self.fields = fields
        super().__init__("; ".join(f"{name}: {message}" for name, message in fields.items()))


@dataclass(frozen=True, slots=True)
class NormalizedFacts:
    facts: dict[str, Any]  # every field present, defaults filled in
    assumed: tuple[str, ...] = field(default=())  # fields that took a conservative default


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _non_negative_int(errors: dict[str, str], name: str, value: Any) -> int | None:
    if value is None:
        return None
    if not _is_int(value):
        errors[name] = "must be an integer or null"
        return None
    if value < 0:
        errors[name] = "must not be negative"
        return None
    return int(value)


def normalize_facts(raw: Any, *, known_currencies: frozenset[str] | set[str]) -> NormalizedFacts:
    """Validate `raw` (the JSON object of the contract) and fill in conservative defaults.

    Raises FactsError naming each bad field (prefixed `facts.`).
    """
    if not isinstance(raw, dict):
        raise FactsError({"facts": "must be a JSON object"})
    errors: dict[str, str] = {}
    for key in raw:
        if key not in CONSERVATIVE_DEFAULTS:
            errors[f"facts.{key}"] = "unknown field"
    assumed = tuple(key for key in CONSERVATIVE_DEFAULTS if key not in raw)
    merged = {**CONSERVATIVE_DEFAULTS, **{k: v for k, v in raw.items() if k in CONSERVATIVE_DEFAULTS}}
    facts: dict[str, Any] = {}

    use_case = merged["use_case"]
    if use_case not in USE_CASES:
        errors["facts.use_case"] = f"must be one of {', '.join(USE_CASES)}"
    facts["use_case"] = use_case
    for name in BOOLEAN_FACTS:
        if not isinstance(merged[name], bool):
            errors[f"facts.{name}"] = "must be true or false"
        facts[name] = merged[name]
    for name in ("monthly_active_users", "monthly_active_users_at_model_release"):
        facts[name] = _non_negative_int(errors, f"facts.{name}", merged[name])

    revenue = merged["monthly_revenue"]
    facts["monthly_revenue"] = None
    if revenue is not None:
        if not isinstance(revenue, dict):
            errors["facts.monthly_revenue"] = 'must be an object {"amount": number, "currency": "USD"} or null'
        else:
            unknown = set(revenue) - {"amount", "currency"}
            if unknown:
                errors[f"facts.monthly_revenue.{sorted(unknown)[0]}"] = "unknown field"
            amount, currency = revenue.get("amount"), revenue.get("currency")
            if isinstance(amount, bool) or not isinstance(amount, int | float):
                errors["facts.monthly_revenue.amount"] = "must be a number"
            elif amount < 0:
                errors["facts.monthly_revenue.amount"] = "must not be negative"
            if not isinstance(currency, str) or currency not in known_currencies:
                errors["facts.monthly_revenue.currency"] = (
                    f"unknown currency {currency!r}; known: {', '.join(sorted(known_currencies))}"
                )
            facts["monthly_revenue"] = {"amount": amount, "currency": currency}

    country = merged["org_country"]
    if country is not None and (
        not isinstance(country, str) or len(country) != 2 or pycountry.countries.get(alpha_2=country.upper()) is None
    ):
        errors["facts.org_country"] = "must be an ISO 3166-1 alpha-2 country code (e.g. US, DE, CN) or null"
    facts["org_country"] = country.upper() if isinstance(country, str) else None

    derivative = merged["derivative"]
    if not isinstance(derivative, dict):
        errors["facts.derivative"] = 'must be an object {"kind", "distribution", "name"}'
        derivative = dict(CONSERVATIVE_DEFAULTS["derivative"])
    else:
        for key in set(derivative) - {"kind", "distribution", "name"}:
            errors[f"facts.derivative.{key}"] = "unknown field"
        derivative = {**CONSERVATIVE_DEFAULTS["derivative"], **derivative}
        if derivative["kind"] not in DERIVATIVE_KINDS:
            errors["facts.derivative.kind"] = f"must be one of {', '.join(DERIVATIVE_KINDS)}"
        if derivative["distribution"] not in DISTRIBUTIONS:
            errors["facts.derivative.distribution"] = f"must be one of {', '.join(DISTRIBUTIONS)}"
        name = derivative["name"]
        if name is not None and (not isinstance(name, str) or not name.strip() or len(name) > 200):
            errors["facts.derivative.name"] = "must be a non-empty string of at most 200 characters, or null"
        elif name is not None and (problem := printed_name_problem(name)) is not None:
            errors["facts.derivative.name"] = problem  # the packet prints it
    facts["derivative"] = {k: derivative[k] for k in ("kind", "distribution", "name")}

    uses = merged["intended_uses"]
    if not isinstance(uses, list) or not all(isinstance(u, str) for u in uses):
        errors["facts.intended_uses"] = "must be a list of acceptable-use categories"
        uses = []
    else:
        for index, use in enumerate(uses):
            if use not in AUP_CATEGORIES:
                errors[f"facts.intended_uses[{index}]"] = f"unknown category {use!r}"
    facts["intended_uses"] = sorted(set(uses))

    if errors:
        raise FactsError(errors)
    return NormalizedFacts(facts=facts, assumed=assumed)


def to_usd(amount: float, currency: str, usd_per_unit: dict[str, Decimal]) -> float:
    return float(Decimal(str(amount)) * usd_per_unit[currency])


def derive(facts: dict[str, Any], revenue_usd: float | None) -> dict[str, Any]:
    """Values the license conditions test, computed once from the normalized facts."""
    derivative = facts["derivative"]
    derivative_public = derivative["kind"] != "none" and derivative["distribution"] == "public"
    mau = facts["monthly_active_users"]
    at_release = facts["monthly_active_users_at_model_release"]
    commercial = facts["use_case"] == "external_commercial" or (
        facts["commercial_entity"] and facts["use_case"] == "internal"
    )
    country = facts["org_country"]
    # Removing the guardrails is itself a use the policies name (circumventing safety filters).
    aup_uses = sorted(
        set(facts["intended_uses"]) | ({"safety_circumvention"} if facts["guardrails_removed"] else set())
    )
    return {
        **facts,
        "commercial": commercial,
        "derivative_public": derivative_public,
        "derivative_modified_public": derivative_public and derivative["kind"] != "none",
        "derivative_name": derivative["name"],
        "distributes": facts["hosted_service"] or facts["redistributes_original_weights"] or derivative_public,
        "trains_other_models": facts["outputs_used_to_train_other_models"] or derivative["kind"] == "distill",
        "mau": mau,
        "mau_at_release": at_release if at_release is not None else mau,
        "revenue_usd": revenue_usd,
        "eu_org": country is None or country in EU_COUNTRIES,
        "aup_uses": aup_uses,
    }
