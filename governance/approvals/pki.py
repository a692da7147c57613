"""The organisation's PKI as pure functions (no Django): a root CA, a timestamping key, one
signing certificate per reviewer and role, a CRL, and private keys encrypted at rest.

RSA 3072 for everything that signs a PDF: an ECDSA key makes pyHanko mark the file PDF 2.0, which
breaks PDF/A-3. The one exception is the model-signing key (`make_model_signer`): OpenSSF
model-signing signs only with elliptic-curve keys, and it signs no PDF.
"""

from __future__ import annotations

import hashlib
import inspect
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

RSA_KEY_BITS = 3072
CA_VALIDITY = timedelta(days=3650)
TSA_VALIDITY = timedelta(days=1825)
SIGNER_VALIDITY = timedelta(days=730)
MODEL_SIGNER_VALIDITY = timedelta(days=1825)
# Certificates start a little in the past: a verifier whose clock lags must not see "not yet valid".
BACKDATE = timedelta(minutes=5)


def new_rsa_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=RSA_KEY_BITS)


def encrypt_key(key: rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey, kek: bytes) -> str:
    """PKCS#8, encrypted with the key-encryption key (PBES2/AES-256), as PEM text."""
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.BestAvailableEncryption(kek)
    ).decode()


def decrypt_key(pem: str, kek: bytes) -> rsa.RSAPrivateKey:
    # Skipping the RSA consistency check (slow for 3072-bit keys) is safe here: we generated
    # every one of these keys, and they come out of our own encrypted storage.
    key = serialization.load_pem_private_key(pem.encode(), password=kek, unsafe_skip_rsa_key_validation=True)
    if not isinstance(key, rsa.RSAPrivateKey):
        raise ValueError("approval signing keys must be RSA")
    return key


def decrypt_ec_key(pem: str, kek: bytes) -> ec.EllipticCurvePrivateKey:
    key = serialization.load_pem_private_key(pem.encode(), password=kek)
    if not isinstance(key, ec.EllipticCurvePrivateKey):
        raise ValueError("the model-signing key must be an elliptic-curve key")
    return key


def cert_pem(cert: x509.Certificate) -> str:
    return cert.public_bytes(serialization.Encoding.PEM).decode()


def load_cert(pem: str) -> x509.Certificate:
    return x509.load_pem_x509_certificate(pem.encode())


def fingerprint(cert: x509.Certificate) -> str:
    return cert.fingerprint(hashes.SHA256()).hex()


def _name(organisation: str, common_name: str, unit: str | None = None, title: str | None = None) -> x509.Name:
    attributes = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, organisation)]
    if unit:
        attributes.append(x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, unit))
    if title:
        attributes.append(x509.NameAttribute(NameOID.TITLE, title))
    attributes.append(x509.NameAttribute(NameOID.COMMON_NAME, common_name))
    return x509.Name(attributes)


# Every usage x509.KeyUsage takes (digital_signature, ..., decipher_only): _key_usage sets the
# ones it is given and clears the rest.
_KEY_USAGES = tuple(inspect.signature(x509.KeyUsage).parameters)


def _key_usage(**enabled: bool) -> x509.KeyUsage:
    unknown = set(enabled) - set(_KEY_USAGES)
    if unknown:
        raise TypeError(f"not a key usage: {', '.join(sorted(unknown))}")
    return x509.KeyUsage(**{usage: enabled.get(usage, False) for usage in _KEY_USAGES})


@dataclass(frozen=True, slots=True)
class Issued:
    certificate: x509.Certificate
    key: rsa.RSAPrivateKey


def make_root_ca(organisation: str, *, now: datetime | None = None, key: rsa.RSAPrivateKey | None = None) -> Issued:
    now = now or datetime.now(UTC)
    key = key or new_rsa_key()
    name = _name(organisation, f"{organisation} Approvals Root CA")
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - BACKDATE)
        .not_valid_after(now + CA_VALIDITY)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(_key_usage(key_cert_sign=True, crl_sign=True), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return Issued(certificate, key)


def _leaf(
    ca: Issued,
    subject: x509.Name,
    validity: timedelta,
    extended_usage: x509.ObjectIdentifier,
    *,
    non_repudiation: bool,
    eku_critical: bool,
    now: datetime | None,
    key: rsa.RSAPrivateKey | None,
) -> Issued:
    key = key or new_rsa_key()
    certificate = _leaf_certificate(
        ca,
        subject,
        key.public_key(),
        validity,
        extended_usage,
        non_repudiation=non_repudiation,
        eku_critical=eku_critical,
        now=now,
    )
    return Issued(certificate, key)


def _leaf_certificate(
    ca: Issued,
    subject: x509.Name,
    public_key: rsa.RSAPublicKey | ec.EllipticCurvePublicKey,
    validity: timedelta,
    extended_usage: x509.ObjectIdentifier,
    *,
    non_repudiation: bool,
    eku_critical: bool,
    now: datetime | None,
) -> x509.Certificate:
    now = now or datetime.now(UTC)
    not_after = min(now + validity, ca.certificate.not_valid_after_utc)
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(ca.certificate.subject)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - BACKDATE)
        .not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(_key_usage(digital_signature=True, content_commitment=non_repudiation), critical=True)
        .add_extension(x509.ExtendedKeyUsage([extended_usage]), critical=eku_critical)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca.key.public_key()), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(public_key), critical=False)
        .sign(ca.key, hashes.SHA256())
    )


def make_tsa(
    ca: Issued, organisation: str, *, now: datetime | None = None, key: rsa.RSAPrivateKey | None = None
) -> Issued:
    # RFC 3161 2.3: the timestamping EKU is the only one, and critical.
    return _leaf(
        ca,
        _name(organisation, f"{organisation} Timestamping Authority"),
        TSA_VALIDITY,
        ExtendedKeyUsageOID.TIME_STAMPING,
        non_repudiation=False,
        eku_critical=True,
        now=now,
        key=key,
    )


def make_signer(
    ca: Issued,
    organisation: str,
    *,
    full_name: str,
    username: str,
    role: str,
    now: datetime | None = None,
    key: rsa.RSAPrivateKey | None = None,
) -> Issued:
    """A personal signing certificate: the name printed on the signature, the role as OU and title.
    Non-repudiation is set: pyHanko requires it of signers by default, and it says "personal"."""
    subject = _name(organisation, full_name or username, unit=f"{role} reviewers", title=f"{role} reviewer")
    subject = x509.Name([*subject, x509.NameAttribute(NameOID.USER_ID, username)])
    return _leaf(
        ca,
        subject,
        SIGNER_VALIDITY,
        ExtendedKeyUsageOID.EMAIL_PROTECTION,
        non_repudiation=True,
        eku_critical=False,
        now=now,
        key=key,
    )


@dataclass(frozen=True, slots=True)
class IssuedEc:
    certificate: x509.Certificate
    key: ec.EllipticCurvePrivateKey


def make_model_signer(ca: Issued, organisation: str, *, now: datetime | None = None) -> IssuedEc:
    """The organisation's key for signing model weights (OpenSSF model-signing bundles): EC P-256,
    which the library requires, issued by the root CA; code signing is its only extended usage.
    `model_signing verify certificate --certificate_chain ca.pem` trusts it through the root."""
    key = ec.generate_private_key(ec.SECP256R1())
    certificate = _leaf_certificate(
        ca,
        _name(organisation, f"{organisation} Model Signing"),
        key.public_key(),
        MODEL_SIGNER_VALIDITY,
        ExtendedKeyUsageOID.CODE_SIGNING,
        non_repudiation=False,
        eku_critical=False,
        now=now,
    )
    return IssuedEc(certificate, key)


@dataclass(frozen=True, slots=True)
class Revoked:
    serial_number: int
    revoked_at: datetime
    reason: x509.ReasonFlags


def make_crl(
    ca: Issued, revoked: Iterable[Revoked], *, number: int, now: datetime | None = None
) -> x509.CertificateRevocationList:
    now = now or datetime.now(UTC)
    builder = (
        x509.CertificateRevocationListBuilder()
        .issuer_name(ca.certificate.subject)
        .last_update(now - BACKDATE)
        .next_update(now + timedelta(days=7))
        .add_extension(x509.CRLNumber(number), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca.key.public_key()), critical=False)
    )
    for entry in revoked:
        builder = builder.add_revoked_certificate(
            x509.RevokedCertificateBuilder()
            .serial_number(entry.serial_number)
            .revocation_date(entry.revoked_at)
            .add_extension(x509.CRLReason(entry.reason), critical=False)
            .build()
        )
    return builder.sign(ca.key, hashes.SHA256())


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
