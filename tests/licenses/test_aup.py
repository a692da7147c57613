"""Issue 13, governance rules: every license's acceptable-use policy maps each prohibited category
to the clause that prohibits it, and the prohibited uses come out as blockers (never as
allowed-with-obligations). Gemma's Prohibited Use Policy covers weapons, disinformation,
impersonation, sexually explicit content and circumventing safety filters."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from governance.licenses.catalog import load_documents
from governance.licenses.engine import TermError, TermSpec
from governance.licenses.facts import AUP_CATEGORIES
from tests.licenses.helpers import run

ROOT = Path(__file__).resolve().parents[2]

LLAMA = (
    "illegal_activity",
    "csam",
    "harassment",
    "unlicensed_professional_practice",
    "malware",
    "military",
    "weapons",
    "critical_infrastructure",
    "disinformation",
    "spam",
    "impersonation",
    "undisclosed_ai_content",
)
DEEPSEEK = (
    "illegal_activity",
    "military",
    "csam",
    "disinformation",
    "personal_data",
    "defamation",
    "harassment",
    "automated_legal_decisions",
    "discrimination",
)
# license -> (categories its policy prohibits, how each category's clause is cited)
PROHIBITED: dict[str, tuple[tuple[str, ...], str]] = {
    "gemma": (
        (
            "ip_infringement",
            "illegal_activity",
            "csam",
            "weapons",
            "violent_extremism",
            "unlicensed_professional_practice",
            "spam",
            "fraud",
            "malware",
            "safety_circumvention",
            "harassment",
            "disinformation",
            "impersonation",
            "undisclosed_ai_content",
            "sexually_explicit",
        ),
        r"^Prohibited Use Policy [1-4] \(.+\)$",
    ),
    "llama-2": (LLAMA, r"^AUP [1-4]\.[a-g](\.[iv]+)? \(.+\)$"),
    "llama-3": (LLAMA, r"^AUP [1-4]\.[a-g](\.[iv]+)? \(.+\)$"),
    "llama-3.1": (LLAMA, r"^AUP [1-4]\.[a-g](\.[iv]+)? \(.+\)$"),
    "llama-3.2": (LLAMA, r"^AUP [1-4]\.[a-g](\.[iv]+)? \(.+\)$"),
    "llama-3.3": (LLAMA, r"^AUP [1-4]\.[a-g](\.[iv]+)? \(.+\)$"),
    "llama-4": ((*LLAMA, "safety_circumvention"), r"^AUP [1-4](\.[a-g])?(\.[iv]+)? \(.+\)$"),
    "deepseek": (DEEPSEEK, r"^Attachment A \(.+\)$"),
    "bigscience-openrail-m": (
        (*DEEPSEEK, "undisclosed_ai_content", "impersonation", "medical_advice", "law_enforcement", "immigration"),
        r"^Attachment A \(.+\)$",
    ),
    "minimax-2025-01": (("military", "illegal_activity"), r"^Prohibited Uses Policy \(.+\)$"),
    "minimax-2025-02": (("military", "illegal_activity"), r"^Prohibited Uses Policy \(.+\)$"),
    "glm-4": (("military", "illegal_activity"), r"^Use restrictions \(.+\)$"),
    "yi-community-2.1": (("military", "illegal_activity"), r"^2 \(restrictions: .+\)$"),
}
CASES = [(key, category, pattern) for key, (categories, pattern) in PROHIBITED.items() for category in categories]


@pytest.mark.parametrize(("key", "category", "pattern"), CASES, ids=[f"{k}-{c}" for k, c, _ in CASES])
def test_each_prohibited_use_is_a_blocker_citing_its_clause(key: str, category: str, pattern: str) -> None:
    # A hosted service has obligations too: the prohibited use must still decide "prohibited".
    evaluation = run(key, hosted_service=True, intended_uses=[category])
    assert evaluation.decision == "prohibited", (key, category)
    [finding] = [f for f in evaluation.findings if f.code == "aup.prohibited_use"]
    assert finding.severity == "blocker"
    assert finding.params["category"] == category
    assert re.match(pattern, finding.clause), finding.clause
    assert finding.clause in finding.message


def test_gemma_weapons_disinformation_and_guardrail_removal_are_prohibited() -> None:
    """The issue's cases: these passed as allowed_with_obligations."""
    assert run("gemma", hosted_service=True).decision == "allowed_with_obligations"  # the benign baseline
    for facts in ({"intended_uses": ["weapons"]}, {"intended_uses": ["disinformation"]}, {"guardrails_removed": True}):
        evaluation = run("gemma", hosted_service=True, **facts)
        assert evaluation.decision == "prohibited", facts
    removed = run("gemma", guardrails_removed=True)
    [finding] = [f for f in removed.findings if f.code == "aup.prohibited_use"]
    assert finding.params["category"] == "safety_circumvention"
    assert "circumvent safety filters" in finding.clause
    # Several uses: one finding each, each with its own clause.
    several = run("gemma", intended_uses=["weapons", "impersonation", "sexually_explicit"])
    clauses = {f.params["category"]: f.clause for f in several.findings if f.code == "aup.prohibited_use"}
    assert set(clauses) == {"weapons", "impersonation", "sexually_explicit"}
    assert len(set(clauses.values())) == 3
    # The Gemma policy has no military clause: military use alone is not prohibited by it.
    assert run("gemma", intended_uses=["military"]).decision == "allowed"


def test_llama_4_prohibits_circumventing_safety_measures_and_llama_2_does_not_by_itself() -> None:
    assert run("llama-4", guardrails_removed=True).decision == "prohibited"
    assert not [f for f in run("llama-2", guardrails_removed=True).findings if f.code == "aup.prohibited_use"]


def test_licenses_without_an_acceptable_use_policy_prohibit_no_use() -> None:
    for key in ("apache-2.0", "mit", "kimi-k2-modified-mit", "qwen"):
        evaluation = run(key, intended_uses=list(AUP_CATEGORIES))
        assert not [f for f in evaluation.findings if f.code == "aup.prohibited_use"], key


def test_every_aup_term_cites_a_clause_per_category_from_the_vocabulary() -> None:
    for document in load_documents():
        for term in document.terms:
            if term.code != "aup.prohibited_use":
                continue
            categories = term.params["categories"]
            assert isinstance(categories, dict), f"{document.key}: cite the clause of each category"
            assert set(categories) <= set(AUP_CATEGORIES)
            assert all(clause.strip() and len(clause) <= 120 for clause in categories.values())


def test_unknown_category_or_missing_clause_is_refused() -> None:
    template = {
        "code": "aup.prohibited_use",
        "severity": "blocker",
        "clause": "x",
        "condition": "facts.aup_uses.exists(u, u in params.categories)",
        "message": "m",
    }
    for categories, problem in (({"astrology": "1"}, "unknown"), ({"weapons": " "}, "no clause"), ("weapons", "list")):
        with pytest.raises(TermError, match=problem):
            TermSpec(**template, params={"categories": categories}).validate()


def test_docs_list_the_whole_intended_use_vocabulary() -> None:
    contracts = (ROOT / "docs" / "contracts.md").read_text(encoding="utf-8")
    missing = [category for category in AUP_CATEGORIES if f"`{category}`" not in contracts]
    assert not missing
