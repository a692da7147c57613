"""Calibration runs: queue planner.calibrate on a cluster (the eval-job machinery), store what it measured.
Startup logs: a cluster's engine logs held against the plan of their own settings (team evidence, issue 47)."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from django.contrib.auth.models import User
from django.db import transaction

from governance.audit.actions import AuditAction
from governance.audit.services import audit_record
from governance.calibration.models import CalibrationRun, CalibrationStatus, StartupLog
from governance.calibration.signals import startup_log_recorded
from governance.core.errors import ApplicationError, invalid_input
from governance.core.services import write_service
from governance.evaluations.models import Cluster, JobKind, JobRun, JobRunState
from governance.evaluations.services import jobrun_create
from planner.calibrate.profile import validate
from planner.checklog import implausible_figure, log_request, log_residuals, parse_log
from planner.hf_config import parse_config
from planner.plan import AUTO_PRECISION, plan
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


# Settings read from a log that name where the model lives (a host's path, a private repository): not kept, as
# the text is not, since every reader of the cluster lists its logs. The plan was made without them.
PRIVATE_SETTINGS = frozenset({"model_path"})


def kept_settings(settings: dict[str, Any]) -> dict[str, Any]:
    return {name: value for name, value in settings.items() if name not in PRIVATE_SETTINGS}


MAX_LOG_CHARS = 2_000_000  # a startup log is a few hundred KiB at most; the figures are near its start


def _planner_field_error(exc: ValueError) -> Exception:
    """Planner errors read 'field: message': a 400 naming that field."""
    field, _, message = str(exc).partition(": ")
    if not message or " " in field.strip():
        return invalid_input("text", str(exc))
    return invalid_input(field.strip(), message)


@write_service
def startup_log_record(
    *,
    cluster: Cluster,
    text: str,
    gpu: str,
    model: str | dict[str, Any],
    actor: User | None,
    precision: str = AUTO_PRECISION,
    engine_version: str | None = None,
    subject: tuple[str, str] | None = None,
) -> StartupLog:
    """Read a startup log, plan its own settings with the catalog alone and store what it says of that plan:
    the KV pool residual and the weights ratio the cluster's later plans use (planner.intervals.TeamEvidence).
    `subject` ("deployments.deploymentrequest", code): the request whose deployment printed it."""
    if gpu not in gpus():
        raise invalid_input("gpu", f"unknown {gpu!r}; one of {', '.join(sorted(gpus()))}")
    if not text.strip() or len(text) > MAX_LOG_CHARS:
        raise invalid_input("text", f"must be a startup log of 1 to {MAX_LOG_CHARS:,} characters")
    try:
        log = parse_log(text)
    except ValueError as exc:  # a figure that is not a number: the log is refused, naming it
        raise _planner_field_error(exc) from None
    if "available_kv_cache_memory" not in log.figures:
        raise invalid_input(
            "text",
            "the log prints no KV pool (vLLM's 'Available KV cache memory', SGLang's 'KV Cache is allocated'): "
            "nothing to hold a plan against",
        )
    implausible = implausible_figure(log, gpus()[gpu])
    if implausible:
        raise invalid_input("text", implausible)
    version = engine_version or log.version
    if not version:
        raise invalid_input("engine_version", "the log names no engine version: give the one it ran")
    try:
        request = log_request(log, model=model, precision=precision, gpu=gpu, engine_version=version)
        result = plan(request)
    except ValueError as exc:
        raise _planner_field_error(exc) from None
    residuals = log_residuals(log, result)
    if residuals.kv_pool_bytes is None:  # the log printed a pool (checked above): a planner change broke that
        raise ApplicationError("the startup log's KV pool could not be compared with the plan", status=500)
    memory = result.chosen.memory
    release = result.engine.release
    stored = StartupLog.objects.create(
        cluster=cluster,
        gpu=gpu,
        engine=result.engine.name,
        engine_version=version[:40],
        release_line=f"{release[0]}.{release[1]}",
        model=result.model.key if isinstance(model, str) else "custom",
        precision=result.precision.key,
        text_sha256=hashlib.sha256(text.encode("utf-8", errors="replace")).hexdigest(),
        log_settings=kept_settings(log.settings),
        figures={name: value for name, value in log.figures.items()},
        planned={
            "kv_pool_bytes": memory.kv_pool_bytes,
            "loaded_bytes": memory.loaded_bytes,
            "kv_capacity_tokens": memory.kv_capacity_tokens,
            "tp": result.chosen.layout.tp,
            "pp": result.chosen.layout.pp,
        },
        kv_pool_residual_bytes=residuals.kv_pool_bytes,
        weights_ratio=residuals.weights_ratio,
        subject_type=subject[0] if subject else "",
        subject_id=subject[1] if subject else "",
        recorded_by=actor,
    )
    audit_record(
        actor=actor,
        action=AuditAction.STARTUP_LOG_RECORDED,
        obj=stored,
        data={
            "cluster": cluster.name,
            "gpu": gpu,
            "engine": stored.engine,
            "engine_version": stored.engine_version,
            "kv_pool_residual_bytes": stored.kv_pool_residual_bytes,
            "weights_ratio": stored.weights_ratio,
            "subject": f"{stored.subject_type}:{stored.subject_id}" if subject else "",
        },
    )
    if subject:
        transaction.on_commit(lambda: startup_log_recorded.send(sender=StartupLog, log=stored))
    return stored
