"""Verify an approval packet (no Django): every signature with pyHanko against the organisation's
root CA and CRL, judged by `bottom_line` (an incremental update that changes page content keeps
`intact` true but fails DocMDP), and the embedded evidence read back out of the file."""

from __future__ import annotations

import hashlib
import io
import json
import zlib
from dataclasses import asdict, dataclass, field
from typing import Any

from asn1crypto import x509 as asn1_x509
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from pyhanko.pdf_utils import generic
from pyhanko.pdf_utils.misc import PdfError
from pyhanko.pdf_utils.reader import PdfFileReader
from pyhanko.sign.general import SigningError
from pyhanko.sign.validation import validate_pdf_signature
from pyhanko_certvalidator import ValidationContext

from governance.core.canonical import canonical_sha256
from governance.core.metrics import PACKET_VERIFY, timed

EVIDENCE_ATTACHMENT = "evidence.json"


class UploadRefused(Exception):
    """A file the verifier will not spend more work on: over a bound, or one its parsers fail on.
    The message names the problem (the API answers it as a 400 on `file`)."""


@dataclass(frozen=True, slots=True)
class VerifyLimits:
    """Bounds on the work one file may cause (settings APPROVALS_VERIFY_*; docs/approvals.md).
    A packet has one signature per role in one revision each, after the render and the fields."""

    max_signatures: int = 4
    max_revisions: int = 6
    # evidence.json decoded: far below pyHanko's 256 MiB stream limit (a 345 KB deflate bomb
    # decoded to 717 MB there); real evidence is tens of KB.
    max_evidence_bytes: int = 8 * 1024 * 1024


# Which signature field each role signs in, and the OU of that role's certificates.
ROLE_OF_FIELD = {"LegalApproval": "legal", "EngineeringApproval": "engineering"}


@dataclass(frozen=True, slots=True)
class SignatureReport:
    field: str
    role: str | None  # the role of the field, when the signer's certificate is for that role
    signer: str
    signer_fingerprint: str
    signed_at: str | None  # the RFC 3161 timestamp (UTC), else the signer's own claim
    timestamp_trusted: bool
    intact: bool
    valid: bool
    trusted: bool
    revoked: bool
    coverage: str
    modification_level: str | None
    docmdp_ok: bool | None
    bottom_line: bool  # pyHanko's judgement
    accepted: bool  # bottom_line, a certificate for the field's role, and a trusted timestamp
    summary: str


@dataclass(frozen=True, slots=True)
class PacketReport:
    pdf_sha256: str
    signatures: list[SignatureReport]
    evidence: dict[str, Any] | None
    evidence_digest: str  # as embedded in the file ("" when none could be read)
    deployment_code: str
    problems: list[str] = field(default_factory=list)

    def valid_for(self, role: str) -> bool:
        return any(s.role == role and s.accepted for s in self.signatures)

    @property
    def all_valid(self) -> bool:
        return bool(self.signatures) and all(s.accepted for s in self.signatures) and not self.problems

    def as_dict(self) -> dict[str, Any]:
        return {
            "pdf_sha256": self.pdf_sha256,
            "deployment": self.deployment_code,
            "evidence_digest": self.evidence_digest,
            "signatures": [asdict(s) for s in self.signatures],
            "legal_valid": self.valid_for("legal"),
            "engineering_valid": self.valid_for("engineering"),
            "all_valid": self.all_valid,
            "problems": list(self.problems),
        }


def _cert_role(cert: asn1_x509.Certificate) -> str | None:
    units = cert.subject.native.get("organizational_unit_name")
    unit = units[0] if isinstance(units, list) else units
    if isinstance(unit, str) and unit.endswith(" reviewers"):
        return unit.removesuffix(" reviewers")
    return None


def bounded_stream_data(stream: generic.StreamObject, limit: int) -> bytes:
    """A stream's decoded bytes, decoding at most `limit` bytes (pyHanko would decode everything).
    Only unfiltered and FlateDecode streams are read: that is what a packet's attachment uses."""
    filters = stream.get("/Filter")
    names = (
        [str(f) for f in filters] if isinstance(filters, generic.ArrayObject) else ([str(filters)] if filters else [])
    )
    raw = stream.encoded_data if stream.encoded_data is not None else stream.data
    if not names:
        data = raw
    elif names == ["/FlateDecode"] and "/DecodeParms" not in stream:
        decoder = zlib.decompressobj()
        try:
            data = decoder.decompress(raw, limit + 1)
        except zlib.error as exc:
            raise UploadRefused(f"{EVIDENCE_ATTACHMENT} is not valid deflate data: {exc}") from None
    else:
        raise UploadRefused(f"{EVIDENCE_ATTACHMENT} uses the filter(s) {', '.join(names)}; a packet uses FlateDecode")
    if len(data) > limit:
        raise UploadRefused(f"{EVIDENCE_ATTACHMENT} decodes to more than {limit} bytes")
    return bytes(data)


def read_attachment(reader: PdfFileReader, name: str, *, limit: int | None = None) -> bytes | None:
    """An embedded file by name, from the document's EmbeddedFiles name tree (flat or with Kids);
    decoded up to `limit` bytes when given (UploadRefused beyond)."""
    try:
        tree = reader.root["/Names"]["/EmbeddedFiles"]
    except KeyError:
        return None
    stack = [tree]
    while stack:
        node = stack.pop()
        if "/Kids" in node:
            stack.extend(kid.get_object() for kid in node["/Kids"])
        names = node.get("/Names", generic.ArrayObject())
        for index in range(0, len(names) - 1, 2):
            spec = names[index + 1].get_object()
            file_name = str(spec.get("/UF", spec.get("/F", names[index])))
            if file_name == name or str(names[index]) == name:
                stream = spec["/EF"]["/F"].get_object()
                return bytes(stream.data) if limit is None else bounded_stream_data(stream, limit)
    return None


@timed(PACKET_VERIFY)
def verify_packet(
    data: bytes, *, trust_root: x509.Certificate, crls: list[bytes], limits: VerifyLimits | None = None
) -> PacketReport:
    """Everything a verifier needs to say about one PDF: what fails a signature is reported.
    A file over a bound in `limits`, or one the parsers cannot read (RecursionError included),
    raises UploadRefused naming the problem, before any signature is validated."""
    try:
        return _verify_packet(data, trust_root=trust_root, crls=crls, limits=limits or VerifyLimits())
    except RecursionError:
        raise UploadRefused("the file nests objects deeper than the verifier reads") from None


def _value_id(value: Any) -> Any:
    return value.reference if isinstance(value, generic.IndirectObject) else id(value)


def _check_bounds(reader: PdfFileReader, embedded: list[Any], limits: VerifyLimits) -> None:
    revisions = reader.xrefs.total_revisions
    if revisions > limits.max_revisions:
        raise UploadRefused(f"the file has {revisions} revisions (incremental updates); at most {limits.max_revisions}")
    if len(embedded) > limits.max_signatures:
        raise UploadRefused(
            f"the file has {len(embedded)} signature fields with a value; at most {limits.max_signatures}"
        )
    values = [_value_id(sig.sig_field.raw_get("/V")) for sig in embedded]
    if len(set(values)) != len(values):
        raise UploadRefused("two signature fields point at the same signature value")


def _verify_packet(
    data: bytes, *, trust_root: x509.Certificate, crls: list[bytes], limits: VerifyLimits
) -> PacketReport:
    digest = hashlib.sha256(data).hexdigest()
    problems: list[str] = []
    try:
        reader = PdfFileReader(io.BytesIO(data), strict=False)
        embedded = list(reader.embedded_signatures)
    except (PdfError, ValueError, KeyError, TypeError, AttributeError, IndexError, AssertionError) as exc:
        raise UploadRefused(f"not a readable PDF: {exc or type(exc).__name__}") from None
    _check_bounds(reader, embedded, limits)

    evidence: dict[str, Any] | None = None
    embedded_digest = deployment_code = ""
    try:
        raw = read_attachment(reader, EVIDENCE_ATTACHMENT, limit=limits.max_evidence_bytes)
        if raw is None:
            problems.append("no evidence.json attached")
        else:
            try:
                evidence = json.loads(raw)
            except RecursionError:
                raise UploadRefused(f"{EVIDENCE_ATTACHMENT} nests deeper than the verifier reads") from None
            if not isinstance(evidence, dict):
                raise UploadRefused(f"{EVIDENCE_ATTACHMENT} is not a JSON object")
            embedded_digest = str(evidence.get("evidence_digest", ""))
            deployment_code = str(evidence.get("deployment", ""))
            if canonical_sha256(evidence.get("evidence")) != embedded_digest:
                problems.append("evidence.json does not hash to the evidence digest it states")
    except (PdfError, ValueError, KeyError, TypeError, AttributeError) as exc:
        problems.append(f"evidence.json unreadable: {exc}")

    root = asn1_x509.Certificate.load(trust_root.public_bytes(serialization.Encoding.DER))
    reports = []
    for sig in embedded:
        context = ValidationContext(trust_roots=[root], crls=crls, allow_fetching=False, revocation_mode="hard-fail")
        try:
            status = validate_pdf_signature(sig, context, ts_validation_context=context)
        except (SigningError, PdfError, ValueError) as exc:
            problems.append(f"{sig.field_name}: cannot be validated: {exc}")
            continue
        cert = status.signing_cert
        field_role = ROLE_OF_FIELD.get(sig.field_name)
        role = field_role if field_role is not None and _cert_role(cert) == field_role else None
        if field_role is not None and role is None:
            problems.append(f"{sig.field_name} was signed with a certificate that is not for the {field_role} role")
        ts = status.timestamp_validity
        signed_at = ts.timestamp if ts is not None else status.signer_reported_dt
        reports.append(
            SignatureReport(
                field=str(sig.field_name),
                role=role,
                signer=str(cert.subject.native.get("common_name", "")),
                signer_fingerprint=cert.sha256.hex(),
                signed_at=signed_at.isoformat() if signed_at else None,
                timestamp_trusted=bool(ts is not None and ts.valid and ts.trusted),
                intact=status.intact,
                valid=status.valid,
                trusted=status.trusted,
                revoked=status.revoked,
                coverage=status.coverage.name if status.coverage else "",
                modification_level=status.modification_level.name if status.modification_level else None,
                docmdp_ok=status.docmdp_ok,
                bottom_line=status.bottom_line,
                accepted=status.bottom_line and role is not None and ts is not None and ts.valid and ts.trusted,
                summary=status.summary(),
            )
        )
    if not reports:
        problems.append("no signatures")
    elif reports[-1].coverage != "ENTIRE_FILE":
        problems.append("the last signature does not cover the whole file")
    return PacketReport(digest, reports, evidence, embedded_digest, deployment_code, problems)
