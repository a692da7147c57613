"""Calibration runs per cluster: queued like eval runs on the same job machinery, stored as profiles,
the latest one used by that cluster's plans, visible in the API."""

from __future__ import annotations

import copy
import importlib
import json
import sys
from pathlib import Path
from typing import Any

import pytest
from django.dispatch import Signal

from governance.audit.models import AuditEvent
from governance.calibration.models import CalibrationRun
from governance.calibration.selectors import calibration_latest
from governance.calibration.services import calibration_run_request, on_job_finished
from governance.evaluations.models import Cluster, ExecutorKind, JobKind, JobRunState
from governance.evaluations.services import jobrun_create
from planner.evaljob.tiny import TINY_QWEN3_MOE
from tests.conftest import Personas
from tests.evaluations.conftest import drive

ROOT = Path(__file__).resolve().parents[2]
H200_PROFILE = json.loads(
    (ROOT / "planner" / "catalog" / "calibration" / "h200-2026-11-29-torch2.11-cu130.json").read_text()
)
TINY = {"architectures": ["Qwen3MoeForCausalLM"], **TINY_QWEN3_MOE}
PLAN = {
    "model": "qwen3-30b-a3b",
    "precision": "bf16",
    "gpu": "h200",
    "tp": 1,
    "max_model_len": 4096,
    "concurrency": 8,
    "input_len": 1024,
    "output_len": 256,
}


@pytest.fixture
def local_cluster(db: None, tmp_path: Path, settings: Any) -> Cluster:
    settings.JOB_POLL_INITIAL_S = 0.5
    settings.JOB_POLL_MAX_S = 1.0
    return Cluster.objects.create(
        name="local",
        executor=ExecutorKind.LOCAL,
        remote_root=str(tmp_path / "runs"),
        default_time_limit_s=900,
        setup_lines=f"export PATH={Path(sys.executable).parent}:$PATH PYTHONPATH={ROOT}",
    )


def _finished_with(
    cluster: Cluster, result: dict[str, Any] | None, state: str = JobRunState.SUCCEEDED
) -> CalibrationRun:
    """A run whose job ended with `result` (the job machinery itself is exercised end to end below)."""
    run = CalibrationRun.objects.create(cluster=cluster, gpu="h200", model="qwen3-30b-a3b")
    run.job = jobrun_create(cluster=cluster, kind=JobKind.COMMAND, command=["true"])
    run.save()
    run.job.state, run.job.result, run.job.reason = state, result, "" if result else "exit 2"
    run.job.save()
    on_job_finished(run=run.job)
    run.refresh_from_db()
    return run


def test_a_real_calibration_job_becomes_the_clusters_profile(
    local_cluster: Cluster, personas: Personas, django_capture_on_commit_callbacks
) -> None:
    """The real payload (python -m planner.calibrate run) on the local executor, on a CPU with a tiny
    model's shapes; its result becomes the profile the cluster's plans use."""
    run = calibration_run_request(
        cluster=local_cluster,
        gpu="h200",
        model=TINY,
        actor=personas.engineer,
        device="cpu",
        # The gloo collectives step has its own end-to-end test (tests/planner/test_collectives.py).
        sizes={"decode_m": [1, 4], "prefill_m": [32], "precisions": ["bf16"], "collective_ranks": []},
    )
    assert run.job is not None
    assert run.job.command[:3] == ["python3", "-m", "planner.calibrate"]
    with django_capture_on_commit_callbacks(execute=True):
        job = drive(run.job, timeout_s=600)
    assert job.state == "succeeded", job.reason + job.log_tail
    run.refresh_from_db()
    assert run.status == "succeeded", run.error
    assert run.gpu_name.startswith("cpu")
    assert run.versions is not None
    assert run.profile is not None
    assert run.versions["torch"]
    assert {p["m"] for p in run.profile["gemm"]} == {1, 4, 32}
    assert calibration_latest(cluster=local_cluster, gpu="h200") == run
    assert AuditEvent.objects.filter(action=630, object_id=str(run.code)).exists()

    engineer = personas.client(personas.engineer)
    calibrated = engineer.post("/api/v1/planner/plan", {**PLAN, "cluster": str(local_cluster.code)}, format="json")
    assert calibrated.status_code == 200, calibrated.json()
    estimate = calibrated.json()["throughput_estimate"]
    assert f"calibration {run.code}" in estimate["calibration"]
    assert "kernel launch overhead" in estimate["fallbacks"]  # not measured on a CPU: said so
    default = engineer.post("/api/v1/planner/plan", PLAN, format="json").json()["throughput_estimate"]
    assert default["calibration"] is None
    assert estimate["tpot_ms"] > 10 * default["tpot_ms"]  # a CPU's measured GEMMs, not the H200 defaults


def test_the_latest_successful_profile_wins(local_cluster: Cluster, personas: Personas) -> None:
    older = _finished_with(local_cluster, H200_PROFILE)
    slow = copy.deepcopy(H200_PROFILE)
    for point in slow["gemm"]:
        point["time_us"] *= 4
    newer = _finished_with(local_cluster, slow)
    failed = _finished_with(local_cluster, None, state=JobRunState.FAILED)
    assert older.status == newer.status == "succeeded"
    assert failed.status == "error"
    assert "exit 2" in failed.error
    assert calibration_latest(cluster=local_cluster, gpu="h200") == newer
    body = personas.client(personas.auditor).get(f"/api/v1/clusters/{local_cluster.code}/calibrations").json()
    assert [(r["code"], r["status"], r["latest"]) for r in body] == [
        (str(failed.code), "error", False),
        (str(newer.code), "succeeded", True),
        (str(older.code), "succeeded", False),
    ]
    plan = (
        personas.client(personas.engineer)
        .post("/api/v1/planner/plan", {**PLAN, "cluster": str(local_cluster.code)}, format="json")
        .json()
    )
    assert str(newer.code) in plan["throughput_estimate"]["calibration"]


def test_a_profile_that_does_not_validate_or_match_is_an_error(local_cluster: Cluster) -> None:
    broken = copy.deepcopy(H200_PROFILE)
    broken["gemm"][0].pop("time_us")
    assert "gemm[0] lacks time_us" in _finished_with(local_cluster, broken).error
    other = copy.deepcopy(H200_PROFILE)
    other["gpu"]["catalog_key"] = "b200"
    assert "measured b200, the run asked for h200" in _finished_with(local_cluster, other).error
    assert calibration_latest(cluster=local_cluster, gpu="h200") is None


def test_api_starts_a_run_and_shows_it(local_cluster: Cluster, personas: Personas) -> None:
    engineer = personas.client(personas.engineer)
    url = f"/api/v1/clusters/{local_cluster.code}/calibrations"
    response = engineer.post(url, {"gpu": "h200", "model": "qwen3-30b-a3b", "gpus": 2}, format="json")
    assert response.status_code == 202, response.json()
    created = response.json()
    assert created["status"] == "running"
    assert created["job"]["state"] == "queued"
    run = CalibrationRun.objects.get(code=created["code"])
    assert run.job is not None
    assert run.job.gpus == 2
    assert json.loads(run.job.files["spec.json"]) == {"model": "qwen3-30b-a3b", "gpu": "h200", "device": "cuda"}
    detail = personas.client(personas.requester).get(f"/api/v1/calibrations/{run.code}").json()
    assert detail["profile"] is None
    done = _finished_with(local_cluster, H200_PROFILE)
    shown = personas.client(personas.auditor).get(f"/api/v1/calibrations/{done.code}").json()
    assert shown["profile"]["gpu"]["name"] == "NVIDIA H200"
    assert shown["versions"]["driver"] == H200_PROFILE["versions"]["driver"]
    assert shown["latest"] is True


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"gpu": "h900", "model": "qwen3-30b-a3b"}, "gpu"),
        ({"gpu": "h200", "model": "no-such-model"}, "model"),
        ({"gpu": "h200", "model": "qwen3-30b-a3b", "gpus": 0}, "gpus"),
        ({"gpu": "h200", "model": "qwen3-30b-a3b", "shell": "x"}, "shell"),
    ],
)
def test_bad_input_is_400_naming_the_field(local_cluster: Cluster, personas: Personas, body: dict, field: str) -> None:
    response = personas.client(personas.engineer).post(
        f"/api/v1/clusters/{local_cluster.code}/calibrations", body, format="json"
    )
    assert response.status_code == 400
    assert field in response.json()["extra"]["fields"]
    assert CalibrationRun.objects.count() == 0


def test_roles_and_unknown_clusters(local_cluster: Cluster, personas: Personas) -> None:
    url = f"/api/v1/clusters/{local_cluster.code}/calibrations"
    body = {"gpu": "h200", "model": "qwen3-30b-a3b"}
    assert personas.client(personas.requester).post(url, body, format="json").status_code == 403
    assert personas.client(personas.outsider).get(url).status_code == 403
    assert personas.client(None).get(url).status_code in (401, 403)
    missing = "/api/v1/clusters/00000000-0000-0000-0000-000000000000/calibrations"
    assert personas.client(personas.engineer).get(missing).status_code == 404
    plan = personas.client(personas.engineer).post(
        "/api/v1/planner/plan", {**PLAN, "cluster": "00000000-0000-0000-0000-000000000000"}, format="json"
    )
    assert plan.status_code == 400
    assert "cluster" in plan.json()["extra"]["fields"]


def test_a_plan_reads_the_clusters_profile_with_no_signal_receiver_connected(
    local_cluster: Cluster, personas: Personas, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Signals only announce: a plan that names a cluster gets its profile by a direct call. Before,
    the capacity app asked for it with a signal (`calibration_wanted`) and a missing receiver made
    every such plan a 400 ("calibration profiles are not installed")."""
    run = _finished_with(local_cluster, H200_PROFILE)
    for signal in _governance_signals():
        monkeypatch.setattr(signal, "receivers", [])
        signal.sender_receivers_cache.clear()
    response = personas.client(personas.engineer).post(
        "/api/v1/planner/plan", {**PLAN, "cluster": str(local_cluster.code)}, format="json"
    )
    assert response.status_code == 200, response.json()
    assert str(run.code) in response.json()["throughput_estimate"]["calibration"]
    unknown = personas.client(personas.engineer).post(
        "/api/v1/planner/plan", {**PLAN, "cluster": "00000000-0000-0000-0000-000000000000"}, format="json"
    )
    assert unknown.status_code == 400
    assert "cluster" in unknown.json()["extra"]["fields"]


def _governance_signals() -> list[Signal]:
    """Every signal a governance app declares (its signals.py)."""
    found: list[Signal] = []
    for app in sorted(p.name for p in (ROOT / "governance").iterdir() if (p / "signals.py").exists()):
        module = importlib.import_module(f"governance.{app}.signals")
        found.extend(value for value in vars(module).values() if isinstance(value, Signal))
    assert found, "no signals found: the helper is broken"
    return found
