"""A plan calibrated by the team's own startup logs (issue 47): the cluster's logs of one engine release line
correct the KV reserve, the plan says so, and its KV intervals shrink to the spread of those logs' residuals,
never narrower than measurement noise; an engine release older than every profile is planned, widely."""

from __future__ import annotations

import dataclasses

import pytest

from planner import intervals
from planner.engines import engine_profile
from planner.intervals import MEASUREMENT_NOISE_BYTES, MIN_TEAM_LOGS, TeamEvidence
from planner.plan import PlanRequest, plan

GIB = 1 << 30
BASE = PlanRequest(model="llama-3.1-8b", precision="bf16", gpu="h100-80g", max_model_len=8192, concurrency=8)


def _evidence(residuals_gib: tuple[float, ...], **changes: object) -> TeamEvidence:
    fields: dict[str, object] = {
        "where": "cluster gpu-a",
        "gpu": "h100-80g",
        "engine": "vllm",
        "release_line": "0.11",
        "kv_pool_residuals_bytes": tuple(int(r * GIB) for r in residuals_gib),
        "weights_ratios": (1.0, 1.004, 0.998)[: len(residuals_gib)],
        "replica_gpus": (1,) * len(residuals_gib),
        "weights_replica_gpus": (1,) * min(3, len(residuals_gib)),
    }
    fields.update(changes)
    return TeamEvidence(**fields)  # type: ignore[arg-type]


def _width(contract: dict[str, object], path: str) -> float:
    entry = contract["intervals"][path]  # type: ignore[index]
    return float(entry["high"] - entry["low"])


def test_three_startup_logs_correct_the_reserve_narrow_the_kv_intervals_and_say_so() -> None:
    default = plan(BASE).as_contract()
    team = plan(dataclasses.replace(BASE, evidence=_evidence((0.40, 0.50, 0.45)))).as_contract()
    # The reserve follows the logs: their pools ran a median 0.45 GiB above the catalog's plan.
    shift = team["memory_per_gpu"]["kv_cache"] - default["memory_per_gpu"]["kv_cache"]
    assert abs(shift - 0.45 * GIB) < 2
    assert team["memory_per_gpu"]["overhead"] < default["memory_per_gpu"]["overhead"]
    # The interval is the logs' spread around their median (-0.05..+0.05 GiB), floored at the noise.
    pool = team["intervals"]["memory_per_gpu.kv_cache"]
    assert pool["n"] == 3
    assert pool["low"] == team["memory_per_gpu"]["kv_cache"] - MEASUREMENT_NOISE_BYTES
    assert pool["high"] == team["memory_per_gpu"]["kv_cache"] + MEASUREMENT_NOISE_BYTES
    assert "3 of your startup logs on cluster gpu-a" in pool["basis"]
    for path in ("memory_per_gpu.kv_cache", "kv_cache.capacity_tokens", "max_concurrency", "memory_per_gpu.weights"):
        assert _width(team, path) < _width(default, path), path
    # Throughput figures are not measured by a startup log: their intervals stay the catalog's.
    assert team["intervals"]["throughput.tpot_ms"]["basis"] == default["intervals"]["throughput.tpot_ms"]["basis"]
    assert any(note.startswith("KV reserve from 3 of your startup logs on cluster gpu-a") for note in team["notes"])
    assert not any("your startup logs" in note for note in default["notes"])
    assert list(intervals.check_contract(team)) == []  # each figure inside its interval, every field there


def test_a_wide_team_spread_widens_rather_than_pretending() -> None:
    team = plan(dataclasses.replace(BASE, evidence=_evidence((-1.0, 0.0, 1.0)))).as_contract()
    pool = team["intervals"]["memory_per_gpu.kv_cache"]
    assert pool["low"] <= team["memory_per_gpu"]["kv_cache"] - GIB
    assert pool["high"] >= team["memory_per_gpu"]["kv_cache"] + GIB


def test_fewer_logs_than_the_minimum_leave_the_catalog_standing_and_say_so() -> None:
    default = plan(BASE).as_contract()
    team = plan(dataclasses.replace(BASE, evidence=_evidence((0.40, 0.50)))).as_contract()
    assert MIN_TEAM_LOGS == 3
    assert team["memory_per_gpu"] == default["memory_per_gpu"]
    assert team["intervals"] == default["intervals"]
    assert any("2 of your startup logs on cluster gpu-a" in note and "fewer than 3" in note for note in team["notes"])


@pytest.mark.parametrize(
    "change",
    [{"engine": "sglang"}, {"release_line": "0.10"}, {"gpu": "a100-80g"}],
    ids=["other-engine", "other-release-line", "other-gpu"],
)
def test_evidence_of_another_engine_release_or_gpu_is_not_used(change: dict[str, str]) -> None:
    default = plan(BASE).as_contract()
    team = plan(dataclasses.replace(BASE, evidence=_evidence((0.40, 0.50, 0.45), **change))).as_contract()
    assert team["memory_per_gpu"] == default["memory_per_gpu"]
    assert team["intervals"] == default["intervals"]


def test_team_evidence_is_validated_naming_the_field() -> None:
    with pytest.raises(ValueError, match="release_line"):
        _evidence((0.1, 0.2, 0.3), release_line="latest")
    with pytest.raises(ValueError, match="weights_ratios"):
        _evidence((0.1, 0.2, 0.3), weights_ratios=(0.0, 1.0, 1.0))


def test_an_engine_release_older_than_every_profile_is_planned_with_the_oldest_wide_and_noted() -> None:
    profile = engine_profile("vllm", "0.2.4")
    assert profile.predates_profiles == "0.5"
    assert profile.version == "0.2.4"
    assert profile.generation == engine_profile("vllm", "0.5.0").generation
    old = plan(dataclasses.replace(BASE, engine_version="0.2.4")).as_contract()
    oldest = plan(dataclasses.replace(BASE, engine_version="0.5.0")).as_contract()
    assert old["engine"]["version"] == "0.2.4"
    assert old["memory_per_gpu"] == oldest["memory_per_gpu"]
    assert any("older than every" in note and "0.5" in note for note in old["notes"])
    for path in intervals.PATHS:
        assert _width(old, path) >= _width(oldest, path), path
    assert _width(old, "throughput.tpot_ms") > _width(oldest, "throughput.tpot_ms")
    assert "older than every profile" in old["intervals"]["throughput.tpot_ms"]["basis"]
    assert list(intervals.check_contract(old)) == []
    with pytest.raises(ValueError, match="engine_version"):
        engine_profile("vllm", "9.0")  # newer than every profile: still refused


def test_logs_of_one_gpu_replicas_do_not_correct_a_multi_gpu_plan() -> None:
    """Three one-GPU logs whose pools ran 1 GiB over the plan took 1 GiB off a TP2 replica's reserve, most of
    it NCCL and all-reduce buffers a one-GPU engine never allocates: a plan short of a sequence became `fits`."""
    tp2 = PlanRequest(
        model="llama-3.1-70b", precision="fp8", gpu="h100-80g", tp=2, dp=1, max_model_len=32768, concurrency=7
    )
    catalog = plan(tp2).as_contract()
    assert catalog["verdict"] == "does_not_fit"
    one_gpu_logs = _evidence((1.0, 1.0, 1.0))
    taken = plan(dataclasses.replace(tp2, evidence=one_gpu_logs)).as_contract()
    assert taken["verdict"] == "does_not_fit"
    assert taken["memory_per_gpu"] == catalog["memory_per_gpu"]
    assert taken["intervals"]["memory_per_gpu.kv_cache"] == catalog["intervals"]["memory_per_gpu.kv_cache"]
    assert any("none of several GPUs per replica" in note for note in taken["notes"]), taken["notes"]
    # logs of TP2 replicas are of its shape: they correct it, and say which shape they are
    tp2_logs = _evidence((1.0, 1.0, 1.0), replica_gpus=(2, 2, 2), weights_replica_gpus=(2, 2, 2))
    corrected = plan(dataclasses.replace(tp2, evidence=tp2_logs)).as_contract()
    assert corrected["memory_per_gpu"]["kv_cache"] > catalog["memory_per_gpu"]["kv_cache"] + 0.9 * GIB
    assert any("several GPUs per replica): their KV pools ran +1.00 GiB" in note for note in corrected["notes"])
    # and a one-GPU plan still takes the one-GPU logs
    one = plan(dataclasses.replace(BASE, evidence=one_gpu_logs)).as_contract()
    assert any(note.startswith("KV reserve from 3 of your startup logs") for note in one["notes"])
