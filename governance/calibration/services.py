"""Calibration runs: queue planner.calibrate on a cluster (the eval-job machinery), store what it measured."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from django.contrib.auth.models import User
from django.db import transaction

from governance.audit.actions import AuditAction
from governance.audit.services import audit_record
from governance.calibration.models import CalibrationRun, CalibrationStatus
from governance.core.errors import invalid_input
from governance.core.services import write_service
from governance.evaluations.models import Cluster, JobKind, JobRun, JobRunState
from governance.evaluations.services import jobrun_create
from planner.calibrate.profile import validate
from planner.hf_config import parse_config
from planner.specs import gpus
from planner.specs import model as catalog_model

CALIBRATE_COMMAND = ["python3", "-m", "planner.calibrate", "run", "--spec", "spec.json", "--out", "."]
MAX_GPUS = 16


@write_service
def calibration_run_request(
    *,
    cluster: Cluster,
    gpu: str,
    model: str | dict[str, Any],
    actor: User | None,
    gpus_per_job: int = 1,
    time_limit_s: int | None = None,
    device: str = "cuda",
    sizes: dict[str, list[int] | list[str]] | None = None,  # GEMM sizes, and "precisions"
) -> CalibrationRun:
    """Validate, store the run and queue its job after commit. `device`/`sizes` exist for CPU test runs."""
    if gpu not in gpus():
        raise invalid_input("gpu", f"unknown {gpu!r}; one of {', '.join(sorted(gpus()))}")
    try:
        spec_model = parse_config(model) if isinstance(model, dict) else catalog_model(model)
    except ValueError as exc:
        raise invalid_input("model", str(exc)) from None
    if not 1 <= gpus_per_job <= MAX_GPUS:
        raise invalid_input("gpus", f"must be between 1 and {MAX_GPUS}")
    if device not in ("cuda", "cpu"):
        raise invalid_input("device", "must be cuda or cpu")
    spec: dict[str, Any] = {"model": model, "gpu": gpu, "device": device, **(sizes or {})}
    with transaction.atomic():
        run = CalibrationRun.objects.create(
            cluster=cluster, gpu=gpu, requested_by=actor, model=spec_model.key if isinstance(model, str) else "custom"
        )
        job = jobrun_create(
            cluster=cluster,
            kind=JobKind.COMMAND,
            command=CALIBRATE_COMMAND,
            files={"spec.json": json.dumps(spec)},
            time_limit_s=time_limit_s,
            gpus=gpus_per_job if device == "cuda" else 0,
            subject=run,
            actor=actor,
        )
        run.job = job
        run.save(update_fields=["job", "updated_at"])
    return run


def on_job_finished(sender: Any = None, *, run: JobRun, **kwargs: Any) -> None:
    """Receiver of evaluations.signals.job_finished: a finished calibration job becomes a stored
    profile, or an error with the reason."""
    job = run
    calibration = CalibrationRun.objects.filter(job=job).select_related("cluster").first()
    if calibration is None or calibration.status != CalibrationStatus.RUNNING:
        return
    _record(calibration, job)


@write_service
def _record(run: CalibrationRun, job: JobRun) -> None:
    error = ""
    if job.state != JobRunState.SUCCEEDED or not job.result:
        error = f"job {job.state}: {job.reason}"[:2000]
    else:
        try:
            validate(job.result)
            measured_on = job.result["gpu"].get("catalog_key")
            if measured_on != run.gpu:
                raise ValueError(
                    f"calibration: the profile says it measured {measured_on}, the run asked for {run.gpu}"
                )
        except ValueError as exc:
            error = str(exc)
    with transaction.atomic():
        if error:
            run.status, run.error = CalibrationStatus.ERROR, error
        else:
            profile: dict[str, Any] = dict(job.result or {})
            run.status = CalibrationStatus.SUCCEEDED
            run.profile = profile
            run.profile_sha256 = hashlib.sha256(json.dumps(profile, sort_keys=True).encode()).hexdigest()
            run.gpu_name = str(profile["gpu"]["name"])[:200]
            run.versions = dict(profile["versions"])
        run.save(update_fields=["status", "error", "profile", "profile_sha256", "gpu_name", "versions", "updated_at"])
        audit_record(
            actor="system:calibration",
            action=AuditAction.CALIBRATION_COMPLETED,
            obj=run,
            data={
                "cluster": run.cluster.name,
                "gpu": run.gpu,
                "status": run.status,
                "profile_sha256": run.profile_sha256,
                "versions": run.versions,
                "error": error[:500],
            },
        )
