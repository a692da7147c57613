"""Every other catalog license, written from the license facts (each license text's terms)."""

import pytest

from tests.licenses.helpers import codes, finding, public, run


# --- Gemma ---------------------------------------------------------------------------------
def test_gemma_hosted_api_is_distribution_with_passthrough_and_no_display() -> None:
    evaluation = run("gemma", hosted_service=True)
    assert codes(evaluation) == {("use_restrictions.passthrough", "obligation"), ("license.copy", "obligation")}
    assert "attribution.display" not in {f.code for f in evaluation.findings}


def test_gemma_distillation_makes_a_model_derivative() -> None:
    evaluation = run("gemma", derivative=public(kind="distill", name="Student-1B"))
    passthrough = [f for f in evaluation.findings if f.code == "use_restrictions.passthrough"]
    assert {f.applies_to for f in passthrough} == {"deployment", "derivatives"}
    assert finding(evaluation, "attribution.notice")["params"]["text"].startswith("Gemma is provided under")
    assert ("modified_files.notice", "obligation") in codes(evaluation)
    assert evaluation.decision == "allowed_with_obligations"


def test_gemma_prohibited_policy() -> None:
    assert run("gemma", intended_uses=["malware"]).decision == "prohibited"
    assert run("gemma", intended_uses=["military"]).decision == "allowed"  # not in Gemma's policy


# --- Tongyi Qianwen and Qwen -----------------------------------------------------------------
@pytest.mark.parametrize("key", ["tongyi-qianwen", "qwen"])
def test_qwen_100m_mau_applies_any_time_and_only_to_commercial_use(key: str) -> None:
    assert run(key, monthly_active_users=100_000_000).decision == "allowed"
    over = run(key, monthly_active_users=100_000_001, monthly_active_users_at_model_release=0)
    assert finding(over, "threshold.licensor_approval")["params"]["value"] == 100_000_001
    research = run(key, use_case="research", commercial_entity=False, monthly_active_users=500_000_000)
    assert "threshold.licensor_approval" not in {f.code for f in research.findings}


def test_tongyi_qianwen_bans_training_other_models() -> None:
    assert run("tongyi-qianwen", outputs_used_to_train_other_models=True).decision == "prohibited"
    assert run("qwen", outputs_used_to_train_other_models=True).decision == "allowed"  # no ban in the 2024 text


def test_qwen_public_derivative_must_say_built_with_qwen() -> None:
    evaluation = run("qwen", derivative=public(name="Acme-72B"))
    display = finding(evaluation, "attribution.display")
    assert display["params"]["text"] == "Built with Qwen"
    assert display["params"]["alternative"] == "Improved using Qwen"
    assert display["confidence"] == "secondary"  # shown to the legal reviewer


@pytest.mark.parametrize("key", ["tongyi-qianwen-research", "qwen-research"])
def test_research_licenses_block_commercial_use(key: str) -> None:
    assert finding(run(key), "use.research_only")["severity"] == "blocker"
    allowed = run(key, use_case="research", commercial_entity=False, production=False)
    assert "use.research_only" not in {f.code for f in allowed.findings}


# --- DeepSeek, OpenRAIL-M --------------------------------------------------------------------
def test_deepseek_with_military_intended_use_is_prohibited() -> None:
    evaluation = run("deepseek", hosted_service=True, intended_uses=["military"])
    assert evaluation.decision == "prohibited"
    assert finding(evaluation, "aup.prohibited_use")["params"]["category"] == "military"
    assert finding(evaluation, "use_restrictions.passthrough")["clause"] == "4.a / 5"


def test_deepseek_distillation_carries_the_restrictions() -> None:
    evaluation = run("deepseek", derivative={"kind": "distill", "distribution": "internal", "name": None})
    assert finding(evaluation, "use_restrictions.passthrough")["applies_to"] == "derivatives"


def test_openrail_m_adds_medical_and_law_enforcement() -> None:
    for use in ("medical_advice", "law_enforcement", "immigration", "impersonation"):
        assert run("bigscience-openrail-m", intended_uses=[use]).decision == "prohibited", use
    assert run("deepseek", intended_uses=["medical_advice"]).decision == "allowed"


# --- Kimi K2 ---------------------------------------------------------------------------------
def test_kimi_k2_revenue_in_cny_crosses_usd_20m() -> None:
    evaluation = run("kimi-k2-modified-mit", monthly_revenue={"amount": 150_000_000, "currency": "CNY"})
    display = finding(evaluation, "attribution.display")
    assert display["params"]["text"] == "Kimi K2"
    conversion = display["params"]["conversion"]
    assert conversion["currency"] == "CNY"
    assert conversion["fx_usd_per_unit"] == "0.138"
    assert conversion["amount_usd"] == pytest.approx(20_700_000)
    assert conversion["fx_as_of"] == "2026-11-01"
    below = run("kimi-k2-modified-mit", monthly_revenue={"amount": 144_000_000, "currency": "CNY"})  # USD 19.87M
    assert below.decision == "allowed"


def test_kimi_k2_thresholds_are_strict() -> None:
    usd = lambda amount: {"amount": amount, "currency": "USD"}  # noqa: E731
    assert run("kimi-k2-modified-mit", monthly_revenue=usd(20_000_000)).decision == "allowed"
    assert run("kimi-k2-modified-mit", monthly_revenue=usd(20_000_001)).decision == "allowed_with_obligations"
    assert run("kimi-k2-modified-mit", monthly_active_users=100_000_000).decision == "allowed"
    by_mau = run("kimi-k2-modified-mit", monthly_active_users=100_000_001)
    assert finding(by_mau, "attribution.display")["params"]["metric"] == "monthly_active_users"


def test_kimi_k2_display_is_for_commercial_products_only() -> None:
    research = run(
        "kimi-k2-modified-mit", use_case="research", commercial_entity=False, monthly_active_users=500_000_000
    )
    assert research.decision == "allowed"


# --- Mistral ---------------------------------------------------------------------------------
def test_mistral_mrl_in_commercial_saas_is_prohibited() -> None:
    evaluation = run("mrl", hosted_service=True)
    assert evaluation.decision == "prohibited"
    assert {("use.research_only", "blocker"), ("use.non_commercial", "blocker")} <= codes(evaluation)
    academic = run("mrl", use_case="research", commercial_entity=False, production=False)
    assert academic.decision == "allowed"


def test_mnpl_forbids_production() -> None:
    evaluation = run("mnpl", use_case="evaluation", commercial_entity=False, production=True)
    assert codes(evaluation) == {("use.non_production", "blocker")}
    assert run("mnpl", use_case="evaluation", commercial_entity=False, production=False).decision == "allowed"


# --- NVIDIA, Falcon --------------------------------------------------------------------------
def test_nvidia_guardrail_removal_terminates_and_notice_text() -> None:
    assert (
        finding(run("nvidia-open-model", guardrails_removed=True), "guardrail.bypass_terminates")["severity"]
        == "blocker"
    )
    evaluation = run("nvidia-open-model", redistributes_original_weights=True)
    assert finding(evaluation, "attribution.notice")["params"]["text"] == (
        "Licensed by NVIDIA Corporation under the NVIDIA Open Model License"
    )


def test_falcon_180b_hosting_needs_a_separate_license() -> None:
    evaluation = run("falcon-180b-tii", hosted_service=True)
    assert evaluation.decision == "licensor_approval_required"
    assert finding(evaluation, "hosting.separate_license")["confidence"] == "secondary"
    assert run("falcon-180b-tii").decision == "allowed"


# --- CC-BY-NC, Apache, MIT -------------------------------------------------------------------
def test_cc_by_nc_internal_commercial_use_is_prohibited() -> None:
    evaluation = run("cc-by-nc-4.0", use_case="internal", commercial_entity=True, hosted_service=False)
    assert evaluation.decision == "prohibited"
    assert finding(evaluation, "use.non_commercial")["severity"] == "blocker"
    research = run("cc-by-nc-4.0", use_case="research", commercial_entity=False, production=False)
    assert research.decision == "allowed"


def test_apache_public_fine_tune_obligations() -> None:
    evaluation = run("apache-2.0", derivative=public(name="anything"))
    assert codes(evaluation) == {
        ("license.copy", "obligation"),
        ("modified_files.notice", "obligation"),
        ("attribution.notice", "obligation"),
    }
    assert run("apache-2.0", hosted_service=True, monthly_active_users=10**9).decision == "allowed"


def test_mit_redistribution_keeps_the_notice() -> None:
    assert codes(run("mit", redistributes_original_weights=True)) == {("license.copy", "obligation")}
    assert run("mit", hosted_service=True, outputs_used_to_train_other_models=True).decision == "allowed"


# --- MiniMax, GLM-4, Yi ----------------------------------------------------------------------
def test_minimax_january_text_vs_february_revision() -> None:
    january = run("minimax-2025-01", outputs_used_to_train_other_models=True, hosted_service=True)
    assert ("outputs.training_prohibited", "blocker") in codes(january)
    assert finding(january, "attribution.display")["params"]["text"] == "Built with MiniMax AI"
    february = run("minimax-2025-02", outputs_used_to_train_other_models=True, hosted_service=True)
    assert february.decision == "allowed"
    assert run("minimax-2025-02", intended_uses=["military"]).decision == "prohibited"
    assert run("minimax-2025-01", monthly_active_users=100_000_001).decision == "licensor_approval_required"


def test_glm_4_registration_and_prefix() -> None:
    assert finding(run("glm-4"), "registration.required")["severity"] == "approval"
    assert finding(run("glm-4", derivative=public(name="AcmeGLM")), "naming.prefix")["severity"] == "blocker"
    assert finding(run("glm-4", derivative=public(name="glm-4-acme")), "naming.prefix")["severity"] == "obligation"
    assert run("glm-4", use_case="research", commercial_entity=False).decision == "allowed"


def test_yi_commercial_use_needs_registration() -> None:
    evaluation = run("yi-community-2.1")
    assert evaluation.decision == "licensor_approval_required"
    assert finding(evaluation, "registration.required")["applies_to"] == "deployment"
    assert run("yi-community-2.1", intended_uses=["military"]).decision == "prohibited"
