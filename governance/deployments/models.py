"""Deployment requests and what hangs off them. Status changes only in services.transitions.deployment_transition."""

from __future__ import annotations

from datetime import datetime

from django.conf import settings
from django.db import models

from governance.artifacts.models import ModelArtifact
from governance.core.models import BaseModel, Team
from governance.deployments.choices import AuthMethod, ObligationStatus, ReviewRole, SignOffDecision, Status


class DeploymentRequest(BaseModel):
    team = models.ForeignKey(Team, on_delete=models.PROTECT, related_name="deployment_requests")
    requester = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    artifact = models.ForeignKey(ModelArtifact, on_delete=models.PROTECT, related_name="deployment_requests")
    product_name = models.CharField(max_length=200)
    environments = models.JSONField(default=list)
    facts = models.JSONField(help_text="license facts, as given (validated like the evaluate API)")
    serving_plan = models.JSONField()
    target_cluster = models.CharField(max_length=120, blank=True)
    status = models.CharField(max_length=12, choices=Status.choices, default=Status.DRAFT, db_index=True)
    submitted_at = models.DateTimeField(null=True, blank=True)
    approved_at = models.DateTimeField(null=True, blank=True)
    approval_expires_at = models.DateTimeField(null=True, blank=True)
    evidence = models.JSONField(null=True, blank=True)
    evidence_digest = models.CharField(max_length=64, blank=True)
    flagged = models.BooleanField(default=False)
    flag_reason = models.TextField(blank=True)
    # The language the approval packet is written in: the requester's when the request was filed,
    # fixed for the request's life, so every reviewer signs the same text whatever their own UI
    # language (settings.LANGUAGES; checked by the serializer, not a DB choice list that would need a
    # migration per added language).
    language = models.CharField(max_length=16, default="en")

    class Meta:
        ordering = ["-created_at"]
        # serves the expiry sweep: WHERE status = 'approved' AND approval_expires_at <= now
        indexes = [models.Index(fields=["status", "approval_expires_at"], name="deployment_expiry_idx")]

    def __str__(self) -> str:
        return f"{self.product_name} ({self.status})"


class Approval(BaseModel):
    """One approval of a request, recorded when it happens (services.transitions): when, on which
    evidence, and the passed served eval it relied on, so later evidence compares a fresh eval with
    it without reading the audit trail back. A request approved again after a return to review has
    one row per approval."""

    deployment = models.ForeignKey(DeploymentRequest, on_delete=models.CASCADE, related_name="approvals")
    approved_at = models.DateTimeField()
    evidence_digest = models.CharField(max_length=64)
    # SET_NULL: the approval's own record outlives a run deleted by hand (its code stays in the audit event).
    relied_on_eval = models.ForeignKey(
        "evaluations.EvalRun", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        ordering = ["approved_at", "id"]
        # serves the approvals of one request, oldest first (services.evidence)
        indexes = [models.Index(fields=["deployment", "approved_at"], name="deployment_approval_idx")]

    def __str__(self) -> str:
        return f"approval of {self.deployment_id} at {self.approved_at:%Y-%m-%d %H:%M}"


class SignOff(BaseModel):
    """A reviewer's decision on one evidence digest: who, as which role, what it means, how they
    re-authenticated. The one record of it: the approvals app keeps only the cryptographic facts of
    its PDF signature (approvals.PacketSignature, one-to-one). Voided when the evidence changes
    (services.evidence, the only place that voids on change) or when its signature fails."""

    deployment = models.ForeignKey(DeploymentRequest, on_delete=models.CASCADE, related_name="signoffs")
    role = models.CharField(max_length=12, choices=ReviewRole.choices)
    decision = models.CharField(max_length=8, choices=SignOffDecision.choices)
    signer = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    signer_name = models.CharField(max_length=300, blank=True)  # the printed name, as signed
    meaning = models.TextField(blank=True)  # the text the signer was shown (21 CFR 11.50)
    comment = models.TextField(blank=True)
    signed_at = models.DateTimeField()  # when the decision was made; the PDF's timestamp says when it was signed
    evidence_digest = models.CharField(max_length=64)
    # How the signer re-authenticated (21 CFR 11.200: signing re-authenticates).
    auth_method = models.CharField(max_length=20, choices=AuthMethod.choices, default=AuthMethod.PASSWORD)
    voided_at = models.DateTimeField(null=True, blank=True)
    void_reason = models.TextField(blank=True)

    class Meta:
        ordering = ["signed_at", "id"]
        # serves the live sign-offs of a request (readiness, sign-off rules, void-on-change)
        indexes = [models.Index(fields=["deployment", "voided_at"], name="deployment_signoff_live_idx")]

    def __str__(self) -> str:
        return f"{self.role} {self.decision} by {self.signer_id} ({'voided' if self.voided_at else 'live'})"


class ObligationItem(BaseModel):
    """One obligation finding the requester must meet (e.g. where "Built with Llama" is shown)."""

    request = models.ForeignKey(DeploymentRequest, on_delete=models.CASCADE, related_name="obligations")
    license_key = models.CharField(max_length=64)
    finding_code = models.CharField(max_length=40)
    clause = models.CharField(max_length=120)
    params = models.JSONField(default=dict)
    message = models.TextField()
    fingerprint = models.CharField(max_length=64)  # license + code + clause + params: survives re-evaluation
    status = models.CharField(max_length=14, choices=ObligationStatus.choices, default=ObligationStatus.OPEN)
    how_met = models.TextField(blank=True)
    acknowledged_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    reviewed_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    review_comment = models.TextField(blank=True)

    class Meta:
        ordering = ["license_key", "finding_code", "clause"]
        constraints = [models.UniqueConstraint(fields=["request", "fingerprint"], name="obligation_unique")]


class Waiver(BaseModel):
    """Legal waives one finding (license + code [+ clause]) on one request until `expires_at`.

    A waiver of a blocker (a prohibited use, a territorial or non-commercial term) is only proposed
    by `granted_by`, with the licensor's written permission attached (`permission_*`); it becomes
    active when a second, distinct legal reviewer confirms it (`confirmed_by`, `confirmed_at`).
    Other waivers are active from the start (`needs_confirmation` false)."""

    request = models.ForeignKey(DeploymentRequest, on_delete=models.CASCADE, related_name="waivers")
    license_key = models.CharField(max_length=64)
    finding_code = models.CharField(max_length=40)
    clause = models.CharField(max_length=120, blank=True)
    severity = models.CharField(max_length=12, blank=True)  # of the waived finding, when granted
    reason = models.TextField()
    expires_at = models.DateTimeField()
    granted_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    needs_confirmation = models.BooleanField(default=False)
    confirmed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    confirmed_at = models.DateTimeField(null=True, blank=True)
    permission_name = models.CharField(max_length=255, blank=True)
    permission_size = models.BigIntegerField(null=True, blank=True)
    permission_sha256 = models.CharField(max_length=64, blank=True)
    permission_content = models.BinaryField(null=True, blank=True, editable=False)
    expired_recorded_at = models.DateTimeField(null=True, blank=True)

    @property
    def is_confirmed(self) -> bool:
        return not self.needs_confirmation or self.confirmed_at is not None

    # In force: unexpired and, for a blocker, confirmed by a second legal reviewer. The one rule, in its
    # Python form (in_force) and its query form (in_force_q), which tests hold equal; the readiness rule
    # reads the evidence's copy of these waivers (readiness.waiver_in_force).
    def in_force(self, now: datetime) -> bool:
        return self.expires_at > now and self.is_confirmed

    @staticmethod
    def in_force_q(now: datetime) -> models.Q:
        return models.Q(expires_at__gt=now) & (
            models.Q(needs_confirmation=False) | models.Q(confirmed_at__isnull=False)
        )

    class Meta:
        ordering = ["expires_at"]
        # serves the expiry sweep: WHERE expired_recorded_at IS NULL AND expires_at <= now
        indexes = [models.Index(fields=["expired_recorded_at", "expires_at"], name="waiver_expiry_idx")]


class UsageReport(BaseModel):
    request = models.ForeignKey(DeploymentRequest, on_delete=models.CASCADE, related_name="usage_reports")
    month = models.CharField(max_length=7)  # YYYY-MM
    monthly_active_users = models.BigIntegerField()
    revenue_amount = models.DecimalField(max_digits=20, decimal_places=2, null=True)
    revenue_currency = models.CharField(max_length=3, blank=True)
    reported_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    crossed = models.JSONField(default=list)  # findings that appeared with this report

    class Meta:
        ordering = ["-month", "-created_at"]
