"""One quantize run: parent artifact + recipe (as data) on a cluster -> a registered derivative."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from governance.core.models import BaseModel


class QuantizeStatus(models.TextChoices):
    RUNNING = "running"
    REGISTERED = "registered"  # the derivative is an artifact (possibly flagged: see license_findings)
    FAILED = "failed"  # no checkpoint, refused recipe, or a result that did not check out
    CANCELLED = "cancelled"


class QuantizeRun(BaseModel):
    parent = models.ForeignKey("artifacts.ModelArtifact", on_delete=models.PROTECT, related_name="quantize_runs")
    cluster = models.ForeignKey("evaluations.Cluster", on_delete=models.PROTECT, related_name="quantize_runs")
    job = models.OneToOneField(
        "evaluations.JobRun", null=True, blank=True, on_delete=models.SET_NULL, related_name="quantize_run"
    )
    recipe_name = models.CharField(max_length=40)
    recipe = models.JSONField(help_text="the recipe as data, exactly as shipped to the node")
    scheme = models.CharField(max_length=20)
    derivative_name = models.CharField(max_length=200)
    # Where the checkpoint lives on the cluster (inside one of its model roots). #28's ArtifactLocation
    # (artifact, cluster, path) is the shared home of this fact; until then it is recorded here.
    output_path = models.CharField(max_length=500)
    calibration_path = models.CharField(max_length=500, blank=True)
    status = models.CharField(max_length=12, choices=QuantizeStatus.choices, default=QuantizeStatus.RUNNING)
    reason = models.TextField(blank=True)
    derivative = models.OneToOneField(
        "artifacts.ModelArtifact", null=True, blank=True, on_delete=models.PROTECT, related_name="quantize_run"
    )
    manifest_digest = models.CharField(max_length=71, blank=True)
    parent_digest = models.CharField(max_length=71, blank=True)
    calibration = models.JSONField(null=True, blank=True, help_text="source, sha256, samples")
    tool_versions = models.JSONField(null=True, blank=True)
    license_findings = models.JSONField(null=True, blank=True)
    # A derivative whose name breaks its parent's derivative terms (naming.prefix as a blocker): flagged
    # at registration, before any review.
    flagged = models.BooleanField(default=False)
    requested_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"quantize {self.recipe_name} -> {self.derivative_name} ({self.status})"
