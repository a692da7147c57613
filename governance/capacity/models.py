"""A stored capacity plan: its inputs, the planner's output and version, for one subject."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from governance.core.models import BaseModel


class CapacityPlanStatus(models.TextChoices):
    PENDING = "pending"
    DONE = "done"
    FAILED = "failed"


class CapacityPlan(BaseModel):
    # The request the plan is evidence of (none: a what-if plan asked for through the API). A lazy
    # reference: deployments sits above capacity, which never imports it.
    deployment = models.ForeignKey(
        "deployments.DeploymentRequest", null=True, blank=True, on_delete=models.CASCADE, related_name="capacity_plans"
    )
    inputs = models.JSONField()
    status = models.CharField(max_length=10, choices=CapacityPlanStatus.choices, default=CapacityPlanStatus.PENDING)
    result = models.JSONField(null=True, blank=True)
    fits = models.BooleanField(null=True)
    planner_version = models.CharField(max_length=20, blank=True)
    error = models.TextField(blank=True)
    requested_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    computed_at = models.DateTimeField(null=True, blank=True)  # set when it is done or failed
    # Sent to the broker (after commit; beat re-sends what was never sent or whose lease expired).
    sent_at = models.DateTimeField(null=True, blank=True)
    # Claimed by a worker; the claim lapses CAPACITY_PLAN_LEASE_S later (a killed worker).
    claimed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        # serves "the latest plan of this deployment request"
        indexes = [
            models.Index(fields=["deployment", "-created_at"], name="capacity_deployment_idx"),
            models.Index(fields=["status", "created_at"], name="capacity_status_idx"),
        ]

    def __str__(self) -> str:
        return f"plan {self.code} ({self.status})"
