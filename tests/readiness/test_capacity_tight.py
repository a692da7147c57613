"""A plan that fits at its central figures only (`verdict: tight`, issue 47) is engineering's call: a reason
with the plan's margin that engineering's signature of the current evidence clears, neither a silent pass
nor a blocker of signing."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from governance.deployments.readiness import ReadinessState, Signature, blocks_signing, readiness

NOW = datetime(2026, 12, 5, tzinfo=UTC)
DIGEST = "d" * 64
TIGHT = "Tight: it fits at the central KV pool (5.87 GiB per GPU, +0.14 GiB of margin) but not at …"


def _state(verdict: str, fits: bool = True, **signatures: str) -> ReadinessState:
    result: dict[str, Any] = {"verdict": verdict, "notes": ["Chosen: tp=1", *([TIGHT] if verdict == "tight" else [])]}
    return ReadinessState(
        evidence={"capacity_plan": {"status": "done", "fits": fits, "result": result}},
        evidence_digest=DIGEST,
        signatures={role: Signature(role, digest) for role, digest in signatures.items()},
    )


def _capacity(state: ReadinessState) -> list[Any]:
    return [reason for reason in readiness(state, NOW) if reason.code.startswith("capacity.")]


def test_a_tight_plan_is_engineerings_call_with_its_margin() -> None:
    [reason] = _capacity(_state("tight"))
    assert reason.code == "capacity.tight"
    assert reason.role == "engineering"
    assert reason.message == TIGHT  # the margin, as the plan states it
    assert reason.as_blocker()["severity"] == "review"
    # Not a blocker: a reviewer may sign with it listed ...
    assert [r for r in blocks_signing(readiness(_state("tight"), NOW)) if r.code.startswith("capacity.")] == []
    # ... and engineering's signature of this evidence clears it; legal's does not, nor a stale one.
    assert _capacity(_state("tight", engineering=DIGEST)) == []
    assert [r.code for r in _capacity(_state("tight", legal=DIGEST))] == ["capacity.tight"]
    assert [r.code for r in _capacity(_state("tight", engineering="e" * 64))] == ["capacity.tight"]


def test_fits_passes_and_does_not_fit_blocks_as_before() -> None:
    assert _capacity(_state("fits")) == []
    assert _capacity(_state("fits", engineering=DIGEST)) == []
    [reason] = _capacity(_state("does_not_fit", fits=False, engineering=DIGEST))
    assert reason.code == "capacity.does_not_fit"
    assert reason.as_blocker()["severity"] == "blocker"
    assert reason in blocks_signing(readiness(_state("does_not_fit", fits=False), NOW))
    # A plan stored before verdicts existed reads as it did.
    legacy = ReadinessState(
        evidence={"capacity_plan": {"status": "done", "fits": True, "result": {}}},
        evidence_digest=DIGEST,
        signatures={},
    )
    assert _capacity(legacy) == []
