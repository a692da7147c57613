"""A GPU budget in the serving plan (issue 46): "at most 8 x H200". A capacity plan that fits only on
more GPUs than the budget is `capacity.over_budget`, not a green "fits": a blocker for the requester
(the budget is their statement of the GPUs they have; no reviewer's signature adds GPUs)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from django.utils import translation

from governance.deployments.readiness import ReadinessState, Signature, blocks_signing, readiness
from governance.web.labels import blocker_guidance

NOW = datetime(2026, 12, 5, tzinfo=UTC)
DIGEST = "d" * 64


def _state(gpus: int, budget: int | None, verdict: str = "fits", **signatures: str) -> ReadinessState:
    result: dict[str, Any] = {
        "verdict": verdict,
        "parallel": {"tp": 8, "pp": gpus // 8, "ep": 1, "dp": 1, "gpus": gpus},
        "gpu": {"key": "h200"},
        "notes": ["Tight: a thin margin"] if verdict == "tight" else [],
    }
    envelope: dict[str, Any] = {"engine": "vllm", "precision": "fp8", "gpu": "h200"}
    if budget is not None:
        envelope["max_gpus"] = budget
    return ReadinessState(
        evidence={
            "serving_envelope": envelope,
            "capacity_plan": {"status": "done", "fits": True, "result": result},
        },
        evidence_digest=DIGEST,
        signatures={role: Signature(role, digest) for role, digest in signatures.items()},
    )


def _capacity(state: ReadinessState) -> list[Any]:
    return [reason for reason in readiness(state, NOW) if reason.code.startswith("capacity.")]


def test_a_plan_on_more_gpus_than_the_budget_blocks() -> None:
    [reason] = _capacity(_state(16, 8))
    assert reason.code == "capacity.over_budget"
    assert reason.message == "the serving plan fits only on 16 GPUs (h200), more than its budget of 8"
    assert reason.role == "requester"
    assert reason.as_blocker()["severity"] == "blocker"
    assert reason in blocks_signing(readiness(_state(16, 8), NOW))
    # engineering's signature does not clear it (a tight plan's would)
    assert [r.code for r in _capacity(_state(16, 8, "tight", engineering=DIGEST))] == ["capacity.over_budget"]


def test_within_the_budget_or_without_one_nothing_changes() -> None:
    assert _capacity(_state(8, 8)) == []
    assert _capacity(_state(16, None)) == []
    assert _capacity(_state(16, 32)) == []


def test_the_reason_reads_in_chinese() -> None:
    [reason] = _capacity(_state(16, 8))
    with translation.override("zh-hans"):
        shown = blocker_guidance(reason.as_blocker(), None)
    assert "16" in shown["message_text"]
    assert "预算" in shown["message_text"]
    assert "预算" in shown["todo"]
    assert shown["anchor"] == "capacity"
