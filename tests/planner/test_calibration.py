"""Calibration profiles: schema, interpolation, and the planner preferring measured figures over its
defaults (saying which profile it used and which figures fell back)."""

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from planner.calibrate import profile as calibration
from planner.plan import PlanRequest, plan
from tests.planner.cli import planner_cli

ROOT = Path(__file__).resolve().parents[2]
COMMITTED = ROOT / "planner" / "catalog" / "calibration" / "h200-2026-11-29-torch2.11-cu130.json"


@pytest.fixture(scope="module")
def raw() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(COMMITTED.read_text())
    return data


def _plan(profile: calibration.CalibrationProfile | None, precision: str = "bf16", **extra: Any) -> Any:
    return plan(
        PlanRequest(
            model="qwen3-30b-a3b",
            precision=precision,
            gpu="h200",
            tp=1,
            concurrency=8,
            max_model_len=4096,
            input_len=1024,
            output_len=1024,
            calibration=profile,
            **extra,
        )
    )


def test_committed_h200_profile_has_versions_and_every_shape(raw: dict[str, Any]) -> None:
    loaded = calibration.load(COMMITTED)
    assert loaded.gpu_name == "NVIDIA H200"
    assert loaded.gpu_key == "h200"
    assert {"driver", "cuda", "torch", "nccl"} <= set(loaded.versions)
    assert all(loaded.versions[key] for key in ("driver", "cuda", "torch"))
    points = raw["gemm"]
    assert {p["precision"] for p in points} == {"bf16", "fp8", "int8", "w4a16", "w4a8"}
    assert {p["m"] for p in points} >= {1, 2, 4, 8, 16, 32, 64, 128, 256, 1024, 2048, 4096, 8192, 16384}
    assert {p["shape"] for p in points} >= {"attn_qkv", "attn_o", "expert_gate_up", "expert_down"}
    assert {p["op"] for p in raw["collectives"]} == {"all_reduce", "all_to_all"}
    assert raw["memory"]["read_gb_per_s"] > 1000
    assert raw["failures"] == []


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda d: d.pop("versions"), "lacks 'versions'"),
        (lambda d: d.update(schema="other/9"), "schema must be"),
        (lambda d: d["gemm"][0].pop("time_us"), r"gemm\[0\] lacks time_us"),
        (lambda d: d["gemm"][3].update(time_us=0), r"gemm\[3\].time_us must be positive"),
        (lambda d: d["moe"][0].update(precision="fp6"), r"moe\[0\].precision 'fp6' is unknown"),
        (lambda d: d["gpu"].pop("name"), "gpu.name is required"),
    ],
)
def test_schema_errors_name_the_field(raw: dict[str, Any], mutate: Any, message: str) -> None:
    data = copy.deepcopy(raw)
    mutate(data)
    with pytest.raises(ValueError, match=message):
        calibration.CalibrationProfile.from_dict(data)


def test_interpolation_is_linear_in_log2_m_and_clamped() -> None:
    points = [(1.0, 0.2), (4.0, 0.6), (16.0, 0.8)]
    assert calibration.interpolate(points, 2) == pytest.approx(0.4)
    assert calibration.interpolate(points, 8) == pytest.approx(0.7)
    assert calibration.interpolate(points, 0.5) == pytest.approx(0.2)
    assert calibration.interpolate(points, 1024) == pytest.approx(0.8)


def test_efficiency_is_taken_from_the_nearest_measured_shape(raw: dict[str, Any]) -> None:
    from planner.specs import gpu

    loaded = calibration.CalibrationProfile.from_dict(raw)
    h200 = gpu("h200")
    attention = loaded.gemm_efficiency("bf16", 64, 5120, 2048, h200)
    expert = loaded.gemm_efficiency("bf16", 64, 1536, 2048, h200, experts=True)
    assert attention is not None
    assert expert is not None
    assert attention != expert  # different measured shapes, different efficiencies
    decode, prefill = (
        loaded.gemm_efficiency("fp8", 1, 5120, 2048, h200),
        loaded.gemm_efficiency("fp8", 8192, 5120, 2048, h200),
    )
    assert decode is not None
    assert prefill is not None
    assert 0 < decode < 1
    assert 0 < prefill <= 1
    assert loaded.gemm_efficiency("nvfp4", 8, 5120, 2048, h200) is None  # not measured: caller falls back


def test_measured_figures_are_preferred_over_defaults(raw: dict[str, Any]) -> None:
    slow = copy.deepcopy(raw)
    for point in slow["gemm"] + slow["moe"]:
        point["time_us"] *= 10  # a GPU ten times slower than measured
    default = _plan(None).throughput
    measured = _plan(calibration.CalibrationProfile.from_dict(raw, name="h200.json")).throughput
    slowed = _plan(calibration.CalibrationProfile.from_dict(slow, name="slow.json")).throughput
    assert measured.tpot_ms != pytest.approx(default.tpot_ms, rel=0.01)
    assert slowed.tpot_ms > 3 * measured.tpot_ms
    assert measured.calibration is not None
    assert "h200.json" in measured.calibration
    assert "torch 2.11" in measured.calibration
    assert default.calibration is None


def test_plan_names_the_figures_that_fell_back(raw: dict[str, Any]) -> None:
    partial = copy.deepcopy(raw)
    partial["gemm"] = [p for p in partial["gemm"] if p["precision"] != "fp8"]
    partial["collectives"] = []
    result = plan(
        PlanRequest(
            model="qwen3-30b-a3b",
            precision="fp8",
            gpu="h200",
            tp=2,
            concurrency=8,
            max_model_len=4096,
            calibration=calibration.CalibrationProfile.from_dict(partial, name="partial.json"),
        )
    )
    estimate = result.as_contract()["throughput_estimate"]
    assert "dense GEMM fp8" in estimate["fallbacks"]
    assert "all_reduce at 2 GPUs" in estimate["fallbacks"]
    assert "partial.json" in estimate["calibration"]
    assert any("partial.json" in note and "defaults for" in note for note in result.notes)


def test_a_profile_of_another_gpu_is_refused(raw: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="calibration: profile was measured on h200, not b200"):
        plan(
            PlanRequest(
                model="qwen3-30b-a3b",
                precision="bf16",
                gpu="b200",
                calibration=calibration.CalibrationProfile.from_dict(raw),
            )
        )


def test_cli_takes_a_calibration_file() -> None:
    done = planner_cli(
        *("plan", "--model", "qwen3-30b-a3b", "--precision", "w4a8", "--gpu", "h200", "--tp", "1"),
        *("--max-model-len", "4096", "--input-len", "2048", "--output-len", "256"),
        *("--calibration", str(COMMITTED), "--format", "json"),
    )
    assert done.returncode == 0, done.stderr
    estimate = json.loads(done.stdout)["throughput_estimate"]
    assert COMMITTED.name in estimate["calibration"]
    assert estimate["inputs"]["input_len"] == 2048
    assert estimate["inputs"]["output_len"] == 256
    bad = planner_cli(
        *("plan", "--model", "qwen3-30b-a3b", "--precision", "bf16", "--gpu", "h200"),
        *("--calibration", "/nonexistent.json"),
    )
    assert bad.returncode == 2
    assert "--calibration" in bad.stderr


def test_a_profile_without_the_formats_expert_gemm_still_says_the_path_stands_on_one_source(
    raw: dict[str, Any],
) -> None:
    """A reviewer's case: a profile of the MI300X with no MXFP4 grouped-GEMM point falls back to the catalog's
    MXFP4 path on that GPU, which stands on one source; a profile hid that before (it was reported only
    without a profile)."""
    profile = copy.deepcopy(raw)
    profile["gpu"] = {**profile["gpu"], "catalog_key": "mi300x", "name": "AMD Instinct MI300X", "count": 1}
    request: dict[str, Any] = {
        "model": "gpt-oss-120b",
        "precision": "mxfp4",
        "gpu": "mi300x",
        "tp": 1,
        "concurrency": 64,
    }
    result = plan(PlanRequest(**request, calibration=calibration.CalibrationProfile.from_dict(profile, name="mi.json")))
    estimate = result.as_contract()["throughput_estimate"]
    assert "expert GEMM mxfp4" in estimate["fallbacks"]
    assert any(line.startswith("mxfp4 on mi300x: ") for line in estimate["single_source"])
    bf16 = plan(
        PlanRequest(
            **{**request, "model": "qwen3-30b-a3b", "precision": "bf16"},
            calibration=calibration.CalibrationProfile.from_dict(profile, name="mi.json"),
        )
    )
    assert "single_source" not in bf16.as_contract()["throughput_estimate"]
