"""The decision log: one row per gate answer, written (with its audit event) before the answer."""

from __future__ import annotations

from django.db import models

from governance.core.models import ApiToken, BaseModel
from governance.deployments.models import DeploymentRequest
from governance.gate.choices import GateOutcome


class GateDecision(BaseModel):
    deployment = models.ForeignKey(DeploymentRequest, on_delete=models.PROTECT, related_name="gate_decisions")
    token = models.ForeignKey(ApiToken, null=True, on_delete=models.SET_NULL, related_name="gate_decisions")
    token_name = models.CharField(max_length=120)  # a snapshot: the token row may be deleted later
    token_prefix = models.CharField(max_length=16)
    environment = models.CharField(max_length=40)
    decision = models.CharField(max_length=5, choices=GateOutcome.choices)
    reasons = models.JSONField(default=list)
    artifact_digest = models.CharField(max_length=100)
    serving = models.JSONField()
    evidence_digest = models.CharField(max_length=64, blank=True)
    approval_pdf_sha256 = models.CharField(max_length=64, blank=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [
            # serves "the decisions of one request, newest first" (GET /deployments/{code}/gate-decisions)
            models.Index(fields=["deployment", "-created_at"], name="gate_decision_request_idx"),
            # serves the decision list filtered by outcome over a time range
            models.Index(fields=["decision", "-created_at"], name="gate_decision_outcome_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.decision} {self.environment} ({self.created_at:%Y-%m-%d %H:%M})"
