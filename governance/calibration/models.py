"""One calibration of a cluster's GPUs (planner.calibrate run as a cluster job) and the profile it measured."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from governance.core.models import BaseModel
from governance.evaluations.models import Cluster, JobRun


class CalibrationStatus(models.TextChoices):
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    ERROR = "error"  # the job failed or its profile did not validate


class CalibrationRun(BaseModel):
    cluster = models.ForeignKey(Cluster, on_delete=models.PROTECT, related_name="calibration_runs")
    job = models.OneToOneField(JobRun, null=True, blank=True, on_delete=models.SET_NULL, related_name="calibration_run")
    gpu = models.CharField(max_length=32, help_text="planner catalog key of the GPUs measured")
    model = models.CharField(max_length=100, help_text="catalog key whose shapes were timed ('custom': a config)")
    status = models.CharField(max_length=10, choices=CalibrationStatus.choices, default=CalibrationStatus.RUNNING)
    profile = models.JSONField(null=True, blank=True, help_text="the validated calibration profile")
    profile_sha256 = models.CharField(max_length=64, blank=True)
    gpu_name = models.CharField(max_length=200, blank=True)
    versions = models.JSONField(default=dict, blank=True)
    error = models.TextField(blank=True)
    requested_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)

    class Meta:
        ordering = ["-created_at"]
        indexes = [
            # calibration_latest(): the newest succeeded profile of one cluster for one GPU kind
            models.Index(fields=["cluster", "gpu", "status", "-created_at"], name="calibration_latest_idx"),
        ]

    def __str__(self) -> str:
        return f"calibration of {self.gpu} on {self.cluster_id} ({self.status})"
