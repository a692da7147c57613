"""A measured run outside its plan's interval is flagged to engineering (issue 47): a startup log recorded for the
request whose KV pool or KV tokens fall outside the plan's 80% interval is a reason engineering judges (and its
signature of the evidence clears), with the figure and the interval; a log inside, or of another layout, is not."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from governance.deployments.readiness import ReadinessState, Signature, blocks_signing, readiness

NOW = datetime(2026, 12, 5, tzinfo=UTC)
DIGEST = "d" * 64
GIB = 1 << 30
RESULT: dict[str, Any] = {
    "verdict": "fits",
    "notes": [],
    "parallel": {"tp": 2, "pp": 1},
    "intervals": {
        "memory_per_gpu.kv_cache": {"low": 60 * GIB, "high": 61 * GIB, "coverage": 0.8, "n": 14, "basis": "…"},
        "kv_cache.capacity_tokens": {"low": 480_000, "high": 490_000, "coverage": 0.8, "n": 14, "basis": "…"},
    },
}


def _measured(kv_gib: float, tokens: int, tp: int = 2) -> dict[str, Any]:
    return {
        "log": "0c3d9a8e-0000-4000-8000-000000000001",
        "cluster": "gpu-a",
        "engine": "vllm",
        "engine_version": "0.11.0",
        "tp": tp,
        "pp": 1,
        "kv_pool_bytes": int(kv_gib * GIB),
        "kv_capacity_tokens": tokens,
    }


def _state(*measured: dict[str, Any], **signatures: str) -> ReadinessState:
    plan: dict[str, Any] = {"status": "done", "fits": True, "result": RESULT}
    if measured:
        plan["measured"] = list(measured)
    return ReadinessState(
        evidence={"capacity_plan": plan},
        evidence_digest=DIGEST,
        signatures={role: Signature(role, digest) for role, digest in signatures.items()},
    )


def _capacity(state: ReadinessState) -> list[Any]:
    return [reason for reason in readiness(state, NOW) if reason.code.startswith("capacity.")]


def test_a_measured_figure_outside_the_interval_is_engineerings_call() -> None:
    [reason] = _capacity(_state(_measured(55.5, 485_000)))
    assert reason.code == "capacity.outside_interval"
    assert reason.role == "engineering"
    assert reason.as_blocker()["severity"] == "review"
    assert "KV pool per GPU 55.50 GiB measured" in reason.message
    assert "80% interval 60.00\u201361.00 GiB" in reason.message
    assert "vllm 0.11.0 on cluster gpu-a" in reason.message
    assert "KV tokens" not in reason.message  # that one is inside its interval
    assert [
        r for r in blocks_signing(readiness(_state(_measured(55.5, 485_000)), NOW)) if r.code.startswith("capacity.")
    ] == []
    assert _capacity(_state(_measured(55.5, 485_000), engineering=DIGEST)) == []
    [tokens] = _capacity(_state(_measured(60.5, 400_000)))
    assert "KV tokens 400,000 measured, 80% interval 480,000\u2013490,000" in tokens.message


def test_a_log_inside_its_interval_or_of_another_layout_is_not_flagged() -> None:
    assert _capacity(_state(_measured(60.5, 485_000))) == []
    assert _capacity(_state(_measured(10.0, 1, tp=4))) == []
    assert _capacity(_state()) == []
