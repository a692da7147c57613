"""A plan calibrated by the team's own canary and fleet measurements (issue 47): with three or more comparable
measurements of TPOT (or TTFT) the plan's figure is the catalog's times their median measured / planned ratio,
its interval is their spread (never narrower than the stated noise), tokens/s follows TPOT, and the plan says so;
with fewer, or with measurements of another engine, release line, GPU or replica shape, the catalog stands."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from planner import intervals
from planner.measured import LATENCY_NOISE, MIN_MEASUREMENTS, LatencyRatio, MeasuredEvidence
from planner.plan import PlanRequest, plan

# One H100 per replica (llama-3.1-8b fits one): the measurements below are of that shape unless a test says.
BASE = PlanRequest(model="llama-3.1-8b", precision="bf16", gpu="h100-80g", max_model_len=8192, concurrency=8, tp=1)


def _evidence(tpot: tuple[float, ...], ttft: tuple[float, ...] = (), gpus: int = 1, **changes: Any) -> MeasuredEvidence:
    fields: dict[str, Any] = {
        "where": "cluster gpu-a",
        "gpu": "h100-80g",
        "engine": "vllm",
        "release_line": "0.11",
        "ratios": (
            *(LatencyRatio("tpot_ms", r, gpus) for r in tpot),
            *(LatencyRatio("ttft_ms", r, gpus) for r in ttft),
        ),
    }
    fields.update(changes)
    return MeasuredEvidence(**fields)


def _planned(evidence: MeasuredEvidence | None) -> dict[str, Any]:
    return plan(dataclasses.replace(BASE, measured=evidence)).as_contract()


def _width(contract: dict[str, Any], path: str) -> float:
    entry = contract["intervals"][path]
    return float(entry["high"] - entry["low"])


def test_three_canary_measurements_correct_tpot_narrow_its_interval_and_say_so() -> None:
    default = _planned(None)
    team = _planned(_evidence((1.10, 1.20, 1.15)))
    # TPOT is the catalog's times the median ratio, tokens/s divided by it; TTFT (not measured) is the catalog's.
    assert team["throughput"]["tpot_ms"] == pytest.approx(default["throughput"]["tpot_ms"] * 1.15, abs=0.011)
    assert team["throughput"]["decode_tokens_per_s"] == pytest.approx(
        default["throughput"]["decode_tokens_per_s"] / 1.15, abs=0.11
    )
    assert team["throughput"]["ttft_ms"] == default["throughput"]["ttft_ms"]
    assert team["throughput_estimate"]["team_correction"] == {"tpot_ms": 1.15}
    assert "team_correction" not in default["throughput_estimate"]
    # The interval is the ratios' spread around their median (1.10/1.15 .. 1.20/1.15: about ±4.3%), floored at
    # the stated noise (±5%): far narrower than the catalog's held-out residuals.
    tpot = team["intervals"]["throughput.tpot_ms"]
    figure = team["throughput"]["tpot_ms"]
    assert tpot["n"] == 3
    assert tpot["low"] == pytest.approx(figure * (1 - LATENCY_NOISE["tpot_ms"]), abs=0.011)
    assert tpot["high"] == pytest.approx(figure * (1 + LATENCY_NOISE["tpot_ms"]), abs=0.011)
    assert "3 of your canary measurements on cluster gpu-a" in tpot["basis"]
    for path in ("throughput.tpot_ms", "throughput.decode_tokens_per_s"):
        assert _width(team, path) < _width(default, path), path
        assert team["intervals"][path]["basis"] != default["intervals"][path]["basis"], path
    assert team["intervals"]["throughput.ttft_ms"] == default["intervals"]["throughput.ttft_ms"]
    # The memory figures are not the canary's: unchanged.
    assert team["memory_per_gpu"] == default["memory_per_gpu"]
    for path in ("memory_per_gpu.kv_cache", "kv_cache.capacity_tokens", "max_concurrency", "memory_per_gpu.weights"):
        assert team["intervals"][path] == default["intervals"][path], path
    [note] = [n for n in team["notes"] if "canary measurements" in n]
    assert note.startswith("TPOT from 3 of your canary measurements on cluster gpu-a (vllm 0.11, h100-80g, one GPU")
    assert "1.15x the catalog's plan (1.10x to 1.20x)" in note
    assert not any("canary measurements" in n for n in default["notes"])
    assert list(intervals.check_contract(team)) == []


def test_a_wide_spread_of_measurements_widens_the_interval_rather_than_pretending() -> None:
    team = _planned(_evidence((1.0, 1.0, 1.0, 1.0), ttft=(0.6, 1.0, 1.5)))
    # TPOT measured as planned every time: the floor, not a zero-width interval.
    tpot = team["intervals"]["throughput.tpot_ms"]
    assert tpot["low"] < team["throughput"]["tpot_ms"] < tpot["high"]
    assert team["throughput_estimate"]["team_correction"] == {"tpot_ms": 1.0, "ttft_ms": 1.0}
    # TTFT's ratios range 0.6..1.5: the interval holds all of them.
    ttft = team["intervals"]["throughput.ttft_ms"]
    assert ttft["low"] <= team["throughput"]["ttft_ms"] * 0.6 + 0.1
    assert ttft["high"] >= team["throughput"]["ttft_ms"] * 1.5 - 0.1
    assert any(n.startswith("TTFT from 3 of your canary measurements") for n in team["notes"])
    assert list(intervals.check_contract(team)) == []


def test_fewer_measurements_than_the_minimum_leave_the_catalog_standing_and_say_so() -> None:
    assert MIN_MEASUREMENTS == 3  # the startup logs' minimum
    default = _planned(None)
    team = _planned(_evidence((1.10, 1.20)))
    assert team["throughput"] == default["throughput"]
    assert team["throughput_estimate"] == default["throughput_estimate"]
    assert team["intervals"] == default["intervals"]
    [note] = [n for n in team["notes"] if "canary measurements" in n]
    assert note.startswith("TPOT: 2 of your canary measurements on cluster gpu-a")
    assert "fewer than 3: the catalog's TPOT and its interval stand" in note


@pytest.mark.parametrize(
    "change",
    [{"engine": "sglang"}, {"release_line": "0.10"}, {"gpu": "a100-80g"}, {"gpus": 2}],
    ids=["other-engine", "other-release-line", "other-gpu", "multi-gpu-replicas"],
)
def test_measurements_of_another_engine_release_gpu_or_replica_shape_are_not_used(change: dict[str, Any]) -> None:
    default = _planned(None)
    team = _planned(_evidence((1.10, 1.20, 1.15), ttft=(0.8, 0.9, 0.85), **change))
    assert team["throughput"] == default["throughput"]
    assert team["intervals"] == default["intervals"]
    assert not any("canary measurements" in n for n in team["notes"])


def test_multi_gpu_measurements_correct_a_multi_gpu_plan() -> None:
    wide = dataclasses.replace(BASE, tp=2)
    default = plan(wide).as_contract()
    team = plan(dataclasses.replace(wide, measured=_evidence((0.9, 0.8, 0.85), gpus=4))).as_contract()
    assert team["throughput"]["tpot_ms"] == pytest.approx(default["throughput"]["tpot_ms"] * 0.85, abs=0.011)
    assert any("several GPUs per replica" in n for n in team["notes"])


def test_measured_evidence_is_validated_naming_the_field() -> None:
    with pytest.raises(ValueError, match="release_line"):
        _evidence((1.0,), release_line="latest")
    with pytest.raises(ValueError, match="ratio"):
        LatencyRatio("tpot_ms", 0.0, 1)
    with pytest.raises(ValueError, match="ratio"):
        LatencyRatio("tpot_ms", float("nan"), 1)
    with pytest.raises(ValueError, match="figure"):
        LatencyRatio("kv_cache_usage", 1.0, 1)
    with pytest.raises(ValueError, match="gpus_per_replica"):
        LatencyRatio("tpot_ms", 1.0, 0)
