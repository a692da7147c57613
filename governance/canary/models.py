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
