"""Properties of the one readiness rule over generated evidence states (pure functions, no
database): what the sign-off service lets through, once signed, is what the gate allows; and the
request page's blockers are exactly the gate's reasons less the gate's deploy-time checks."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from governance.deployments.readiness import (
    SIGNING_ROLES,
    ReadinessState,
    Signature,
    approved_eval,
    blocks_signing,
    readiness,
)
from governance.gate.conditions import DEPLOY_TIME_CODES, GateCheck, GateState, approved_parallelism, evaluate

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
DIGEST = "c" * 64
FINDING_CODES = ["threshold.licensor_approval", "use.non_commercial", "naming.prefix", "attribution.display"]
SEVERITIES = ["blocker", "approval", "obligation", "info"]

findings = st.lists(
    st.fixed_dictionaries(
        {
            "code": st.sampled_from(FINDING_CODES),
            "severity": st.sampled_from(SEVERITIES),
            "clause": st.sampled_from(["1.a", "2", ""]),
            "message": st.just("a term"),
        }
    ),
    max_size=4,
)
licenses = st.lists(
    st.fixed_dictionaries({"license": st.sampled_from(["llama-3.1", "kimi-k2-modified-mit"]), "findings": findings}),
    max_size=2,
)
waivers = st.lists(
    st.fixed_dictionaries(
        {
            "license": st.sampled_from(["llama-3.1", "kimi-k2-modified-mit"]),
            "code": st.sampled_from(FINDING_CODES),
            "clause": st.sampled_from(["1.a", ""]),
            "expires_at": st.sampled_from([NOW - timedelta(days=1), NOW + timedelta(days=30)]).map(
                lambda t: t.isoformat()
            ),
            "permission": st.sampled_from([None, {"name": "letter.pdf", "size": 10, "sha256": "a" * 64}]),
            "confirmed_by": st.sampled_from([None, "legal2"]),
        }
    ),
    max_size=3,
)
obligations = st.lists(
    st.fixed_dictionaries(
        {
            "license": st.just("llama-3.1"),
            "code": st.just("attribution.display"),
            "clause": st.just("1.b.i"),
            "status": st.sampled_from(["open", "acknowledged", "accepted", "rejected"]),
        }
    ),
    max_size=2,
)
capacity = st.one_of(
    st.none(),
    st.fixed_dictionaries(
        {
            "status": st.sampled_from(["pending", "failed", "done"]),
            "fits": st.booleans(),
            "result": st.fixed_dictionaries(
                {
                    "parallel": st.fixed_dictionaries(
                        {"tp": st.sampled_from([1, 8]), "pp": st.sampled_from([1, 2]), "ep": st.sampled_from([1, 8])}
                    ),
                    "notes": st.just(["Rejected tp=1: weights do not fit"]),
                },
                # the plan's verdict (issue 47): tight is engineering's call, cleared by its signature
                optional={"verdict": st.sampled_from(["fits", "tight", "does_not_fit"])},
            ),
        }
    ),
)
evals = st.lists(
    st.fixed_dictionaries(
        {
            "kind": st.sampled_from(["served", "screening"]),
            "scheme": st.sampled_from(["fp8", "w4a8", "w4a16-awq", "w4a16"]),
            "status": st.sampled_from(["running", "passed", "failed", "error"]),
            "candidate_digest": st.sampled_from(["sha256:" + "1" * 64, "sha256:" + "2" * 64]),
            "engine": st.sampled_from(["vllm", "sglang"]),
            "serving": st.fixed_dictionaries({"tp": st.sampled_from([1, 8]), "ep": st.sampled_from([1, 8])}),
            "overall": st.just({"upper_bound_95": 0.02}),
        },
        # a fresh run after an approval, on another engine, version or layout: compared per
        # category with the run that approval relied on (eval.regressed when it fell behind)
        optional={
            "engine_version": st.sampled_from(["0.11.0", "0.12.0"]),
            "accuracy": st.fixed_dictionaries({"code": st.sampled_from([0.7, 0.88, 0.9])}),
            "last_approved_eval": st.fixed_dictionaries(
                {
                    "eval": st.just("e0"),
                    "engine": st.sampled_from(["vllm", "sglang"]),
                    "engine_version": st.just("0.11.0"),
                    "serving": st.fixed_dictionaries({"tp": st.sampled_from([1, 8]), "ep": st.sampled_from([1, 8])}),
                    "accuracy": st.just({"code": 0.9}),
                }
            ),
        },
    ),
    max_size=3,
)
envelopes = st.fixed_dictionaries(
    {
        "precision": st.sampled_from(["bf16", "fp8", "w4a8", "w4a16"]),
        "gpu": st.sampled_from(["h200", "h100-80g"]),
        "max_model_len": st.sampled_from([8192, 131072]),
    },
    optional={
        "engine": st.sampled_from(["vllm", "sglang"]),
        "kv_dtype": st.sampled_from(["bf16", "fp8"]),
        "tp": st.sampled_from([2, 4]),
        "gpu_memory_utilization": st.sampled_from([0.85, 0.9]),
    },
)
signature = st.one_of(
    st.none(),
    st.builds(Signature, role=st.just(""), evidence_digest=st.sampled_from([DIGEST, "f" * 64]), voided=st.booleans()),
)


def _waiver_for(license_key: str, finding: dict[str, Any]) -> dict[str, Any]:
    """A waiver in force for `finding`: unexpired, with the licensor's permission, confirmed."""
    return {
        "license": license_key,
        "code": finding["code"],
        "clause": finding["clause"],
        "expires_at": (NOW + timedelta(days=30)).isoformat(),
        "permission": {"name": "letter.pdf", "size": 10, "sha256": "a" * 64},
        "confirmed_by": "legal2",
    }


def _settled(draw: Any, evidence: dict[str, Any]) -> dict[str, Any]:
    """The same evidence with every blocker settled the way people settle them: blocking findings
    waived, obligations accepted, a plan that fits, a passed eval that served the approved weights
    at the approved precision, engine and layout."""
    layout = draw(
        st.fixed_dictionaries({"tp": st.sampled_from([1, 8]), "pp": st.just(1), "ep": st.sampled_from([1, 8])})
    )
    envelope = evidence["serving_envelope"]
    passed = {
        "kind": "served",
        "scheme": envelope["precision"],
        "status": "passed",
        "candidate_digest": evidence["artifact"]["weights_digest"],
        "engine": envelope.get("engine", "vllm"),
        "engine_version": "0.11.0",
        "serving": {name: int(envelope.get(name) or layout[name]) for name in ("tp", "pp", "ep")},
        "overall": {"upper_bound_95": 0.01},
    }
    extra_waivers = [
        _waiver_for(evaluation["license"], finding)
        for evaluation in evidence["licenses"]
        for finding in evaluation["findings"]
        if finding["severity"] in ("blocker", "approval")
    ]
    return {
        **evidence,
        "waivers": [*evidence["waivers"], *extra_waivers],
        "obligations": [{**item, "status": "accepted"} for item in evidence["obligations"]],
        "capacity_plan": {
            "status": "done",
            "fits": True,
            "result": {"parallel": layout, "verdict": draw(st.sampled_from(["fits", "tight"]))},
        },
        "eval_results": [*evidence["eval_results"], passed],
    }


@st.composite
def states(draw: Any, settled: bool | None = None) -> ReadinessState:
    """Any evidence state; `settled` (drawn when None): one whose blockers people settled."""
    evidence = {
        "licenses": draw(licenses),
        "waivers": draw(waivers),
        "obligations": draw(obligations),
        "capacity_plan": draw(capacity),
        "eval_results": draw(evals),
        "serving_envelope": draw(envelopes),
        "artifact": {"weights_digest": "sha256:" + "1" * 64},
    }
    if settled if settled is not None else draw(st.booleans()):
        evidence = _settled(draw, evidence)
    signatures = {}
    for role in SIGNING_ROLES:
        drawn = draw(signature)
        if drawn is not None:
            signatures[role] = dataclasses.replace(drawn, role=role)
    return ReadinessState(
        evidence=evidence,
        evidence_digest=DIGEST,
        signatures=signatures,
        flagged=draw(st.booleans()),
        flag_reason="usage crossed",
    )


def approved_check(state: GateState) -> GateCheck:
    """What a pipeline deploying exactly the approved artifact and serving config sends."""
    envelope = state.evidence["serving_envelope"]
    layout = approved_parallelism(state)
    serving = {
        "engine": envelope.get("engine", "vllm"),
        "precision": envelope["precision"],
        "gpu": envelope["gpu"],
        "max_model_len": envelope["max_model_len"],
        "gpu_memory_utilization": envelope.get("gpu_memory_utilization", 0.9),
        **layout,
    }
    if "kv_dtype" in envelope:
        serving["kv_dtype"] = envelope["kv_dtype"]
    evaluated = approved_eval(state.evidence)
    if evaluated is not None and evaluated.get("engine_version"):
        serving["engine_version"] = evaluated["engine_version"]  # the version the approval is bound to
    return GateCheck("production", state.evidence["artifact"]["weights_digest"], serving)


def gate_state(readiness_state: ReadinessState, status: str) -> GateState:
    return GateState(
        status=status,
        approval_expires_at=NOW + timedelta(days=90),
        environments=["production"],
        readiness=readiness_state,
        packet_valid=dict.fromkeys(SIGNING_ROLES, True),
    )


@settings(max_examples=1000, deadline=None)
@given(states(settled=True))
def test_what_the_sign_off_lets_through_the_gate_allows(state: ReadinessState) -> None:
    assert blocks_signing(readiness(state, NOW)) == []  # settled evidence may be signed
    # Both reviewers sign the current evidence; the approval clears the usage flag.
    signed = dataclasses.replace(
        state,
        signatures={role: Signature(role, state.evidence_digest) for role in SIGNING_ROLES},
        flagged=False,
        flag_reason="",
    )
    assert readiness(signed, NOW) == []
    approved = gate_state(signed, "approved")
    assert evaluate(approved, approved_check(approved), NOW) == []


@settings(max_examples=1000, deadline=None)
@given(states(), st.sampled_from(["in_review", "approved", "revoked"]))
def test_the_page_lists_the_gates_reasons_less_the_deploy_time_ones(state: ReadinessState, status: str) -> None:
    gate = gate_state(state, status)
    gate_reasons = evaluate(gate, approved_check(gate), NOW)
    assert readiness(state, NOW) == [r for r in gate_reasons if r.code not in DEPLOY_TIME_CODES]


@settings(max_examples=1000, deadline=None)
@given(states(settled=False))
def test_unsettled_evidence_is_refused_and_the_gate_denies_it(state: ReadinessState) -> None:
    """The converse: while the rule blocks signing, no signature makes the gate allow."""
    blocking = blocks_signing(readiness(state, NOW))
    signed = dataclasses.replace(state, signatures={role: Signature(role, DIGEST) for role in SIGNING_ROLES})
    approved = gate_state(signed, "approved")
    gate_codes = {r.code for r in evaluate(approved, approved_check(approved), NOW)}
    assert {r.code for r in blocking} <= gate_codes


@settings(max_examples=300, deadline=None)
@given(states())
def test_a_signature_blocks_nothing_that_signing_cannot_clear(state: ReadinessState) -> None:
    """Signing is refused exactly for the reasons no signature clears (evidence, not paperwork)."""
    without = dataclasses.replace(state, signatures={}, flagged=False)
    with_current = dataclasses.replace(
        state, signatures={role: Signature(role, DIGEST) for role in SIGNING_ROLES}, flagged=False
    )
    assert blocks_signing(readiness(without, NOW)) == readiness(with_current, NOW)
