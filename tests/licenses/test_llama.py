"""Meta Llama licenses (the terms of the Llama 2 … Llama 4 license texts)."""

import pytest

from tests.licenses.helpers import codes, finding, public, run

LLAMA_31_PLUS = ["llama-3.1", "llama-3.2", "llama-3.3", "llama-4"]


@pytest.mark.parametrize("key", ["llama-2", "llama-3", *LLAMA_31_PLUS])
def test_internal_use_without_distribution_is_allowed(key: str) -> None:
    evaluation = run(key)
    assert evaluation.decision == "allowed"
    assert evaluation.findings == ()


@pytest.mark.parametrize("key", ["llama-2", "llama-3", *LLAMA_31_PLUS])
def test_700m_mau_is_strict_and_counted_on_the_release_date(key: str) -> None:
    assert run(key, monthly_active_users=700_000_000).decision == "allowed"
    over = run(key, monthly_active_users=700_000_001)
    assert over.decision == "licensor_approval_required"
    params = finding(over, "threshold.licensor_approval")["params"]
    assert (params["limit"], params["value"], params["metric"]) == (700_000_000, 700_000_001, "monthly_active_users")
    # Today above the limit, but not on the release date: no approval needed.
    assert (
        run(key, monthly_active_users=900_000_000, monthly_active_users_at_model_release=650_000_000).decision
        == "allowed"
    )
    # Below the limit today, above it on the release date: approval.
    crossed_then = run(key, monthly_active_users=10, monthly_active_users_at_model_release=700_000_001)
    assert ("threshold.licensor_approval", "approval") in codes(crossed_then)


@pytest.mark.parametrize("key", LLAMA_31_PLUS)
def test_hosted_service_must_display_built_with_llama(key: str) -> None:
    evaluation = run(key, hosted_service=True)
    assert evaluation.decision == "allowed_with_obligations"
    assert finding(evaluation, "attribution.display")["params"]["text"] == "Built with Llama"


def test_llama_3_display_string_and_prefix() -> None:
    evaluation = run("llama-3", hosted_service=True)
    assert finding(evaluation, "attribution.display")["params"]["text"] == "Built with Meta Llama 3"
    ok = run("llama-3", derivative=public(name="Llama 3 Support Assistant"))
    assert ("naming.prefix", "obligation") in codes(ok)
    bad = run("llama-3", derivative=public(name="SupportBot-8B"))
    assert finding(bad, "naming.prefix")["params"]["prefix"] == "Llama 3"
    assert bad.decision == "prohibited"


def test_public_llama_31_fine_tune_without_the_prefix_is_blocked() -> None:
    evaluation = run("llama-3.1", derivative=public(name="AcmeChat-70B"))
    assert evaluation.decision == "prohibited"
    naming = finding(evaluation, "naming.prefix")
    assert (naming["severity"], naming["params"]["prefix"]) == ("blocker", "Llama")
    # Obligations of the distribution are still listed.
    assert {"attribution.display", "attribution.notice", "license.copy"} <= {f.code for f in evaluation.findings}


def test_public_llama_31_fine_tune_with_the_prefix_carries_obligations() -> None:
    evaluation = run("llama-3.1", derivative=public(name="Llama-3.1-AcmeChat-70B"))
    assert evaluation.decision == "allowed_with_obligations"
    assert finding(evaluation, "naming.prefix")["severity"] == "obligation"
    assert finding(evaluation, "attribution.notice")["params"]["text"] == (
        "Llama 3.1 is licensed under the Llama 3.1 Community License, Copyright © Meta Platforms, Inc. All Rights Reserved."
    )
    unnamed = run("llama-3.1", derivative=public(name=None))
    assert finding(unnamed, "naming.prefix")["severity"] == "obligation"


@pytest.mark.parametrize("key", ["llama-2", "llama-3"])
def test_llama_2_and_3_ban_training_other_models_on_outputs(key: str) -> None:
    evaluation = run(key, outputs_used_to_train_other_models=True)
    assert evaluation.decision == "prohibited"
    assert finding(evaluation, "outputs.training_prohibited")["applies_to"] == "outputs"


@pytest.mark.parametrize("key", LLAMA_31_PLUS)
def test_llama_31_plus_removed_the_output_training_ban(key: str) -> None:
    evaluation = run(key, outputs_used_to_train_other_models=True)
    assert "outputs.training_prohibited" not in {f.code for f in evaluation.findings}


def test_llama_2_notice_text_and_no_display_duty() -> None:
    evaluation = run("llama-2", redistributes_original_weights=True, hosted_service=True)
    assert finding(evaluation, "attribution.notice")["params"]["text"] == (
        "Llama 2 is licensed under the LLAMA 2 Community License, Copyright (c) Meta Platforms, Inc. All Rights Reserved."
    )
    assert "attribution.display" not in {f.code for f in evaluation.findings}


@pytest.mark.parametrize("key", ["llama-3.2", "llama-3.3", "llama-4"])
def test_eu_company_with_multimodal_model_is_not_granted_rights(key: str) -> None:
    evaluation = run(key, org_country="DE", multimodal=True)
    assert evaluation.decision == "prohibited"
    assert finding(evaluation, "territory.restricted")["params"]["region"] == "EU"
    assert run(key, org_country="DE", multimodal=False).decision == "allowed"  # text-only
    assert run(key, org_country="US", multimodal=True).decision == "allowed"  # principal place of business counts
    assert run(key, org_country="CH", multimodal=True).decision == "allowed"  # not an EU member


def test_llama_31_has_no_eu_clause() -> None:
    assert run("llama-3.1", org_country="FR", multimodal=True).decision == "allowed"


@pytest.mark.parametrize("key", ["llama-2", "llama-3", *LLAMA_31_PLUS])
def test_military_use_is_prohibited(key: str) -> None:
    evaluation = run(key, intended_uses=["military", "medical_advice"])
    assert [f.params["category"] for f in evaluation.findings if f.code == "aup.prohibited_use"] == ["military"]
