from django.db import models

from governance.core.roles import Role
from governance.deployments.choices import ReviewRole


class AuthorityKind(models.TextChoices):
    ROOT_CA = "root_ca", "Root CA"
    TSA = "tsa", "Timestamping authority"
    MODEL_SIGNER = "models", "Model signing"  # OpenSSF model-signing bundles of weights (EC P-256)


# The group a user needs to sign as each role.
ROLE_GROUPS: dict[str, str] = {
    ReviewRole.LEGAL: Role.LEGAL_REVIEWER,
    ReviewRole.ENGINEERING: Role.ENGINEERING_REVIEWER,
}
# The pre-created signature field of each role; legal signs first (a certification signature).
SIGNATURE_FIELDS: dict[str, str] = {ReviewRole.LEGAL: "LegalApproval", ReviewRole.ENGINEERING: "EngineeringApproval"}
SIGNING_ORDER: tuple[str, ...] = (ReviewRole.LEGAL, ReviewRole.ENGINEERING)


class PacketStatus(models.TextChoices):
    RENDERING = "rendering"  # queued for the heavy worker; no PDF yet
    FAILED = "failed"  # the render failed or ran past its time limit (void_reason says why); no PDF
    RENDERED = "rendered"  # unsigned, fields pre-created
    PARTIAL = "partial"  # some signatures, not all
    COMPLETE = "complete"  # legal and engineering approved
    REJECTED = "rejected"  # a reviewer signed a rejection
    VOID = "void"  # the evidence changed after rendering


class VerificationStatus(models.TextChoices):
    """An uploaded file's verification by the heavy worker (VerificationJob)."""

    QUEUED = "queued"  # waiting for the worker
    RUNNING = "running"  # the worker is verifying it
    DONE = "done"  # verified: the report says what the file proves (valid or not)
    REFUSED = "refused"  # over a bound or unreadable: `error` names the problem, nothing verified
    FAILED = "failed"  # past its time limit, or no worker took it: `error` says which


class SignatureStatus(models.TextChoices):
    """A sign-off records the decision at once (deployments.SignOff); the heavy worker then signs
    it into the packet (PacketSignature)."""

    PENDING = "pending"
    SIGNED = "signed"
    FAILED = "failed"  # the packet could not be rendered or signed; the sign-off is voided


class RevocationReason(models.TextChoices):
    ROLE_REMOVED = "role_removed"  # RFC 5280 affiliationChanged
    KEY_COMPROMISE = "key_compromise"
    SUPERSEDED = "superseded"
    CESSATION = "cessation"


class RefusalCode(models.TextChoices):
    ROLE_NOT_HELD = "role.not_held"
    OWN_TEAM = "team.own"
    WRONG_PASSWORD = "password.wrong"  # noqa: S105 - a refusal code, not a password
    LOCKED_OUT = "account.locked_out"  # django-axes: too many failed logins or sign-off passwords
    NOT_IN_REVIEW = "status.not_in_review"
    STALE_DIGEST = "evidence.stale"
    WRONG_ORDER = "order.legal_first"
    ALREADY_SIGNED = "signoff.already_signed"
    SAME_SIGNER = "signer.same"
    CERTIFICATE_REVOKED = "certificate.revoked"
    NO_PKI = "pki.missing"
    BLOCKERS = "blockers.present"
    STEP_UP_STALE = "step_up.stale"  # the provider sign-in (step-up) is older than SSO_STEP_UP_MAX_AGE_S
    STEP_UP_USED = "step_up.used"  # the step-up signed something already (one step-up, one signature)
    PASSWORD_DISABLED = "password.disabled"  # noqa: S105 - a refusal code; LOCAL_LOGIN_ENABLED is off
