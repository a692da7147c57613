"""One canary analysis: the evidence that a deployed canary of an approved request (its weights
digest and serving envelope) serves like the evaluated weights and performs like the stable
deployment and the capacity plan. The gate reads these rows before a high-risk production rollout."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from governance.core.models import BaseModel
from governance.deployments.models import DeploymentRequest


class CanaryStatus(models.TextChoices):
    PENDING = "pending"  # requested, the job has not started
    RUNNING = "running"
    PASSED = "passed"  # every check passed: production may proceed
    FAILED = "failed"  # a check failed (no data is a failed check)
    INCONCLUSIVE = "inconclusive"  # borderline: an engineering reviewer promotes or rolls back
    PROMOTED = "promoted"  # inconclusive, promoted by an engineering reviewer (a recorded reason)
    ROLLED_BACK = "rolled_back"  # inconclusive, rolled back by an engineering reviewer


# The statuses that count as a passed canary on record (the gate's allow, and "already promoted").
CANARY_OK = (CanaryStatus.PASSED, CanaryStatus.PROMOTED)
CANARY_OPEN = (CanaryStatus.PENDING, CanaryStatus.RUNNING, CanaryStatus.INCONCLUSIVE)


class CanaryAnalysis(BaseModel):
    deployment = models.ForeignKey(DeploymentRequest, on_delete=models.PROTECT, related_name="canary_analyses")
    digest = models.CharField(max_length=100, help_text="the weights digest the canary serves")
    envelope = models.JSONField(help_text="the serving envelope the canary runs (the gate check's `serving`)")
    envelope_digest = models.CharField(max_length=64, help_text="sha256 of the canonical envelope")
    status = models.CharField(max_length=12, choices=CanaryStatus.choices, default=CanaryStatus.PENDING)
    # Where the canary answers: a URL only. A credential is never stored: `credential_ref` names a
    # setting / environment variable that holds it, read at run time.
    endpoint = models.URLField(max_length=500, blank=True, help_text="the canary's OpenAI-compatible base URL")
    model_name = models.CharField(max_length=200, blank=True, help_text="the `model` the endpoint serves")
    credential_ref = models.CharField(max_length=100, blank=True, help_text="name of the env var holding the key")
    # The Prometheus label matchers selecting each deployment's series, e.g. {"deployment": "canary"}.
    canary_selector = models.JSONField(default=dict, blank=True)
    stable_selector = models.JSONField(default=dict, blank=True)
    sample_size = models.PositiveIntegerField(default=50, help_text="eval cases sent to the canary (at most)")
    cluster = models.CharField(max_length=120, blank=True, help_text="where the canary runs (the request's target)")
    # One row per check: kind, metric, canary, stable, threshold, p_value, verdict, detail.
    checks = models.JSONField(default=list, blank=True)
    # The service's own client-side figures of the live regression (TTFT, TPOT: medians, p95, n),
    # and the approved eval its answers were compared with.
    measurements = models.JSONField(default=dict, blank=True)
    reference_eval = models.CharField(max_length=36, blank=True, help_text="code of the approved eval compared with")
    error = models.TextField(blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    decision_reason = models.TextField(blank=True)
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        ordering = ["-created_at"]
        indexes = [
            # the gate's read: a request's analyses, newest first
            models.Index(fields=["deployment", "-created_at"], name="canary_request_idx"),
            # "already promoted": a passed canary of these weights and envelope, any request
            models.Index(fields=["digest", "envelope_digest", "status"], name="canary_promoted_idx"),
        ]

    def __str__(self) -> str:
        return f"canary {self.status} of {self.digest[:19]}…"


class MeasurementSource(models.TextChoices):
    CANARY = "canary"  # a canary analysis, before production
    FLEET = "fleet"  # the fleet re-check of a promoted deployment


class PlanMeasurement(BaseModel):
    """One figure of a deployment measured against its capacity plan (governance/canary/plan_fit.py):
    the rows the planner's calibration is fitted from, per cluster and engine (the export), and the
    finding engineering sees where it measured worse than planned."""

    deployment = models.ForeignKey(DeploymentRequest, on_delete=models.PROTECT, related_name="plan_measurements")
    analysis = models.ForeignKey(
        CanaryAnalysis, null=True, blank=True, on_delete=models.CASCADE, related_name="plan_measurements"
    )
    source = models.CharField(max_length=8, choices=MeasurementSource.choices)
    cluster = models.CharField(max_length=120, blank=True, help_text="where it ran, as the pipeline names it")
    engine = models.CharField(max_length=40)
    engine_version = models.CharField(max_length=40, blank=True)
    gpu = models.CharField(max_length=40, blank=True)
    precision = models.CharField(max_length=20, blank=True)
    layout = models.JSONField(default=dict, blank=True, help_text="tp, pp, ep")
    figure = models.CharField(max_length=20)  # ttft_ms, tpot_ms, kv_cache_usage
    planned = models.FloatField(null=True, blank=True)
    low = models.FloatField(null=True, blank=True, help_text="the plan's interval, where it has one")
    high = models.FloatField(null=True, blank=True)
    measured = models.FloatField(null=True, blank=True, help_text="engine-side median")
    client = models.FloatField(null=True, blank=True, help_text="the service's own client-side median")
    limit = models.FloatField(null=True, blank=True)
    ratio = models.FloatField(null=True, blank=True, help_text="measured / planned")
    # What the team's later plans are calibrated from (canary.selectors.measured_evidence_for): measured / the
    # catalog's figure, i.e. the ratio over the correction the plan itself took from earlier measurements.
    catalog_ratio = models.FloatField(null=True, blank=True, help_text="measured / the catalog's planned figure")
    position = models.CharField(max_length=8, blank=True, help_text="against the interval")
    verdict = models.CharField(max_length=12)  # as_planned, worse, no_data
    detail = models.TextField(blank=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [
            # the calibration export: per cluster and engine, newest first
            models.Index(fields=["cluster", "engine", "-created_at"], name="plan_measure_export_idx"),
            models.Index(fields=["deployment", "-created_at"], name="plan_measure_request_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.figure} {self.verdict} ({self.source})"


class FleetCheck(BaseModel):
    """One re-check of a promoted deployment's serving series against its plan (beat
    `canary.fleet_check`): each figure sustained beyond its limit is an alert."""

    deployment = models.ForeignKey(DeploymentRequest, on_delete=models.CASCADE, related_name="fleet_checks")
    analysis = models.ForeignKey(CanaryAnalysis, on_delete=models.CASCADE, related_name="fleet_checks")
    status = models.CharField(max_length=8)  # ok, alert, no_data (Prometheus did not answer: no verdict)
    # One row per figure: metric, value (the window's median), limit, breaching (the share of the
    # window's samples beyond the limit), samples, alert, detail.
    figures = models.JSONField(default=list, blank=True)
    alerts = models.JSONField(default=list, blank=True, help_text="the metrics alerting")
    # Its TTFT, TPOT and KV usage against the plan (plan_fit.PlanFigure rows, as its PlanMeasurement rows hold
    # them): the page flags those outside the plan's interval.
    plan = models.JSONField(default=list, blank=True)
    sent_back = models.BooleanField(default=False, help_text="the request went back to review on this check")
    error = models.TextField(blank=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["deployment", "-created_at"], name="fleet_check_request_idx")]

    def __str__(self) -> str:
        return f"fleet check {self.status}"
