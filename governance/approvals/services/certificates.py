"""The organisation's PKI as stored: the root CA and timestamping authority (`pki_init`), personal
signing certificates (issue, revoke with a fresh CRL, sync with the roles a user holds)."""

from __future__ import annotations

from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from django.conf import settings
from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone

from governance.approvals import pki
from governance.approvals.choices import ROLE_GROUPS, AuthorityKind, RevocationReason
from governance.approvals.keys import ensure_development_kek, key_encryption_key
from governance.approvals.models import Authority, SigningCertificate
from governance.approvals.selectors import printed_name, root_ca
from governance.audit.actions import AuditAction
from governance.audit.services import audit_record
from governance.core.errors import ApplicationError, invalid_input
from governance.core.roles import has_role
from governance.core.services import write_service
from governance.deployments.choices import ReviewRole

Actor = User | str
_REVOCATION_FLAGS = {
    RevocationReason.ROLE_REMOVED: x509.ReasonFlags.affiliation_changed,
    RevocationReason.KEY_COMPROMISE: x509.ReasonFlags.key_compromise,
    RevocationReason.SUPERSEDED: x509.ReasonFlags.superseded,
    RevocationReason.CESSATION: x509.ReasonFlags.cessation_of_operation,
}


def load_issued(row: Authority | SigningCertificate) -> pki.Issued:
    """A stored certificate with its private key, decrypted for signing."""
    return pki.Issued(pki.load_cert(row.certificate_pem), pki.decrypt_key(row.encrypted_key_pem, key_encryption_key()))


def _authority_row(kind: str, issued: pki.Issued, kek: bytes) -> Authority:
    return Authority.objects.create(
        kind=kind,
        certificate_pem=pki.cert_pem(issued.certificate),
        encrypted_key_pem=pki.encrypt_key(issued.key, kek),
        fingerprint_sha256=pki.fingerprint(issued.certificate),
    )


@write_service
def pki_init(*, actor: Actor = "system:pki") -> tuple[Authority, bool]:
    """Create the root CA (RSA 3072), the timestamping authority and an empty CRL; idempotent.
    Returns the root CA and whether it was created now."""
    ensure_development_kek()
    kek = key_encryption_key()
    with transaction.atomic():
        existing = Authority.objects.select_for_update().filter(kind=AuthorityKind.ROOT_CA).first()
        if existing is not None:
            return existing, False
        organisation = settings.APPROVALS_ORGANISATION
        ca = pki.make_root_ca(organisation)
        tsa = pki.make_tsa(ca, organisation)
        root = _authority_row(AuthorityKind.ROOT_CA, ca, kek)
        _authority_row(AuthorityKind.TSA, tsa, kek)
        _publish_crl(root, ca)
        audit_record(
            actor=actor,
            action=AuditAction.PKI_INITIALISED,
            obj=("approvals.authority", str(root.code)),
            data={
                "root_ca_sha256": root.fingerprint_sha256,
                "tsa_sha256": pki.fingerprint(tsa.certificate),
                "organisation": organisation,
            },
        )
    return root, True


def _publish_crl(root: Authority, ca: pki.Issued) -> None:
    revoked = [
        pki.Revoked(int(serial), revoked_at, _REVOCATION_FLAGS[RevocationReason(reason)])
        for serial, revoked_at, reason in SigningCertificate.objects.filter(revoked_at__isnull=False).values_list(
            "serial_number", "revoked_at", "revocation_reason"
        )
        if revoked_at is not None
    ]
    root.crl_number += 1
    root.crl_der = pki.make_crl(ca, revoked, number=root.crl_number).public_bytes(serialization.Encoding.DER)
    root.save(update_fields=["crl_der", "crl_number", "updated_at"])


def require_pki() -> Authority:
    """The root CA, or a 503 naming the command that creates it."""
    root = root_ca()
    if root is None:
        raise ApplicationError("the approvals PKI is not initialised; run `manage.py pki_init`", status=503)
    return root


@write_service
def model_signer(*, actor: Actor = "system:pki") -> tuple[pki.IssuedEc, str] | None:
    """The organisation's model-signing key and certificate with the root CA's certificate (PEM), or
    None while the PKI is not set up. Issued by the root CA the first time it is asked for, so a PKI
    set up before model signing existed gets one too (the root's row lock: issued once)."""
    kek = key_encryption_key()
    row = Authority.objects.filter(kind=AuthorityKind.MODEL_SIGNER).first()
    if row is None:
        root = Authority.objects.select_for_update().filter(kind=AuthorityKind.ROOT_CA).first()
        if root is None:
            return None
        row = Authority.objects.filter(kind=AuthorityKind.MODEL_SIGNER).first()  # issued while we waited?
        if row is None:
            issued = pki.make_model_signer(load_issued(root), settings.APPROVALS_ORGANISATION)
            row = Authority.objects.create(
                kind=AuthorityKind.MODEL_SIGNER,
                certificate_pem=pki.cert_pem(issued.certificate),
                encrypted_key_pem=pki.encrypt_key(issued.key, kek),
                fingerprint_sha256=pki.fingerprint(issued.certificate),
            )
            audit_record(
                actor=actor,
                action=AuditAction.MODEL_SIGNER_ISSUED,
                obj=("approvals.authority", str(row.code)),
                data={"certificate_sha256": row.fingerprint_sha256, "root_ca_sha256": root.fingerprint_sha256},
            )
    root_pem = Authority.objects.values_list("certificate_pem", flat=True).get(kind=AuthorityKind.ROOT_CA)
    return pki.IssuedEc(pki.load_cert(row.certificate_pem), pki.decrypt_ec_key(row.encrypted_key_pem, kek)), root_pem


def _certificate_facts(certificate: SigningCertificate, **extra: Any) -> dict[str, Any]:
    """What the audit trail says about a signing certificate (issue and revocation)."""
    return {
        "user": certificate.user.get_username(),
        "role": certificate.role,
        "serial": certificate.serial_number,
        **extra,
    }


@write_service
def certificate_issue(*, user: User, role: str, actor: Actor) -> SigningCertificate:
    """A personal signing certificate for `user` as `role`, from the root CA (key encrypted at rest)."""
    if role not in ReviewRole.values:
        raise invalid_input("role", f"one of {', '.join(ReviewRole.values)}")
    root = require_pki()
    issued = pki.make_signer(
        load_issued(root),
        settings.APPROVALS_ORGANISATION,
        full_name=printed_name(user),
        username=user.get_username(),
        role=role,
    )
    with transaction.atomic():
        certificate = SigningCertificate.objects.create(
            user=user,
            role=role,
            serial_number=str(issued.certificate.serial_number),
            subject=issued.certificate.subject.rfc4514_string(),
            certificate_pem=pki.cert_pem(issued.certificate),
            encrypted_key_pem=pki.encrypt_key(issued.key, key_encryption_key()),
            fingerprint_sha256=pki.fingerprint(issued.certificate),
            not_after=issued.certificate.not_valid_after_utc,
        )
        facts = _certificate_facts(certificate, sha256=certificate.fingerprint_sha256)
        audit_record(actor=actor, action=AuditAction.CERTIFICATE_ISSUED, obj=certificate, data=facts)
    return certificate


@write_service
def certificate_revoke(*, certificate: SigningCertificate, reason: str, actor: Actor) -> SigningCertificate:
    """Revoke and publish a new CRL in the same transaction (the verifier reads that CRL)."""
    with transaction.atomic():
        certificate = SigningCertificate.objects.select_for_update().get(pk=certificate.pk)
        if certificate.revoked_at is not None:
            return certificate
        certificate.revoked_at, certificate.revocation_reason = timezone.now(), RevocationReason(reason)
        certificate.save(update_fields=["revoked_at", "revocation_reason", "updated_at"])
        root = Authority.objects.select_for_update().get(kind=AuthorityKind.ROOT_CA)
        _publish_crl(root, load_issued(root))
        facts = _certificate_facts(certificate, reason=reason, crl_number=root.crl_number)
        audit_record(actor=actor, action=AuditAction.CERTIFICATE_REVOKED, obj=certificate, data=facts)
    return certificate


def certificates_sync(*, user: User, actor: Actor, issue: bool = True) -> None:
    """Revoke the live certificates of roles the user no longer holds; issue for roles held without one."""
    if root_ca() is None:
        return
    for role, group in ROLE_GROUPS.items():
        holds = has_role(user, group)
        live = SigningCertificate.objects.filter(user=user, role=role, revoked_at__isnull=True)
        if not holds:
            for certificate in live:
                certificate_revoke(certificate=certificate, reason=RevocationReason.ROLE_REMOVED, actor=actor)
        elif issue and not live.exists():
            certificate_issue(user=user, role=role, actor=actor)
