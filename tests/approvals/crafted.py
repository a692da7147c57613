"""Crafted approval packets, made in memory (no database): a signed packet from a throwaway PKI, and
the uploads of issue 29's findings. Used by the verifier tests, the fault test and bench/approvals.py."""

from __future__ import annotations

import io
from dataclasses import dataclass
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from pyhanko.pdf_utils import generic
from pyhanko.pdf_utils.incremental_writer import IncrementalPdfFileWriter

from governance.approvals import pki
from governance.approvals.packet_render import PacketInput, render_packet
from governance.approvals.selectors import meaning_templates
from governance.approvals.signing import SigningParty, StampText, sign_packet
from governance.core.canonical import canonical_sha256


@dataclass(frozen=True)
class Signed:
    pdf: bytes
    ca: x509.Certificate
    crl: bytes


def packet_input(code: str = "bench", digest: str | None = None) -> PacketInput:
    evidence: dict[str, Any] = {"request": {"product_name": "p", "team": "t"}, "obligations": []}
    return PacketInput(
        deployment_code=code,
        evidence_digest=digest or canonical_sha256(evidence),
        evidence=evidence,
        eval_categories={},
        audit_checkpoint=None,
        signatures=meaning_templates(),
        organisation="Test Org",
    )


def signed_packet() -> Signed:
    """A packet signed by legal and engineering with keys made now (about 2 s)."""
    ca = pki.make_root_ca("Test Org")
    tsa = pki.make_tsa(ca, "Test Org")
    pdf = render_packet(packet_input())
    for field, role, certify in (("LegalApproval", "legal", True), ("EngineeringApproval", "engineering", False)):
        who = pki.make_signer(ca, "Test Org", full_name=f"{role} reviewer", username=role, role=role)
        pdf = sign_packet(
            pdf,
            field_name=field,
            certify=certify,
            signer=SigningParty(who.certificate, who.key),
            ca_certificate=ca.certificate,
            tsa=SigningParty(tsa.certificate, tsa.key),
            reason="test",
            stamp=StampText(signer_name=role, role=role, decision="approve", meaning_short="approval", fingerprint="f"),
        )
    crl = pki.make_crl(ca, [], number=1).public_bytes(serialization.Encoding.DER)
    return Signed(pdf, ca.certificate, crl)


def with_fields_pointing_at_the_first_signature(pdf: bytes, count: int) -> bytes:
    """The attack of finding 2: an incremental update adding `count` signature fields whose value
    is the packet's existing signature, so each is validated again."""
    writer = IncrementalPdfFileWriter(io.BytesIO(pdf))
    form = writer.root["/AcroForm"]
    fields = form["/Fields"]
    value = next(f.get_object().raw_get("/V") for f in fields if "/V" in f.get_object())
    for index in range(count):
        field = generic.DictionaryObject(
            {
                generic.NameObject("/FT"): generic.NameObject("/Sig"),
                generic.NameObject("/T"): generic.TextStringObject(f"Extra{index}"),
                generic.NameObject("/V"): value,
            }
        )
        fields.append(writer.add_object(field))
    writer.update_container(fields if isinstance(fields, generic.IndirectObject) else form)
    writer.update_root()
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()
