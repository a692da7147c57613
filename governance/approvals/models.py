"""The organisation's PKI, approval packets, the PDF signatures of sign-offs and stored verification results.

Private keys are stored only encrypted (PKCS#8, key-encryption key outside the database)."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q

from governance.approvals.choices import (
    AuthorityKind,
    PacketStatus,
    RevocationReason,
    SignatureStatus,
    VerificationStatus,
)
from governance.core.models import BaseModel
from governance.deployments.choices import ReviewRole
from governance.deployments.models import DeploymentRequest, SignOff


class Authority(BaseModel):
    """The root CA and the timestamping authority; one active row of each kind."""

    kind = models.CharField(max_length=8, choices=AuthorityKind.choices)
    certificate_pem = models.TextField()
    encrypted_key_pem = models.TextField(help_text="PKCS#8, encrypted with the key-encryption key")
    fingerprint_sha256 = models.CharField(max_length=64, unique=True)
    # The CRL the root CA last signed (DER) and its number; the verifier uses it.
    crl_der = models.BinaryField(null=True, blank=True, editable=False)
    crl_number = models.PositiveIntegerField(default=0)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["kind"], name="one_authority_per_kind")]

    def __str__(self) -> str:
        return f"{self.get_kind_display()} {self.fingerprint_sha256[:16]}"


class SigningCertificate(BaseModel):
    """A reviewer's personal signing certificate for one role, issued by the root CA."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="signing_certificates")
    role = models.CharField(max_length=12, choices=ReviewRole.choices)
    serial_number = models.CharField(max_length=64, unique=True)  # decimal text: serials exceed 64 bits
    subject = models.CharField(max_length=300)
    certificate_pem = models.TextField()
    encrypted_key_pem = models.TextField(help_text="PKCS#8, encrypted with the key-encryption key")
    fingerprint_sha256 = models.CharField(max_length=64, unique=True)
    not_after = models.DateTimeField()
    revoked_at = models.DateTimeField(null=True, blank=True)
    revocation_reason = models.CharField(max_length=16, choices=RevocationReason.choices, blank=True)

    class Meta:
        ordering = ["-created_at"]
        # serves certificate_for(user, role): the newest certificate of a user and role
        indexes = [models.Index(fields=["user", "role", "-created_at"], name="signingcert_user_role_idx")]

    def __str__(self) -> str:
        return f"{self.subject} ({self.role}{', revoked' if self.revoked_at else ''})"


class ApprovalPacket(BaseModel):
    """The PDF for one evidence digest of one request: rendered once, then signed in turn.
    `pdf` is always the latest revision (each signature is an incremental update of it); it is
    empty while the heavy worker renders the packet (status `rendering`) and when that failed."""

    deployment = models.ForeignKey(DeploymentRequest, on_delete=models.PROTECT, related_name="approval_packets")
    evidence_digest = models.CharField(max_length=64)
    status = models.CharField(max_length=10, choices=PacketStatus.choices, default=PacketStatus.RENDERED)
    pdf = models.BinaryField(editable=False)
    pdf_sha256 = models.CharField(max_length=64, db_index=True)  # serves the download by hash
    rendered_at = models.DateTimeField(null=True, blank=True)
    completed_at = models.DateTimeField(null=True, blank=True)
    voided_at = models.DateTimeField(null=True, blank=True)
    void_reason = models.TextField(blank=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["deployment", "evidence_digest"], condition=Q(voided_at__isnull=True), name="one_live_packet"
            )
        ]
        # serves approval_state(): the live packet of a request
        indexes = [models.Index(fields=["deployment", "voided_at", "-created_at"], name="packet_live_idx")]


class PacketSignature(BaseModel):
    """The PDF signature of one sign-off: its packet, certificate, field and the packet's hash right
    after it. The decision itself (who, role, approve/reject, meaning, evidence digest, voided) is
    the sign-off's (deployments.SignOff): a signature is live exactly when its sign-off is."""

    signoff = models.OneToOneField(SignOff, on_delete=models.CASCADE, related_name="signature")
    packet = models.ForeignKey(ApprovalPacket, on_delete=models.PROTECT, related_name="signatures")
    certificate = models.ForeignKey(SigningCertificate, on_delete=models.PROTECT, related_name="signatures")
    field_name = models.CharField(max_length=40)
    pdf_sha256 = models.CharField(max_length=64, blank=True)  # the packet right after this signature
    # The decision is recorded first; the heavy worker signs the packet afterwards.
    status = models.CharField(max_length=8, choices=SignatureStatus.choices, default=SignatureStatus.PENDING)
    error = models.TextField(blank=True)

    class Meta:
        ordering = ["id"]


class PacketVerification(BaseModel):
    """The verification of one exact PDF, keyed by its SHA-256: the gate reads this, never the PDF."""

    pdf_sha256 = models.CharField(max_length=64, unique=True)
    deployment = models.ForeignKey(
        DeploymentRequest, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    evidence_digest = models.CharField(max_length=64, blank=True)  # as embedded in the PDF
    evidence_current = models.BooleanField(default=False)  # at verified_at
    signatures = models.JSONField(default=list)
    legal_valid = models.BooleanField(default=False)
    engineering_valid = models.BooleanField(default=False)
    all_valid = models.BooleanField(default=False)
    problems = models.JSONField(default=list)
    verified_at = models.DateTimeField()

    class Meta:
        ordering = ["-verified_at"]


class VerificationJob(BaseModel):
    """An uploaded file on its way through the heavy worker's verifier. The bytes live here only
    until the worker is done with them (emptied then, whatever the outcome); the row is deleted
    after APPROVALS_VERIFY_JOB_KEEP_S (the stored PacketVerification stays). Only the uploader
    reads it."""

    requested_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    status = models.CharField(max_length=8, choices=VerificationStatus.choices, default=VerificationStatus.QUEUED)
    upload = models.BinaryField(editable=False, default=b"")  # at most APPROVALS_MAX_UPLOAD_BYTES
    upload_size = models.PositiveIntegerField()
    upload_sha256 = models.CharField(max_length=64)
    result = models.JSONField(null=True, blank=True)  # the report as the API answers it (status done)
    verification = models.ForeignKey(
        PacketVerification, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    error = models.TextField(blank=True)  # refused or failed: the problem, in words
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [
            # a user's files still waiting (the APPROVALS_VERIFY_MAX_PENDING bound)
            models.Index(fields=["requested_by", "status"], name="verifyjob_user_status_idx"),
            # the expiry sweep
            models.Index(fields=["status", "created_at"], name="verifyjob_status_created_idx"),
        ]
