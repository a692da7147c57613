"""Sign-offs: `sign_off` is the one way a reviewer decides on a request (the API, the deployments
review endpoint and the UI call it). Each rule it checks refuses with a message and a code; a
refusal is written to the audit trail in a transaction of its own, so it survives the refusal
itself. The PDF is signed afterwards by the heavy worker (services/packet_jobs.py)."""

from __future__ import annotations

import uuid
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone

from governance.approvals.choices import ROLE_GROUPS, SIGNATURE_FIELDS, RefusalCode, SignatureStatus
from governance.approvals.models import PacketSignature, SigningCertificate
from governance.approvals.selectors import certificate_for, printed_name, root_ca, signoff_meaning
from governance.approvals.services.certificates import certificate_issue
from governance.approvals.services.packet_queue import PACKET_TASK, packet_queue
from governance.audit.actions import AuditAction
from governance.audit.services import audit_record, format_time
from governance.core.errors import ApplicationError, ConflictError, PermissionDeniedError, invalid_input
from governance.core.outbox import outbox_enqueue
from governance.core.roles import has_role
from governance.deployments.choices import AuthMethod, ReviewRole, SignOffDecision, Status
from governance.deployments.models import DeploymentRequest, SignOff
from governance.deployments.readiness import blocks_signing
from governance.deployments.selectors import deployment_live_signoffs, deployment_readiness
from governance.deployments.services import deployment_lock, deployment_transition
from governance.sso.selectors import step_up_get
from governance.sso.services import step_up_take


class SignOffRefused(Exception):
    def __init__(self, code: RefusalCode, error: ApplicationError) -> None:
        super().__init__(error.message)
        self.code, self.error = code, error


def _refuse(
    code: RefusalCode, message: str, *, status: int = 409, extra: dict[str, Any] | None = None
) -> SignOffRefused:
    error_type = PermissionDeniedError if status == 403 else ConflictError
    error = error_type(message, extra={"code": str(code), **(extra or {})})
    if status not in (403, 409):
        error.status = status
    return SignOffRefused(code, error)


def sign_off(
    *,
    deployment: DeploymentRequest,
    user: User,
    role: str,
    decision: str,
    evidence_digest: str,
    password: str = "",
    step_up_id: uuid.UUID | None = None,
    comment: str = "",
) -> SignOff:
    """A reviewer signs the approval packet of `deployment` as `role` with `decision`.

    Rules, each refused with a message and an `approval.signoff_refused` audit event: the user
    holds the role; is not on the request's team; re-authenticates: re-enters their password, or,
    under single sign-on, signed in again at the provider (`step_up_id`, the step-up the session
    holds, whose `auth_time` is within SSO_STEP_UP_MAX_AGE_S and which no signature used yet: it
    is taken here, in the sign-off's transaction, so one step-up signs once however many
    sign-offs race for it, and a refused sign-off leaves it unused); the request is in
    review; `evidence_digest` is the current one; legal approves before engineering; each role
    signs once per digest; the certificate is not revoked; an approval has no blockers left.
    The decision is recorded at once (a rejection moves the request to rejected) and the heavy
    task `approvals.packet_complete` then renders and signs the packet (`packet_jobs`); after the
    second approval's signature it verifies the file, stores the result, moves the request to
    approved and signs an audit checkpoint."""
    if role not in ReviewRole.values:
        raise invalid_input("role", f"one of {', '.join(ReviewRole.values)}")
    if decision not in SignOffDecision.values:
        raise invalid_input("decision", f"one of {', '.join(SignOffDecision.values)}")
    if not isinstance(password, str) or (not password and step_up_id is None):
        how = "your password again" if settings.LOCAL_LOGIN_ENABLED else "a fresh sign-in"
        if settings.SSO_ENABLED:
            how += " (or a fresh sign-in at the identity provider: /oidc/step-up/)"
        raise invalid_input("password", f"signing needs {how}")
    if decision == SignOffDecision.REJECT and not comment.strip():
        raise invalid_input("comment", "say why you reject")
    try:
        with transaction.atomic():
            return _sign_off(deployment, user, role, decision, password, step_up_id, evidence_digest, comment.strip())
    except SignOffRefused as refusal:
        with transaction.atomic():
            audit_record(
                actor=user,
                action=AuditAction.SIGNOFF_REFUSED,
                obj=deployment,
                data={
                    "role": role,
                    "decision": decision,
                    "code": str(refusal.code),
                    "message": refusal.error.message,
                    "evidence_digest": evidence_digest,
                },
            )
        raise refusal.error from None


def signoff_refuse_locked_out(
    *, deployment: DeploymentRequest, user: User, role: str, decision: str, evidence_digest: str
) -> None:
    """The account is locked out (django-axes): audit the refusal, then raise it (403)."""
    error = _refuse(
        RefusalCode.LOCKED_OUT,
        "too many failed logins or sign-off passwords: this account is locked out for a while",
        status=403,
    ).error
    with transaction.atomic():
        audit_record(
            actor=user,
            action=AuditAction.SIGNOFF_REFUSED,
            obj=deployment,
            data={
                "role": role,
                "decision": decision,
                "code": str(RefusalCode.LOCKED_OUT),
                "message": error.message,
                "evidence_digest": evidence_digest,
            },
        )
    raise error


def _sign_off(
    deployment: DeploymentRequest,
    user: User,
    role: str,
    decision: str,
    password: str,
    step_up_id: uuid.UUID | None,
    evidence_digest: str,
    comment: str,
) -> SignOff:
    deployment = deployment_lock(deployment)
    if not has_role(user, ROLE_GROUPS[role]):
        raise _refuse(RefusalCode.ROLE_NOT_HELD, f"you do not hold the {role} reviewer role", status=403)
    if deployment.requester_id == user.pk or deployment.team.members.filter(pk=user.pk).exists():
        raise _refuse(
            RefusalCode.OWN_TEAM, "nobody signs off a request of their own team (separation of duties)", status=403
        )
    auth_method = _reauthentication(user, password, step_up_id)
    if deployment.status != Status.IN_REVIEW:
        raise _refuse(
            RefusalCode.NOT_IN_REVIEW,
            f"a {deployment.status} request is not in review",
            extra={"fields": {"status": [deployment.status]}},
        )
    if evidence_digest != deployment.evidence_digest:
        raise _refuse(
            RefusalCode.STALE_DIGEST,
            "the evidence changed since you looked; review the new packet",
            extra={"fields": {"evidence_digest": [f"current is {deployment.evidence_digest}"]}},
        )
    any_digest = list(deployment_live_signoffs(deployment))
    live = [s for s in any_digest if s.evidence_digest == deployment.evidence_digest]
    if any(s.role == role for s in live):
        raise _refuse(RefusalCode.ALREADY_SIGNED, f"the {role} sign-off on this evidence is already recorded")
    # Separation of duties: whoever holds both reviewer roles still signs only one of them.
    other = next((s for s in any_digest if s.signer_id == user.pk and s.role != role), None)
    if other is not None:
        raise _refuse(
            RefusalCode.SAME_SIGNER,
            f"you already signed this request as {other.role}; each sign-off needs a distinct person "
            "(separation of duties)",
            status=403,
        )
    if decision == SignOffDecision.APPROVE:
        # The readiness rule: anything but the signatures still to be given refuses the sign-off.
        blocking = blocks_signing(deployment_readiness(deployment))
        if blocking:
            raise _refuse(
                RefusalCode.BLOCKERS,
                f"{len(blocking)} blocker(s) stand in the way: " + "; ".join(r.code for r in blocking),
                extra={"blockers": [reason.as_blocker() for reason in blocking]},
            )
    if (
        decision == SignOffDecision.APPROVE
        and role == ReviewRole.ENGINEERING
        and not any(s.role == ReviewRole.LEGAL and s.decision == SignOffDecision.APPROVE for s in live)
    ):
        raise _refuse(RefusalCode.WRONG_ORDER, "legal signs first; engineering signs after the legal approval")
    if root_ca() is None:
        raise _refuse(RefusalCode.NO_PKI, "the approvals PKI is not initialised; run `manage.py pki_init`", status=503)
    certificate = certificate_for(user, role)
    if certificate is not None and certificate.revoked_at is not None:
        raise _refuse(
            RefusalCode.CERTIFICATE_REVOKED,
            f"your {role} signing certificate was revoked ({certificate.revocation_reason}); "
            "an administrator must issue a new one",
        )
    if certificate is None:  # a reviewer who had the role before the PKI existed
        certificate = certificate_issue(user=user, role=role, actor=user)
    return _signoff_record(deployment, user, role, decision, comment, certificate, auth_method)


def _reauthentication(user: User, password: str, step_up_id: uuid.UUID | None) -> AuthMethod:
    """How the signer re-authenticated, or a refusal. A password, when local accounts are on; else a
    step-up at the provider whose `auth_time` is recent (the callback already checked it is no older
    than the step-up request, so a provider that ignored prompt=login gives no step-up at all),
    taken for this signature (one step-up, one signature: 21 CFR 11.200)."""
    if password:
        if not settings.LOCAL_LOGIN_ENABLED:
            raise _refuse(
                RefusalCode.PASSWORD_DISABLED,
                "local passwords are switched off; sign in again at the identity provider (/oidc/step-up/)",
                status=403,
            )
        if not user.check_password(password):
            raise _refuse(
                RefusalCode.WRONG_PASSWORD, "the password is not correct; signing needs your password again", status=403
            )
        return AuthMethod.PASSWORD
    step_up = step_up_get(step_up_id=step_up_id, user=user) if step_up_id is not None else None
    if step_up is None:  # sign_off asks for one or the other first; a step-up row pruned or never written
        raise invalid_input("password", "signing needs your password again or a fresh sign-in")
    used = _refuse(
        RefusalCode.STEP_UP_USED,
        "this sign-in at the identity provider signed something already; each signature needs its own: "
        "sign in again (/oidc/step-up/)",
        status=403,
    )
    if step_up.used_at is not None:
        raise used
    age_s = (timezone.now() - step_up.auth_time).total_seconds()
    if not -60 <= age_s <= settings.SSO_STEP_UP_MAX_AGE_S:
        raise _refuse(
            RefusalCode.STEP_UP_STALE,
            f"your sign-in at the identity provider is {int(age_s)} s old; signing needs one within "
            f"{settings.SSO_STEP_UP_MAX_AGE_S} s: sign in again (/oidc/step-up/)",
            status=403,
        )
    if not step_up_take(step_up_id=step_up.pk, user=user):  # a concurrent sign-off took it first
        raise used
    return AuthMethod.OIDC_STEP_UP


def _signoff_record(
    deployment: DeploymentRequest,
    user: User,
    role: str,
    decision: str,
    comment: str,
    certificate: SigningCertificate,
    auth_method: AuthMethod = AuthMethod.PASSWORD,
) -> SignOff:
    """Record the decision (pending its signature) and queue the heavy task that renders and signs
    the packet: no PDF work under the request row lock or the audit chain head."""
    packet, queued = packet_queue(deployment=deployment, actor=user)
    if not queued:
        outbox_enqueue(PACKET_TASK, packet.pk)
    meaning = signoff_meaning(role, decision, user)
    recorded_at = timezone.now()
    signoff = SignOff.objects.create(
        deployment=deployment,
        role=role,
        decision=decision,
        signer=user,
        signer_name=printed_name(user),
        meaning=meaning,
        comment=comment,
        signed_at=recorded_at,  # when the decision was made; the PDF's timestamp says when it was signed
        evidence_digest=deployment.evidence_digest,
        auth_method=auth_method,
    )
    # Its PDF signature, pending until the heavy worker signs the packet.
    signoff.signature = PacketSignature.objects.create(
        signoff=signoff,
        packet=packet,
        certificate=certificate,
        field_name=SIGNATURE_FIELDS[role],
        status=SignatureStatus.PENDING,
    )
    audit_record(
        actor=user,
        action=AuditAction.SIGNOFF_RECORDED,
        obj=deployment,
        data={
            "role": role,
            "verdict": decision,
            "evidence_digest": deployment.evidence_digest,
            "meaning": meaning,
            "comment": comment,
            "certificate_sha256": certificate.fingerprint_sha256,
            "signed_at": format_time(recorded_at),
            "auth_method": str(auth_method),
        },
    )
    if decision == SignOffDecision.REJECT:
        # A rejection takes effect when it is made; the worker still signs it into the packet.
        deployment_transition(deployment, Status.REJECTED, user, f"{role} rejected: {comment}")
    return signoff
