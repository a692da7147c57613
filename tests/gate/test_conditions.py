"""The gate's deny reasons, one per condition, over built states (pure: no database, no PKI, no
signing). The states are what `selectors.gate_deployment_for_token` loads for an approved request
like the one tests/gate/test_check.py signs through the API (apache-2.0 weights served as fp8 on
vLLM 0.11.0, a passed served eval, both signatures current and verified); each test changes one
thing and asserts the reason the gate gives. test_check.py keeps the full signed flows: the
allow and its contract, a deny after the evidence changes, and a tampered packet."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from governance.deployments.readiness import SIGNING_ROLES, ReadinessState, Signature
from governance.gate.choices import ReasonCode
from governance.gate.conditions import GateCheck, GateState, evaluate

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
WEIGHTS = "sha256:" + "1" * 64
DIGEST = "d" * 64
SERVING = {"engine": "vllm", "precision": "fp8", "gpu": "h200", "max_model_len": 32768, "concurrency": 4}
LAYOUT = {"tp": 1, "pp": 1, "ep": 1}


def passed_eval(**changes: Any) -> dict[str, Any]:
    """A passed served eval of the approved weights, precision, engine and layout (record_eval's)."""
    return {
        "eval": "e1",
        "kind": "served",
        "scheme": "fp8",
        "status": "passed",
        "candidate_digest": WEIGHTS,
        "engine": "vllm",
        "engine_version": "0.11.0",
        "serving": {"precision": "fp8", **LAYOUT, "dp": 1},
        "overall": {"n": 400, "upper_bound_95": 0.02},
        **changes,
    }


def evidence(**changes: Any) -> dict[str, Any]:
    return {
        "artifact": {"weights_digest": WEIGHTS},
        "licenses": [{"license": "apache-2.0", "findings": []}],
        "obligations": [],
        "waivers": [],
        "serving_envelope": SERVING,
        "capacity_plan": {"status": "done", "fits": True, "result": {"parallel": LAYOUT, "verdict": "fits"}},
        "eval_results": [passed_eval()],
        **changes,
    }


def approved(
    status: str = "approved",
    *,
    expires_at: datetime | None = NOW + timedelta(days=180),
    packet_valid: dict[str, bool] | None = None,
    signed_digest: dict[str, str] | None = None,
    flagged: bool = False,
    **changes: Any,
) -> GateState:
    """The approved request, both signatures of DIGEST (or `signed_digest` per role) verified in
    the completed packet (or `packet_valid`), with `changes` to its evidence."""
    signed = signed_digest or {}
    return GateState(
        status=status,
        approval_expires_at=expires_at,
        environments=["production"],
        readiness=ReadinessState(
            evidence=evidence(**changes),
            evidence_digest=DIGEST,
            signatures={role: Signature(role, signed.get(role, DIGEST)) for role in SIGNING_ROLES},
            flagged=flagged,
            flag_reason="usage crossed" if flagged else "",
        ),
        packet_valid=dict.fromkeys(SIGNING_ROLES, True) if packet_valid is None else packet_valid,
    )


def check(environment: str = "production", artifact_digest: str = WEIGHTS, **serving: Any) -> GateCheck:
    """What Gate.body sends: the approved configuration, with `serving` changed (None: left out)."""
    sent = {
        "engine": "vllm",
        "engine_version": "0.11.0",
        "precision": "fp8",
        "gpu": "h200",
        **LAYOUT,
        "max_model_len": 32768,
        "gpu_memory_utilization": 0.9,
        **serving,
    }
    return GateCheck(environment, artifact_digest, {n: v for n, v in sent.items() if v is not None})


def codes(state: GateState, sent: GateCheck, *, require_engine_version: bool = True) -> list[str]:
    return [r.code for r in evaluate(state, sent, NOW, require_engine_version=require_engine_version)]


def test_the_built_approved_state_is_allowed() -> None:
    """The base every test below changes: what the signed flow's allow sees."""
    assert codes(approved(), check()) == []


def test_each_deny_reason_has_a_code_message_and_a_fix_naming_who_acts() -> None:
    reasons = evaluate(approved(), check(artifact_digest="sha256:" + "0" * 64), NOW)
    # other weights than approved (and evaluated): the reason names both digests
    [reason] = reasons
    assert reason.code == ReasonCode.ARTIFACT_DIGEST_MISMATCH
    assert "0000" in reason.message
    assert WEIGHTS in reason.message
    assert "requester" in reason.fix or "pipeline" in reason.fix
    assert set(reason.as_dict()) == {"code", "message", "fix"}  # the contract's fields


@pytest.mark.parametrize(
    ("sent", "expected"),
    [
        ({"artifact_digest": "sha256:" + "a" * 64}, [ReasonCode.ARTIFACT_DIGEST_MISMATCH]),
        ({"max_model_len": 65536}, [ReasonCode.SERVING_MAX_MODEL_LEN]),
        ({"max_model_len": 8192}, []),  # below the approved length is inside
        ({"precision": "bf16"}, [ReasonCode.SERVING_PRECISION]),
        # the approved precision's eval is what counts: another precision is a serving mismatch
        ({"precision": "w4a8"}, [ReasonCode.SERVING_PRECISION]),
        ({"engine": "sglang"}, [ReasonCode.SERVING_ENGINE]),
        ({"gpu": "h100-80g"}, [ReasonCode.SERVING_GPU]),
        # a GPU outside the catalog (a request's gpu_spec key) is compared like any other
        ({"gpu": "lab-x2"}, [ReasonCode.SERVING_GPU]),
        ({"gpu_memory_utilization": 0.95}, [ReasonCode.SERVING_MEMORY_UTILIZATION]),
        ({"tp": 2}, [ReasonCode.SERVING_PARALLELISM]),
        ({"kv_dtype": "fp8"}, [ReasonCode.SERVING_KV_DTYPE]),
        ({"environment": "staging"}, [ReasonCode.ENVIRONMENT_NOT_APPROVED]),
    ],
)
def test_serving_config_outside_the_approved_envelope_is_denied(sent: dict[str, Any], expected: list[str]) -> None:
    assert codes(approved(), check(**sent)) == expected


def test_a_check_without_the_engine_version_the_approval_is_bound_to_is_denied() -> None:
    """Issue 43: the approved eval served (and recorded) engine 0.11.0, so a check that leaves out
    serving.engine_version is denied; GATE_REQUIRE_ENGINE_VERSION=false restores the optional field
    (tests/gate/test_check.py checks that the API passes the setting)."""
    [reason] = evaluate(approved(), check(engine_version=None), NOW)
    assert reason.code == "serving.engine_version_missing"
    assert "0.11.0" in reason.message
    assert "serving.engine_version" in reason.fix
    assert codes(approved(), check()) == []  # sending the evaluated version allows
    assert codes(approved(), check(engine_version=None), require_engine_version=False) == []


def test_expired_approval_is_denied() -> None:
    # past its expiry: the approval has expired, whether or not the beat has marked it yet
    later = approved(expires_at=NOW - timedelta(seconds=1))
    assert codes(later, check()) == [ReasonCode.EXPIRED]
    assert codes(approved("expired"), check()) == [ReasonCode.EXPIRED]  # and once it has


def test_revoked_approval_is_denied() -> None:
    assert codes(approved("revoked"), check()) == [ReasonCode.REVOKED]


def test_one_stale_signature_is_denied() -> None:
    # A stored sign-off that covers other evidence than the current digest (e.g. a row altered
    # in the database): the gate compares digests, it never trusts the status alone.
    assert codes(approved(signed_digest={"legal": "f" * 64}), check()) == [ReasonCode.SIGNATURE_STALE]


def test_a_plan_that_no_longer_fits_is_denied() -> None:
    # the serving plan changed to one GPU for a 4M context: back in review, the plan does not fit
    plan = {"status": "done", "fits": False, "result": {"parallel": LAYOUT, "verdict": "does_not_fit"}}
    state = approved("in_review", capacity_plan=plan, serving_envelope={**SERVING, "max_model_len": 4_000_000})
    found = codes(state, check(max_model_len=4_000_000))
    assert ReasonCode.CAPACITY_DOES_NOT_FIT in found
    assert ReasonCode.NOT_APPROVED in found


def test_usage_over_a_threshold_and_unaccepted_obligations_are_denied() -> None:
    """A usage report over qwen's 100M monthly users flags the request and brings the licensor's
    approval term back; a new derivative name brings an obligation nobody has acknowledged."""
    threshold = {
        "code": "threshold.licensor_approval",
        "severity": "approval",
        "clause": "4",
        "message": "over 100M monthly active users needs the licensor's approval",
    }
    state = approved(flagged=True, licenses=[{"license": "qwen", "findings": [threshold]}])
    found = codes(state, check())
    assert ReasonCode.USAGE_THRESHOLD_CROSSED in found
    assert ReasonCode.LICENSE_APPROVAL_REQUIRED in found
    naming = {"license": "qwen", "code": "naming.prefix", "clause": "4.b", "status": "open"}
    assert ReasonCode.OBLIGATION_NOT_ACCEPTED in codes(approved(obligations=[naming]), check())


def test_sign_off_rows_without_a_verified_packet_are_not_signatures() -> None:
    """Approving sign-off rows without a stored verification of the completed packet's bytes (a
    database writer's insert) do not count: signature.invalid for each role."""
    unverified = codes(approved(packet_valid={}), check())
    assert unverified == [ReasonCode.SIGNATURE_INVALID, ReasonCode.SIGNATURE_INVALID]
    assert codes(approved(packet_valid={"legal": False, "engineering": True}), check()) == [
        ReasonCode.SIGNATURE_INVALID
    ]
