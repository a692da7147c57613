"""Reads: a cluster's calibration runs, and the profile its plans use (the latest that succeeded)."""

from __future__ import annotations

from django.db.models import QuerySet

from governance.calibration.models import CalibrationRun, CalibrationStatus
from governance.evaluations.models import Cluster
from planner.calibrate.profile import CalibrationProfile


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
