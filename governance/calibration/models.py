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


class StartupLog(BaseModel):
    """An engine startup log from a cluster (what `python -m planner check-log` reads), held against the plan
    of its own settings: the team's own evidence of what the engine keeps outside its KV pool there. A plan
    for the cluster's GPU, engine and release line uses these ahead of the catalog (issue 47). The log's text
    is not kept (it may name paths and hosts): its digest, the settings and figures read from it."""

    cluster = models.ForeignKey(Cluster, on_delete=models.PROTECT, related_name="startup_logs")
    gpu = models.CharField(max_length=32, help_text="planner catalog key of the GPUs it ran on")
    engine = models.CharField(max_length=16)
    engine_version = models.CharField(max_length=40)
    release_line = models.CharField(max_length=12, help_text="major.minor of engine_version: what plans match on")
    model = models.CharField(max_length=100, help_text="catalog key planned for it ('custom': a config)")
    precision = models.CharField(max_length=20)
    text_sha256 = models.CharField(max_length=64)
    log_settings = models.JSONField(default=dict, blank=True, help_text="the settings read from the log")
    figures = models.JSONField(default=dict, blank=True, help_text="bytes or tokens the log printed")
    planned = models.JSONField(default=dict, blank=True, help_text="the plan's figures for the log's settings")
    kv_pool_residual_bytes = models.BigIntegerField(help_text="logged - planned KV pool per GPU")
    weights_ratio = models.FloatField(null=True, blank=True, help_text="logged model loading / planned")
    # The deployment request whose deployment printed it ("" when none): its readiness compares the figures
    # with the request's plan intervals (a string pair, as capacity plans name theirs: this app sits below).
    subject_type = models.CharField(max_length=64, blank=True)
    subject_id = models.CharField(max_length=64, blank=True)
    recorded_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)

    class Meta:
        ordering = ["-created_at"]
        indexes = [
            # team_evidence_for(): a cluster's logs of one GPU, engine and release line
            models.Index(fields=["cluster", "gpu", "engine", "release_line"], name="startup_log_evidence_idx"),
            # startup_logs_of(): the logs a deployment request's deployment printed
            models.Index(fields=["subject_type", "subject_id", "-created_at"], name="startup_log_subject_idx"),
        ]

    def __str__(self) -> str:
        return f"startup log of {self.engine} {self.engine_version} on {self.cluster_id}"
