"""The policy engine: a pure function of (license version, facts, FX rates) to a decision with findings.

No database here (only the enums of choices.py): the catalog is loaded into frozen specs first,
so an evaluation touches no database and each CEL condition is compiled once per process.
"""

from __future__ import annotations

import functools
import importlib
import json
import re
from dataclasses import dataclass, field, fields
from datetime import date
from decimal import Decimal
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import cel

from governance.licenses.choices import (
    ALLOWED_SEVERITIES,
    FACTS_ASSUMED,
    AppliesTo,
    Confidence,
    FindingCode,
    LicenseDecision,
    Severity,
)
from governance.licenses.facts import (
    AUP_CATEGORIES,
    CONSERVATIVE_DEFAULTS,
    FactsError,
    NormalizedFacts,
    derive,
    normalize_facts,
    to_usd,
)

ENGINE_VERSION = "1.0.0"

# Plain strings (not the enum members) go into findings, so evidence JSON holds only str values.
SEVERITIES: tuple[str, ...] = tuple(Severity.values)


@functools.cache
def _cel() -> Any:
    """The CEL module, on first use: `import cel` also loads its interactive CLI (prompt_toolkit,
    typer; ~0.3 s), which every management command and web worker would otherwise pay at start."""
    return importlib.import_module("cel")


class TermError(ValueError):
    """A term that cannot be used (bad code, severity, or a CEL condition that does not compile/run).
    `field` names the term field at fault, for a form or API error."""

    def __init__(self, message: str, *, field: str = "condition") -> None:
        super().__init__(message)
        self.field = field


@functools.lru_cache(maxsize=4096)
def compile_condition(expression: str) -> cel.Program:
    try:
        return _cel().compile(expression)
    except (ValueError, RuntimeError) as exc:
        raise TermError(f"condition does not compile: {exc}") from None


_PARAM_REF = re.compile(r"\bparams\.([A-Za-z_]\w*)")
_FACT_REF = re.compile(r"\bfacts\.([A-Za-z_]\w*)")


def specialize(condition: str, params: dict[str, Any]) -> str:
    """Inline each `params.NAME` as a literal. JSON literals (strings, numbers, booleans, null,
    lists, objects) are also CEL literals, so the program needs no per-call `params` variable:
    converting Python values into CEL on every call cost more than running the program."""

    def literal(match: re.Match[str]) -> str:
        name = match.group(1)
        return json.dumps(params[name]) if name in params else match.group(0)

    return _PARAM_REF.sub(literal, condition)


# What a license author writes for one term; the rest of TermSpec is derived from these.
TERM_FIELDS = (
    "code",
    "severity",
    "clause",
    "condition",
    "params",
    "message",
    "how_to_comply",
    "confidence",
    "applies_to",
    "value_from",
)


@dataclass(frozen=True, slots=True)
class TermSpec:
    code: str
    severity: str
    clause: str
    condition: str
    message: str
    how_to_comply: str = ""
    params: dict[str, Any] = field(default_factory=dict)
    confidence: str = Confidence.VERIFIED.value
    applies_to: str = AppliesTo.DEPLOYMENT.value
    value_from: str | None = None  # a derived fact reported as params["value"] (thresholds)
    program_source: str = field(init=False, repr=False, compare=False, default="")
    fact_names: frozenset[str] = field(init=False, repr=False, compare=False, default=frozenset())

    def __post_init__(self) -> None:
        object.__setattr__(self, "program_source", specialize(self.condition, self.params))
        object.__setattr__(self, "fact_names", frozenset(_FACT_REF.findall(self.condition)))

    def matches(self, facts: dict[str, Any] | cel.Context) -> bool:
        context = _cel_context(facts, self.fact_names) if isinstance(facts, dict) else facts
        return compile_condition(self.program_source).execute(context) is True

    def as_document(self) -> dict[str, Any]:
        """The fields a license author writes (what the version digest covers and a LicenseTerm row stores)."""
        return {name: getattr(self, name) for name in TERM_FIELDS}

    def validate(self) -> None:
        """Raise TermError unless the term is usable: known code/severity and a condition that runs."""
        if self.code not in ALLOWED_SEVERITIES:
            raise TermError(f"code {self.code!r} is not a license finding code", field="code")
        if self.severity not in ALLOWED_SEVERITIES[self.code]:
            raise TermError(f"severity {self.severity!r} is not allowed for {self.code}", field="severity")
        if self.confidence not in Confidence.values:
            raise TermError(f"confidence must be one of {', '.join(Confidence.values)}", field="confidence")
        if self.applies_to not in AppliesTo.values:
            raise TermError(f"applies_to must be one of {', '.join(AppliesTo.values)}", field="applies_to")
        if self.code == FindingCode.AUP_PROHIBITED_USE:
            _validate_aup_categories(self.params.get("categories"))
        unknown_params = set(_PARAM_REF.findall(self.condition)) - set(self.params)
        if unknown_params:
            raise TermError(f"condition fails on sample facts: no params {sorted(unknown_params)}", field="params")
        program = compile_condition(self.program_source)
        # Dry-run against the conservative facts and a fully known variant, so a typo in a
        # fact name fails when the term is saved, not during someone's evaluation.
        for sample in _SAMPLE_CONTEXTS:
            try:
                result = program.execute(_cel_context(sample, self.fact_names))
            except Exception as exc:  # the CEL runtime raises several types
                raise TermError(f"condition fails on sample facts: {type(exc).__name__}: {exc}") from None
            if not isinstance(result, bool):
                raise TermError(f"condition must be boolean, got {type(result).__name__}")
        try:
            self.message.format_map(_Placeholders({**self.params, "value": 0}))
        except (KeyError, ValueError, IndexError) as exc:
            raise TermError(f"message template is invalid: {exc}", field="message") from None


def _validate_aup_categories(categories: Any) -> None:
    """A list of categories (the term's clause cites them all) or a mapping category -> clause."""
    if isinstance(categories, dict):
        bad_clause = [name for name, clause in categories.items() if not isinstance(clause, str) or not clause.strip()]
        if bad_clause:
            raise TermError(f"params.categories: no clause for {sorted(bad_clause)}", field="params")
    elif not isinstance(categories, list) or not all(isinstance(name, str) for name in categories):
        raise TermError(
            "aup.prohibited_use needs params.categories (a list, or a mapping category -> clause)", field="params"
        )
    unknown = sorted(set(categories) - set(AUP_CATEGORIES))
    if unknown:
        raise TermError(f"params.categories: unknown intended-use categories {unknown}", field="params")


@dataclass(frozen=True, slots=True)
class LicenseSpec:
    key: str
    name: str
    version: str
    text_sha256: str
    terms: tuple[TermSpec, ...]


@dataclass(frozen=True, slots=True)
class FxTable:
    usd_per_unit: dict[str, Decimal]
    as_of: dict[str, date]

    @property
    def currencies(self) -> frozenset[str]:
        return frozenset(self.usd_per_unit)


@dataclass(frozen=True, slots=True)
class Finding:
    code: str
    severity: str
    clause: str
    message: str
    params: dict[str, Any]
    confidence: str = Confidence.VERIFIED.value
    applies_to: str = AppliesTo.DEPLOYMENT.value
    how_to_comply: str = ""

    def as_dict(self) -> dict[str, Any]:
        """Every field, as it goes into the evaluation record and the evidence document."""
        return {item.name: getattr(self, item.name) for item in fields(self)}


@dataclass(frozen=True, slots=True)
class Evaluation:
    decision: str
    license_key: str
    license_version: str
    text_sha256: str
    findings: tuple[Finding, ...]
    facts: dict[str, Any]
    engine_version: str = ENGINE_VERSION

    def as_contract(self) -> dict[str, Any]:
        """The response body of POST /api/v1/licenses/evaluate (docs/contracts.md)."""
        return {
            "decision": self.decision,
            "license": {"key": self.license_key, "version": self.license_version, "text_sha256": self.text_sha256},
            "findings": [finding.as_dict() for finding in self.findings],
        }


class _Placeholders(dict[str, Any]):
    def __missing__(self, key: str) -> str:
        return "{" + key + "}"


def decide(findings: tuple[Finding, ...] | list[Finding]) -> str:
    severities = {finding.severity for finding in findings}
    if Severity.BLOCKER in severities:
        return LicenseDecision.PROHIBITED.value
    if Severity.APPROVAL in severities:
        return LicenseDecision.LICENSOR_APPROVAL_REQUIRED.value
    if Severity.OBLIGATION in severities:
        return LicenseDecision.ALLOWED_WITH_OBLIGATIONS.value
    return LicenseDecision.ALLOWED.value


# A missing fact's conservative value in words, for the `facts.assumed` message (never a repr).
_ASSUMED_WORDS = {
    "monthly_active_users": "not stated: every user threshold counts as crossed",
    "monthly_active_users_at_model_release": "not stated: the current monthly active users count",
    "monthly_revenue": "not stated: every revenue threshold counts as crossed",
    "org_country": "not stated: every territorial restriction counts as applying",
    "derivative": "a fine-tune, distributed publicly",
    "intended_uses": "none",
}


def _assumed_words(name: str) -> str:
    if name in _ASSUMED_WORDS:
        return _ASSUMED_WORDS[name]
    value = CONSERVATIVE_DEFAULTS[name]
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value).replace("_", " ")


def _money(amount: float) -> str:
    return f"{amount:,.0f}" if amount == int(amount) else f"{amount:,.2f}"


def evaluate(spec: LicenseSpec, raw_facts: Any, fx: FxTable) -> Evaluation:
    """Check `raw_facts` (the contract's facts object) against one license version.

    Raises FactsError naming the bad field; never touches a database.
    """
    normalized: NormalizedFacts = normalize_facts(raw_facts, known_currencies=fx.currencies)
    facts = normalized.facts
    revenue = facts["monthly_revenue"]
    revenue_usd: float | None = None
    conversion: dict[str, Any] = {}
    if revenue is not None:
        revenue_usd = to_usd(revenue["amount"], revenue["currency"], fx.usd_per_unit)
        if revenue["currency"] != "USD":
            rate = fx.usd_per_unit[revenue["currency"]]
            conversion = {
                "amount": revenue["amount"],
                "currency": revenue["currency"],
                "fx_usd_per_unit": str(rate),
                "fx_as_of": fx.as_of[revenue["currency"]].isoformat(),
                "amount_usd": round(revenue_usd, 2),
            }
    context_facts = derive(facts, revenue_usd)
    # One CEL context per evaluation, holding only the facts this license's conditions read.
    context = _cel_context(context_facts, frozenset().union(*(term.fact_names for term in spec.terms)))
    findings: list[Finding] = []
    for term in spec.terms:
        if not term.matches(context):
            continue
        findings.extend(_findings_for(term, context_facts, conversion))
    for name in normalized.assumed:
        findings.append(
            Finding(
                code=FACTS_ASSUMED,
                severity=Severity.INFO.value,
                clause="",
                message=f"{name} was not given; assumed the most conservative value: {_assumed_words(name)}.",
                params={"field": name, "value": CONSERVATIVE_DEFAULTS[name]},
                how_to_comply=f"Provide facts.{name} for a precise evaluation.",
            )
        )
    findings.sort(key=lambda f: SEVERITIES.index(f.severity))
    return Evaluation(
        decision=decide(findings),
        license_key=spec.key,
        license_version=spec.version,
        text_sha256=spec.text_sha256,
        findings=tuple(findings),
        facts=facts,
    )


def _findings_for(term: TermSpec, facts: dict[str, Any], conversion: dict[str, Any]) -> list[Finding]:
    def finding(params: dict[str, Any], clause: str = term.clause) -> Finding:
        return Finding(
            code=term.code,
            severity=term.severity,
            clause=clause,
            message=term.message.format_map(_Placeholders(params)),
            params=params,
            confidence=term.confidence,
            applies_to=term.applies_to,
            how_to_comply=term.how_to_comply.format_map(_Placeholders(params)),
        )

    params = {k: v for k, v in term.params.items() if k != "categories"}
    if term.code == FindingCode.AUP_PROHIBITED_USE:
        # Each prohibited use is its own finding, citing its own clause when the term maps them.
        banned = term.params["categories"]
        clauses = banned if isinstance(banned, dict) else dict.fromkeys(banned, term.clause)
        return [
            finding({**params, "category": use, "clause": clauses[use]}, clauses[use])
            for use in facts["aup_uses"]
            if use in clauses
        ]
    if term.value_from is not None:
        value = facts[term.value_from]
        params["value"] = value
        if value is None:
            params["assumed"] = "unknown, treated as above the limit"
        if term.value_from == "revenue_usd" and conversion:
            params["conversion"] = conversion
        if isinstance(value, float):
            params["value"] = round(value, 2)
        params["value_display"] = "not stated" if value is None else _money(float(value))
        if term.value_from == "revenue_usd":  # the amount with its currency, or no currency at all
            params["value_display"] = "not stated" if value is None else f"of USD {params['value_display']}"
    return [finding(params)]


def _cel_context(facts: dict[str, Any], names: frozenset[str]) -> cel.Context:
    try:
        return _cel().Context(variables={"facts": {name: facts[name] for name in names}})
    except KeyError as exc:
        raise TermError(f"condition fails on sample facts: unknown fact {exc.args[0]!r}") from None


def _sample_contexts() -> list[dict[str, Any]]:
    conservative = normalize_facts({}, known_currencies={"USD"}).facts
    known = normalize_facts(
        {
            "use_case": "internal",
            "commercial_entity": False,
            "hosted_service": False,
            "production": False,
            "monthly_active_users": 10,
            "monthly_active_users_at_model_release": 5,
            "monthly_revenue": {"amount": 1.5, "currency": "USD"},
            "org_country": "US",
            "multimodal": False,
            "outputs_used_to_train_other_models": False,
            "derivative": {"kind": "fine_tune", "distribution": "public", "name": "x"},
            "redistributes_original_weights": False,
            "intended_uses": ["military"],
            "guardrails_removed": False,
        },
        known_currencies={"USD"},
    ).facts
    return [derive(conservative, None), derive(known, 1.5)]


_SAMPLE_CONTEXTS = _sample_contexts()

__all__ = ["ENGINE_VERSION", "Evaluation", "FactsError", "Finding", "FxTable", "LicenseSpec", "TermSpec", "evaluate"]
