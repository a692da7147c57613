"""Measured collectives: the calibration job's all-reduce / all-to-all step (torch.distributed, gloo on 2
processes here, NCCL on a GPU node), the profile's points, and the planner's decode model reading them in
place of the catalog's assumed figures at the rank count they were measured at."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from planner.calibrate import profile as calibration
from planner.calibrate.ladder import Settings, message_span, wanted_ranks
from planner.calibrate.profile import CalibrationProfile, bus_factor
from planner.efficiency import Rates, efficiency_catalog, substituted
from planner.plan import PlanRequest, plan
from planner.specs import gpu, model, precision
from tests.planner.requests import PlanArgs, plan_request

ROOT = Path(__file__).resolve().parents[2]
COMMITTED = ROOT / "planner" / "catalog" / "calibration" / "h200-2026-11-29-torch2.11-cu130.json"
# The held-out-style case of issue 48: DeepSeek-V3 FP8 on 8 x H200, TP 8, 4 clients, vLLM.
DSV3_TP8: PlanArgs = {
    "model": "deepseek-v3",
    "precision": "fp8",
    "gpu": "h200",
    "tp": 8,
    "concurrency": 4,
    "engine": "vllm",
    "input_len": 1024,
    "output_len": 1024,
}


def _collectives_only(points: list[dict[str, Any]]) -> dict[str, Any]:
    """A profile that measured collectives and nothing else: every other figure falls back to the catalog's."""
    data: dict[str, Any] = json.loads(COMMITTED.read_text())
    data.update(gemm=[], moe=[], memory={}, launch={}, collectives=points)
    return data


def _catalog_s(op: str, nbytes: float, ranks: int) -> float:
    return Rates(gpu("h200"), precision("fp8"), None).collective_s(op, nbytes, ranks)


def _points(op: str, ranks: int, time_s: Any, sizes: list[int], timing: str = "eager") -> list[dict[str, Any]]:
    return [
        {
            "op": op,
            "ranks": ranks,
            "bytes": size,
            "time_us": time_s(size) * 1e6,
            "p90_us": time_s(size) * 1e6 * 1.1,
            "bus_gb_per_s": size / time_s(size) / 1e9 * bus_factor(op, ranks),
            "timing": timing,
            "backend": "nccl",
        }
        for size in sizes
    ]


LADDER = [4096 << i for i in range(17)]  # 4 KiB ... 256 MiB


# -- the job's pure parts ------------------------------------------------------------------------------
def test_ladder_is_powers_of_two_with_the_decode_messages_inside_the_span() -> None:
    from planner.calibrate.ladder import ladder

    sizes = ladder(4 << 10, 256 << 20, [7168 * 2, 4 * 7168 * 2, 512 << 20])
    powers = [s for s in sizes if s & (s - 1) == 0]
    assert powers == LADDER
    assert set(sizes) - set(powers) == {7168 * 2, 4 * 7168 * 2}  # 512 MiB is outside the span
    assert sizes == sorted(sizes)
    with pytest.raises(ValueError, match="collective_bytes"):
        ladder(0, 4096)


def test_percentile_is_nearest_rank_and_point_follows_the_nccl_tests_convention() -> None:
    from planner.calibrate.ladder import percentile, point

    samples = [float(s) for s in range(1, 11)]  # 1 ... 10 s
    assert percentile(samples, 90) == 9
    assert percentile(samples, 50) == 5
    assert percentile([3.0], 90) == 3
    entry = point("all_reduce", 8, 1 << 20, [1e-4] * 4 + [2e-4], timing="eager", backend="nccl", ops=4)
    assert entry["time_us"] == pytest.approx(100)
    assert entry["p90_us"] == pytest.approx(200)
    assert entry["alg_gb_per_s"] == pytest.approx((1 << 20) / 1e-4 / 1e9, rel=1e-3)
    assert entry["bus_gb_per_s"] == pytest.approx(entry["alg_gb_per_s"] * 2 * 7 / 8, rel=1e-3)
    a2a = point("all_to_all", 8, 1 << 20, [1e-4], timing="eager", backend="nccl", ops=1)
    assert a2a["bus_gb_per_s"] == pytest.approx(a2a["alg_gb_per_s"] * 7 / 8, rel=1e-3)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: wanted_ranks([1, 2], "cuda"), "collective_ranks: must be a list of integers of at least 2"),
        (lambda: wanted_ranks("8", "cuda"), "collective_ranks"),
        (lambda: message_span([65536, 4096], "cpu"), "collective_bytes: must be"),
        (lambda: message_span([4096], "cpu"), "collective_bytes"),
        (lambda: Settings.for_device("cpu", reps=0), "collective_reps: must be an integer of at least 1"),
        (lambda: Settings.for_device("cuda", warmup=-1), "collective_warmup"),
    ],
)
def test_spec_errors_name_the_field(call: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        call()


def test_spec_defaults_per_device() -> None:
    assert wanted_ranks(None, "cuda") == [2, 4, 8]
    assert wanted_ranks(None, "cpu") == [2]
    assert wanted_ranks([8, 2, 8], "cuda") == [2, 8]
    assert message_span(None, "cuda") == (4 << 10, 256 << 20)
    assert message_span(None, "cpu") == (4 << 10, 64 << 10)
    assert Settings.for_device("cuda") == Settings("nccl", 5, 20)
    assert Settings.for_device("cpu", reps=3) == Settings("gloo", 2, 3)


# -- the profile's reading -----------------------------------------------------------------------------
def test_profile_reads_the_rank_count_asked_for_linear_in_bytes() -> None:
    def linear(size: float) -> float:
        return 20e-6 + size / 300e9

    points = _points("all_reduce", 8, linear, LADDER) + _points("all_reduce", 2, lambda s: 1.0, LADDER)
    loaded = CalibrationProfile.from_dict(_collectives_only(points))
    between = 3 * 4096  # between two measured sizes: on the line through them
    timed = loaded.collective_s("all_reduce", between, 8)
    assert timed is not None
    assert timed.seconds == pytest.approx(linear(between))
    assert timed.label("all_reduce", 8) == "all_reduce at 8 GPUs (nccl, eager)"
    below = loaded.collective_s("all_reduce", 100, 8)
    assert below is not None
    assert below.seconds == pytest.approx(linear(4096))  # the smallest measured: a latency floor
    above = loaded.collective_s("all_reduce", 512 << 20, 8)
    assert above is not None
    assert above.seconds == pytest.approx(2 * linear(256 << 20))  # at the largest one's bandwidth
    assert loaded.collective_s("all_reduce", 4096, 4) is None  # not measured at 4 ranks
    assert loaded.collective_s("all_to_all", 4096, 8) is None


def test_graph_timed_points_are_preferred_where_they_were_measured() -> None:
    small = [s for s in LADDER if s <= 8 << 20]
    points = _points("all_reduce", 8, lambda s: 50e-6, LADDER) + _points(
        "all_reduce", 8, lambda s: 15e-6, small, timing="cuda_graph"
    )
    loaded = CalibrationProfile.from_dict(_collectives_only(points))
    graphed = loaded.collective_s("all_reduce", 64 << 10, 8)
    eager = loaded.collective_s("all_reduce", 64 << 20, 8)
    assert graphed is not None
    assert eager is not None
    assert (graphed.seconds, graphed.timing) == (pytest.approx(15e-6), "cuda_graph")
    assert (eager.seconds, eager.timing) == (pytest.approx(50e-6), "eager")


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda p: p.update(op="broadcast"), r"collectives\[0\].op 'broadcast' is unknown"),
        (lambda p: p.update(ranks=1), r"collectives\[0\].ranks must be an integer of at least 2"),
        (lambda p: p.update(bytes=-4), r"collectives\[0\].bytes must be a positive integer"),
        (lambda p: p.update(p90_us=p["time_us"] / 2), r"collectives\[0\].p90_us must not be below"),
        (lambda p: p.pop("bus_gb_per_s"), r"collectives\[0\] lacks bus_gb_per_s"),
    ],
)
def test_collective_schema_errors_name_the_field(mutate: Any, message: str) -> None:
    points = _points("all_reduce", 8, lambda s: 1e-5, [4096])
    mutate(points[0])
    with pytest.raises(ValueError, match=message):
        CalibrationProfile.from_dict(_collectives_only(points))


# -- the planner ---------------------------------------------------------------------------------------
def test_measured_all_reduce_replaces_the_catalogs_at_its_rank_count() -> None:
    """DeepSeek-V3 at TP 8: a profile whose 8-rank all-reduce takes the catalog's time plus 50 us at every
    size adds 50 us to each of a decode step's two all-reduces per layer, and nothing else."""
    extra = 50e-6
    points = _points("all_reduce", 8, lambda s: _catalog_s("all_reduce", s, 8) + extra, LADDER)
    measured = CalibrationProfile.from_dict(_collectives_only(points), name="dsv3-tp8.json")
    before = plan(plan_request(DSV3_TP8)).throughput
    after_result = plan(plan_request(DSV3_TP8, calibration=measured))
    after = after_result.throughput
    layers = model("deepseek-v3").num_layers
    added_ms = after.breakdown_ms["collectives"] - before.breakdown_ms["collectives"]
    assert added_ms == pytest.approx(2 * layers * extra * 1e3, rel=1e-3)
    assert after.breakdown_ms["experts"] == pytest.approx(before.breakdown_ms["experts"])  # GEMMs: catalog's
    assert after.tpot_ms > before.tpot_ms + added_ms * 0.9
    assert after.measured == ("all_reduce at 8 GPUs (nccl, eager)",)
    assert "all_reduce at 8 GPUs" not in after.fallbacks
    estimate = after_result.as_contract()["throughput_estimate"]
    assert estimate["measured"] == ["all_reduce at 8 GPUs (nccl, eager)"]
    assert "measured" not in plan(plan_request(DSV3_TP8)).as_contract()["throughput_estimate"]
    assert any("measured there: all_reduce at 8 GPUs (nccl, eager)" in note for note in after_result.notes)


def test_another_rank_counts_figures_are_not_read() -> None:
    """The committed H200 profile measured 2 GPUs: a TP 8 plan keeps the catalog's all-reduce and says so
    (before, it read the 2-GPU bandwidth and latency at 8 GPUs); a TP 2 plan reads the measured one."""
    committed = calibration.load(COMMITTED)
    tp8 = plan(plan_request(DSV3_TP8, calibration=committed)).throughput
    assert "all_reduce at 8 GPUs" in tp8.fallbacks
    assert tp8.measured == ()
    tp2 = plan(
        PlanRequest(model="qwen3-30b-a3b", precision="bf16", gpu="h200", tp=2, concurrency=8, calibration=committed)
    ).throughput
    assert tp2.measured == ("all_reduce at 2 GPUs (cuda graph)",)
    assert not any(figure.startswith("all_reduce") for figure in tp2.fallbacks)


def test_a_collectives_only_profile_leaves_the_gpus_single_source_note() -> None:
    """A profile that timed no GEMM does not stand in for the GPU's fitted factors: where they stand on one
    source, the plan still says so (a profile that timed GEMMs replaces them and does not)."""
    catalog = copy.deepcopy(efficiency_catalog())
    catalog["gpu_fitted_on"]["h200"] = ["example.org/one-source"]
    collectives_only = CalibrationProfile.from_dict(_collectives_only(_points("all_reduce", 8, lambda s: 1e-5, LADDER)))
    assert collectives_only.measures_gemms() is False
    with substituted(catalog):
        alone = plan(plan_request(DSV3_TP8, calibration=collectives_only)).throughput.single_source
        gemms = plan(plan_request(DSV3_TP8, calibration=calibration.load(COMMITTED))).throughput.single_source
    assert "h200 efficiencies: example.org/one-source" in alone
    assert not any(line.startswith("h200 efficiencies") for line in gemms)


# -- the job, end to end on CPU ---------------------------------------------------------------------------
@pytest.mark.slow  # three torch processes on a loaded 2-core machine: 10-30 s
def test_gloo_job_writes_a_profile_the_planner_reads(tmp_path: Path) -> None:
    """python -m planner.calibrate run on a CPU: 2 gloo processes time all-reduce and all-to-all over 4-64 KiB;
    the profile file it writes validates, and a TP 2 plan reads its all-reduce in place of the catalog's
    (a CPU's all-reduce is far slower than the catalog's NVLink figure, so the TPOT rises)."""
    spec = {
        "model": "qwen3-30b-a3b",
        "gpu": "h200",
        "device": "cpu",
        "steps": ["collectives"],
        "collective_bytes": [4096, 65536],
        "collective_warmup": 1,
        "collective_reps": 3,
        "decode_m": [1, 4],
    }
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    done = subprocess.run(
        [sys.executable, "-m", "planner.calibrate", "run", "--spec", "spec.json", "--out", "out"],
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "collective points, 0 failures" in done.stdout
    loaded = calibration.load(tmp_path / "out" / "profile.json")
    raw = loaded.raw
    assert raw["machine"]["hostname"]
    assert raw["versions"]["torch"]
    assert not list((tmp_path / "out").glob(".collectives-*"))  # its scratch files are gone
    points = raw["collectives"]
    assert {(p["op"], p["ranks"], p["backend"], p["dtype"], p["timing"]) for p in points} == {
        ("all_reduce", 2, "gloo", "bf16", "eager"),
        ("all_to_all", 2, "gloo", "bf16", "eager"),
    }
    assert sorted({p["bytes"] for p in points}) == [4096, 8192, 16384, 32768, 65536]
    assert all(p["p90_us"] >= p["time_us"] > 0 and p["samples"] == 3 for p in points)
    assert any("no CUDA graphs" in note for note in raw["notes"])

    request: PlanArgs = {"model": "qwen3-30b-a3b", "precision": "bf16", "gpu": "h200", "tp": 2, "concurrency": 8}
    message = 8 * model("qwen3-30b-a3b").hidden_size * 2  # a decode step's all-reduce of 8 tokens
    timed = loaded.collective_s("all_reduce", message, 2)
    assert timed is not None
    assert timed.seconds > _catalog_s("all_reduce", message, 2)  # what the direction below rests on
    before = plan(plan_request(request)).throughput
    after = plan(plan_request(request, calibration=loaded)).throughput
    assert after.measured == ("all_reduce at 2 GPUs (gloo, eager)",)
    assert after.breakdown_ms["collectives"] > before.breakdown_ms["collectives"]
    assert after.tpot_ms > before.tpot_ms
