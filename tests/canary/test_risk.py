"""What is high-risk, as a pure function (no database): governance/canary/risk.py."""

from __future__ import annotations

from typing import Any

from governance.canary.risk import CanaryRecord, canary_reasons, envelope_digest, is_high_risk, serving_envelope

DIGEST = "sha256:" + "a" * 64
SERVING = {"engine": "vllm", "precision": "w4a16", "gpu": "h200", "tp": 2, "max_model_len": 32768}
QUANTIZED = {"artifact": {"weights_digest": DIGEST, "weights": {"quantized": True, "precision": "w4a16"}}}
PUBLISHED = {"artifact": {"weights_digest": DIGEST, "weights": {"quantized": False, "precision": "bf16"}}}
ENV = envelope_digest(SERVING)


def codes(evidence: dict[str, Any], records: list[CanaryRecord], environment: str = "production") -> list[str]:
    reasons = canary_reasons(
        environment=environment,
        guarded=["production"],
        evidence=evidence,
        digest=DIGEST.upper().replace("SHA256", "sha256"),  # digests compare case-insensitively
        envelope_sha=ENV,
        records=records,
    )
    return [r.code for r in reasons]


def test_the_definition() -> None:
    assert is_high_risk(quantized=True, already_promoted=False)
    assert not is_high_risk(quantized=True, already_promoted=True)
    assert not is_high_risk(quantized=False, already_promoted=False)


def test_the_envelope_digest_fills_the_gates_defaults_and_ignores_replicas() -> None:
    assert serving_envelope(SERVING)["pp"] == 1
    assert envelope_digest({**SERVING, "pp": 1, "ep": 1, "gpu_memory_utilization": 0.9, "dp": 4}) == ENV
    assert envelope_digest({**SERVING, "tp": 4}) != ENV
    assert envelope_digest({**SERVING, "engine_version": "0.12.0"}) != ENV


def test_quantized_weights_need_a_canary_only_in_guarded_environments() -> None:
    assert codes(QUANTIZED, []) == ["canary.missing"]
    assert codes(QUANTIZED, [], environment="staging") == []


def test_unquantized_weights_are_low_risk() -> None:
    assert codes(PUBLISHED, []) == []
    assert codes(PUBLISHED, [CanaryRecord(True, "failed", DIGEST, ENV)]) == []


def test_a_redeploy_of_weights_and_envelope_promoted_for_another_request_skips_the_canary() -> None:
    assert codes(QUANTIZED, [CanaryRecord(False, "promoted", DIGEST, ENV)]) == []
    # another envelope promoted elsewhere does not count
    assert codes(QUANTIZED, [CanaryRecord(False, "passed", DIGEST, "f" * 64)]) == ["canary.missing"]


def test_the_latest_analysis_of_this_request_decides() -> None:
    older_passed = CanaryRecord(True, "passed", DIGEST, ENV)
    assert codes(QUANTIZED, [CanaryRecord(True, "running", DIGEST, ENV), older_passed]) == ["canary.pending"]
    assert codes(QUANTIZED, [CanaryRecord(True, "rolled_back", DIGEST, ENV), older_passed]) == ["canary.failed"]
    assert codes(QUANTIZED, [older_passed, CanaryRecord(True, "failed", DIGEST, ENV)]) == []
