"""Reads: a cluster's calibration runs, and the profile its plans use (the latest that succeeded); its
startup logs, and the team evidence its plans use."""

from __future__ import annotations

from django.db.models import QuerySet

from governance.calibration.models import CalibrationRun, CalibrationStatus, StartupLog
from governance.evaluations.models import Cluster
from planner.calibrate.profile import CalibrationProfile
from planner.intervals import TeamEvidence


def cluster_get(*, code: str) -> Cluster | None:
    return Cluster.objects.filter(code=code).first()


def calibration_runs(*, cluster: Cluster) -> QuerySet[CalibrationRun]:
    return CalibrationRun.objects.filter(cluster=cluster).select_related("cluster", "job").order_by("-created_at")


def calibration_get(*, code: str) -> CalibrationRun | None:
    return CalibrationRun.objects.filter(code=code).select_related("cluster", "job").first()


def calibration_latest(*, cluster: Cluster, gpu: str) -> CalibrationRun | None:
    return (
        CalibrationRun.objects.filter(cluster=cluster, gpu=gpu, status=CalibrationStatus.SUCCEEDED)
        .order_by("-created_at")
        .first()
    )


def calibration_profile_for(*, cluster: Cluster, gpu: str) -> CalibrationProfile | None:
    """The planner's view of the cluster's latest profile for `gpu`, named after its run."""
    latest = calibration_latest(cluster=cluster, gpu=gpu)
    if latest is None or latest.profile is None:
        return None
    return CalibrationProfile.from_dict(latest.profile, name=f"cluster {cluster.name} calibration {latest.code}")


def startup_logs(*, cluster: Cluster) -> QuerySet[StartupLog]:
    return StartupLog.objects.filter(cluster=cluster).select_related("cluster").order_by("-created_at")


def startup_logs_of(*, subject_type: str, subject_id: str) -> QuerySet[StartupLog]:
    """The startup logs a subject's deployment printed (a deployment request), newest first."""
    return StartupLog.objects.filter(subject_type=subject_type, subject_id=subject_id).order_by("-created_at")


def team_evidence_for(*, cluster: Cluster, gpu: str, engine: str, release_line: str) -> TeamEvidence | None:
    """The cluster's startup logs of this GPU, engine and release line as the planner takes them (None when
    there is none); the planner decides whether they are enough."""
    rows = list(
        StartupLog.objects.filter(cluster=cluster, gpu=gpu, engine=engine, release_line=release_line)
        .order_by("created_at")
        .values_list("kv_pool_residual_bytes", "weights_ratio", "planned")
    )
    if not rows:
        return None
    # GPUs per replica of each log's own plan (its tp x pp): the planner takes a log for layouts of its shape only
    shaped = [(pool, ratio, _replica_gpus(planned)) for pool, ratio, planned in rows]
    return TeamEvidence(
        where=f"cluster {cluster.name}",
        gpu=gpu,
        engine=engine,
        release_line=release_line,
        kv_pool_residuals_bytes=tuple(int(pool) for pool, _, _ in shaped),
        weights_ratios=tuple(float(ratio) for _, ratio, _ in shaped if ratio is not None),
        replica_gpus=tuple(gpus for _, _, gpus in shaped),
        weights_replica_gpus=tuple(gpus for _, ratio, gpus in shaped if ratio is not None),
    )


def _replica_gpus(planned: dict[str, object] | None) -> int:
    tp, pp = (planned or {}).get("tp"), (planned or {}).get("pp")
    return max(1, tp if isinstance(tp, int) else 1) * max(1, pp if isinstance(pp, int) else 1)
