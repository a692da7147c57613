"""The readiness rule binds a passed eval to exactly the weights, engine, engine version and
parallel layout being rolled out (pure function: no database)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from governance.deployments.readiness import ReadinessState, Reason, ReasonCode, Signature, readiness
from governance.gate.conditions import GateCheck, GateState, evaluate

CANDIDATE = "sha256:" + "a" * 64
OTHER = "sha256:" + "b" * 64
BASELINE = "sha256:" + "c" * 64
NOW = datetime(2026, 12, 1, tzinfo=UTC)


def served_eval(**changes: Any) -> dict[str, Any]:
    run = {
        "eval": "e1",
        "kind": "served",
        "scheme": "w4a8",
        "status": "passed",
        "candidate_digest": CANDIDATE,
        "baseline_digest": BASELINE,
        "engine": "vllm",
        "engine_version": "0.11.0",
        "serving": {"precision": "w4a8", "tp": 8, "pp": 1, "ep": 8, "dp": 1, "max_model_len": 32768},
        "generation": {"temperature": 0.0, "seed": 0, "max_new_tokens": 64},
        "eval_set_sha256": "e" * 64,
        "threshold": 0.05,
        "overall": {"n": 400, "upper_bound_95": 0.01},
    }
    run.update(changes)
    return run


def state(runs: list[dict[str, Any]], approved: str = CANDIDATE, **envelope: Any) -> GateState:
    """An approved request of `approved` weights served as w4a8 on vLLM at tp 8 / ep 8 (unless
    `envelope` says otherwise), with `runs` in its evidence and both signatures current."""
    evidence = {
        "artifact": {"weights_digest": approved},
        "serving_envelope": {"engine": "vllm", "precision": "w4a8", "gpu": "h200", "max_model_len": 32768, **envelope},
        "capacity_plan": {"status": "done", "fits": True, "result": {"parallel": {"tp": 8, "pp": 1, "ep": 8}}},
        "eval_results": runs,
    }
    return GateState(
        status="approved",
        approval_expires_at=None,
        environments=["production"],
        readiness=ReadinessState(
            evidence=evidence,
            evidence_digest="d" * 64,
            signatures={role: Signature(role, "d" * 64) for role in ("legal", "engineering")},
        ),
        packet_valid={"legal": True, "engineering": True},
    )


def check(digest: str = CANDIDATE, **serving: Any) -> GateCheck:
    """The approved config served by the evaluated engine version (a None in `serving` leaves
    that key out, as a pipeline that does not send it)."""
    sent = {
        "engine": "vllm",
        "engine_version": "0.11.0",
        "precision": "w4a8",
        "gpu": "h200",
        "tp": 8,
        "pp": 1,
        "ep": 8,
        "max_model_len": 32768,
        "gpu_memory_utilization": 0.9,
        **serving,
    }
    return GateCheck(
        environment="production",
        artifact_digest=digest,
        serving={name: value for name, value in sent.items() if value is not None},
    )


def eval_reasons(runs: list[dict[str, Any]], approved: str = CANDIDATE, **envelope: Any) -> list[Reason]:
    """The readiness rule's eval reasons (the sign-off, the page and the gate read the same)."""
    return [r for r in readiness(state(runs, approved, **envelope).readiness, NOW) if r.code.startswith("eval.")]


def test_a_passed_eval_of_exactly_this_digest_engine_and_layout_allows() -> None:
    assert eval_reasons([served_eval()]) == []
    assert evaluate(state([served_eval()]), check(), NOW) == []


def test_an_eval_of_other_weights_than_the_approved_ones_names_both_digests() -> None:
    reasons = eval_reasons([served_eval()], approved=OTHER)
    assert [r.code for r in reasons] == [ReasonCode.EVAL_DIGEST_MISMATCH]
    assert CANDIDATE in reasons[0].message
    assert OTHER in reasons[0].message


def test_deploying_other_weights_than_the_evaluated_and_approved_ones_names_both_digests() -> None:
    reasons = evaluate(state([served_eval()]), check(OTHER), NOW)
    assert [r.code for r in reasons] == [ReasonCode.ARTIFACT_DIGEST_MISMATCH]
    assert CANDIDATE in reasons[0].message
    assert OTHER in reasons[0].message


def test_a_check_without_the_engine_version_is_denied_when_the_approved_eval_recorded_one() -> None:
    """Issue 43: the gate allowed a check that left out serving.engine_version although the
    approved eval served (and recorded) one, so an engine upgrade passed unevaluated."""
    [reason] = evaluate(state([served_eval()]), check(engine_version=None), NOW)
    assert reason.code == ReasonCode.SERVING_ENGINE_VERSION_MISSING
    assert reason.role == "pipeline"
    assert "serving.engine_version" in reason.message
    assert "0.11.0" in reason.message  # the version(s) the approval is bound to
    assert "serving.engine_version" in reason.fix
    # every version a covering eval served is named (a roll-back to one of them is allowed)
    upgrade = served_eval(eval="e3", engine_version="0.12.0")
    [reason] = evaluate(state([served_eval(), upgrade]), check(engine_version=None), NOW)
    assert "0.11.0" in reason.message
    assert "0.12.0" in reason.message
    # Configurable (GATE_REQUIRE_ENGINE_VERSION): off, the version stays optional as before.
    assert evaluate(state([served_eval()]), check(engine_version=None), NOW, require_engine_version=False) == []
    # An approval bound to no version (bf16 needs no eval; an eval that recorded none) requires none.
    assert evaluate(state([served_eval(engine_version="")]), check(engine_version=None), NOW) == []
    unquantized = state([], precision="bf16")
    assert evaluate(unquantized, check(engine_version=None, precision="bf16"), NOW) == []


def test_an_engine_upgrade_needs_a_fresh_eval() -> None:
    reasons = evaluate(state([served_eval()]), check(engine_version="0.12.0"), NOW)
    assert [r.code for r in reasons] == [ReasonCode.SERVING_ENGINE_VERSION]
    assert "0.11.0" in reasons[0].message
    assert "0.12.0" in reasons[0].message
    assert evaluate(state([served_eval()]), check(engine_version="0.11.0"), NOW) == []
    # the same weights approved for another engine
    assert [r.code for r in eval_reasons([served_eval()], engine="sglang")] == [ReasonCode.EVAL_STALE]


def test_a_parallel_layout_change_needs_a_fresh_eval() -> None:
    reasons = eval_reasons([served_eval()], tp=16, ep=16)
    assert [r.code for r in reasons] == [ReasonCode.EVAL_STALE]
    assert "tp" in reasons[0].message
    # a fresh eval on the new layout clears it
    fresh = served_eval(eval="e2", serving={"precision": "w4a8", "tp": 16, "pp": 1, "ep": 16, "dp": 1})
    assert eval_reasons([served_eval(), fresh], tp=16, ep=16) == []


def test_screening_never_satisfies_the_gate() -> None:
    screening = served_eval(kind="screening", candidate_digest="", engine="", engine_version="")
    reasons = eval_reasons([screening])
    assert [r.code for r in reasons] == [ReasonCode.EVAL_MISSING]
    assert "screening" in reasons[0].message
    # evidence written before eval runs named artifacts has no kind: it was screening
    legacy = {"eval": "old", "scheme": "w4a8", "status": "passed", "overall": {"n": 400}}
    assert [r.code for r in eval_reasons([legacy])] == [ReasonCode.EVAL_MISSING]


def test_a_failed_eval_of_this_digest_is_denied() -> None:
    assert [r.code for r in eval_reasons([served_eval(status="failed")])] == [ReasonCode.EVAL_FAILED]


def test_an_engine_upgrade_is_allowed_once_a_fresh_eval_of_it_passed_and_the_evaluated_versions_stay_allowed() -> None:
    """The upgrade path end to end: 0.12 is denied until its own eval of these weights and layout
    passed; a failed eval of 0.12 allows nothing new; once it passed, 0.12 is allowed and a roll-back
    to 0.11 (its passed eval still in the evidence) is allowed too, not denied for not being the latest."""
    old = served_eval()
    failed = served_eval(eval="e2", engine_version="0.12.0", status="failed")
    assert [r.code for r in evaluate(state([old, failed]), check(engine_version="0.12.0"), NOW)] == [
        ReasonCode.SERVING_ENGINE_VERSION
    ]
    assert evaluate(state([old, failed]), check(engine_version="0.11.0"), NOW) == []
    fresh = served_eval(eval="e3", engine_version="0.12.0")
    assert evaluate(state([old, fresh]), check(engine_version="0.12.0"), NOW) == []
    assert evaluate(state([old, fresh]), check(engine_version="0.11.0"), NOW) == []
    # a version never evaluated names the ones that were
    [reason] = evaluate(state([old, fresh]), check(engine_version="0.13.0"), NOW)
    assert reason.code == ReasonCode.SERVING_ENGINE_VERSION
    assert "0.11.0" in reason.message
    assert "0.12.0" in reason.message


# An engine upgrade or a new parallel layout: a fresh eval is compared, per category and by the
# eval's own threshold, with the run the last approval before it relied on. The evidence service
# adds both runs' accuracies to the fresh run's item (`accuracy`, `last_approved_eval`) only there.

LAST_APPROVED = {
    "eval": "e1",
    "engine": "vllm",
    "engine_version": "0.11.0",
    "serving": {"precision": "w4a8", "tp": 8, "pp": 1, "ep": 8, "dp": 1, "max_model_len": 32768},
    "accuracy": {"code": 0.90, "math": 0.80},
}
TP16 = {"precision": "w4a8", "tp": 16, "pp": 1, "ep": 16, "dp": 1}


def fresh(code: float, math: float, **changes: Any) -> dict[str, Any]:
    return served_eval(eval="e2", accuracy={"code": code, "math": math}, last_approved_eval=LAST_APPROVED, **changes)


def test_a_new_layout_whose_fresh_eval_fell_below_the_last_approved_run_is_blocked() -> None:
    run = fresh(0.89, 0.70, serving=TP16)  # math 0.10 lower; the eval's threshold is 0.05
    [reason] = eval_reasons([served_eval(), run], tp=16, ep=16)
    assert reason.code == ReasonCode.EVAL_REGRESSED
    assert reason.role == "engineering"
    for part in ("math", "0.700", "0.800", "vllm 0.11.0 tp16/pp1/ep16", "vllm 0.11.0 tp8/pp1/ep8"):
        assert part in reason.message
    # the gate denies it: the readiness rule is its rule
    reasons = evaluate(state([served_eval(), run], tp=16, ep=16), check(tp=16, ep=16), NOW)
    assert [r.code for r in reasons] == [ReasonCode.EVAL_REGRESSED]


def test_a_fresh_eval_within_the_threshold_of_the_last_approved_run_allows() -> None:
    run = fresh(0.86, 0.76, serving=TP16)  # 0.04 lower at most
    assert eval_reasons([served_eval(), run], tp=16, ep=16) == []


def test_without_a_previous_approval_the_fresh_eval_stands_on_its_baseline_alone() -> None:
    run = served_eval(eval="e2", accuracy={"code": 0.10, "math": 0.10}, serving=TP16)
    assert eval_reasons([run], tp=16, ep=16) == []


def test_a_run_of_the_approved_runs_own_engine_and_layout_is_not_compared() -> None:
    rerun = fresh(0.10, 0.10)  # a rerun of the approved config: judged against its baseline alone
    assert eval_reasons([rerun]) == []


def test_the_gate_denies_a_regressed_engine_upgrade_and_allows_one_that_held_up() -> None:
    """The request stays approvable on the approved version (a regressed upgrade covers nothing,
    like a failed one); the gate denies the regressed version naming the category and both runs."""
    regressed = fresh(0.80, 0.80, engine_version="0.12.0")  # code 0.10 lower
    [reason] = evaluate(state([served_eval(), regressed]), check(engine_version="0.12.0"), NOW)
    assert reason.code == ReasonCode.SERVING_ENGINE_VERSION
    for part in ("regressed in code", "0.800", "0.900", "vllm 0.12.0", "vllm 0.11.0"):
        assert part in reason.message
    assert evaluate(state([served_eval(), regressed]), check(engine_version="0.11.0"), NOW) == []
    held_up = fresh(0.88, 0.79, engine_version="0.12.0")
    assert evaluate(state([served_eval(), held_up]), check(engine_version="0.12.0"), NOW) == []
