"""The organisation's PKI: root CA and TSA as the issue asks, keys never in clear, pki_init idempotent."""

from __future__ import annotations

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import ExtendedKeyUsageOID
from django.core.management import call_command

from governance.approvals import pki
from governance.approvals.choices import AuthorityKind
from governance.approvals.models import Authority, SigningCertificate
from governance.approvals.services import certificates_sync
from governance.audit.actions import AuditAction
from governance.audit.models import AuditEvent


def test_root_ca_and_tsa(org_pki: Authority, settings) -> None:
    ca = pki.load_cert(org_pki.certificate_pem)
    public = ca.public_key()
    assert isinstance(public, rsa.RSAPublicKey)
    assert public.key_size == 3072
    assert ca.issuer == ca.subject
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    tsa_row = Authority.objects.get(kind=AuthorityKind.TSA)
    tsa = pki.load_cert(tsa_row.certificate_pem)
    usage = tsa.extensions.get_extension_for_class(x509.ExtendedKeyUsage)
    assert usage.critical
    assert list(usage.value) == [ExtendedKeyUsageOID.TIME_STAMPING]
    tsa.verify_directly_issued_by(ca)
    for row in (org_pki, tsa_row):
        assert row.encrypted_key_pem.startswith("-----BEGIN ENCRYPTED PRIVATE KEY-----")
        kek = settings.APPROVALS_KEY_ENCRYPTION_KEY.encode()
        assert pki.decrypt_key(row.encrypted_key_pem, kek).key_size == 3072
        with pytest.raises(ValueError):
            pki.decrypt_key(row.encrypted_key_pem, b"wrong-key-encryption-key-0123456789")
    assert AuditEvent.objects.filter(action=AuditAction.PKI_INITIALISED).count() == 1


def test_pki_init_command_is_idempotent_and_issues_reviewer_certificates(org_pki: Authority, personas, capsys) -> None:
    call_command("pki_init")
    assert "already present" in capsys.readouterr().out
    assert Authority.objects.count() == 2
    roles = set(SigningCertificate.objects.values_list("user__username", "role"))
    assert roles == {("legal", "legal"), ("eng", "engineering")}
    legal = SigningCertificate.objects.get(user=personas.legal)
    cert = pki.load_cert(legal.certificate_pem)
    cert.verify_directly_issued_by(pki.load_cert(org_pki.certificate_pem))
    assert "legal reviewers" in legal.subject
    assert legal.encrypted_key_pem.startswith("-----BEGIN ENCRYPTED PRIVATE KEY-----")
    certificates_sync(user=personas.legal, actor="system:test")  # nothing new: one live certificate per role
    assert SigningCertificate.objects.filter(user=personas.legal).count() == 1


def test_no_key_encryption_key_outside_debug_is_refused(db, settings, key_pool) -> None:
    from governance.approvals.services import pki_init
    from governance.core.errors import ApplicationError

    settings.APPROVALS_KEY_ENCRYPTION_KEY = ""
    settings.DEBUG = False
    with pytest.raises(ApplicationError, match="APPROVALS_KEY_ENCRYPTION_KEY"):
        pki_init()
    assert not Authority.objects.exists()


def test_bootstrap_runs_pki_init_and_a_debug_instance_makes_its_own_kek(db, settings, key_pool, tmp_path) -> None:
    from governance.core.management.commands.bootstrap import BOOTSTRAP_STEPS

    assert "pki_init" in BOOTSTRAP_STEPS
    settings.DEBUG = True
    settings.APPROVALS_KEY_ENCRYPTION_KEY = ""
    settings.APPROVALS_KEK_PATH = str(tmp_path / "keys" / "approvals-kek")
    call_command("pki_init")
    kek = tmp_path / "keys" / "approvals-kek"
    assert kek.stat().st_mode & 0o777 == 0o600
    root = Authority.objects.get(kind=AuthorityKind.ROOT_CA)
    assert pki.decrypt_key(root.encrypted_key_pem, kek.read_bytes().strip()).key_size == 3072
    assert kek.read_text().strip() not in root.encrypted_key_pem
