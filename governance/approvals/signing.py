"""PAdES signatures on approval packets with pyHanko (no Django): pre-created fields, the first
signature certifies the packet allowing form filling, later ones are incremental updates; each
carries an RFC 3161 timestamp from the organisation's timestamping key."""

from __future__ import annotations

import functools
import hashlib
import io
import os
import tempfile
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from asn1crypto import cms, core, tsp
from asn1crypto import keys as asn1_keys
from asn1crypto import x509 as asn1_x509
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.hazmat.primitives.asymmetric.padding import PKCS1v15
from fontTools import subset
from fontTools.ttLib.scaleUpem import scale_upem
from pyhanko.pdf_utils import text
from pyhanko.pdf_utils.font.opentype import GlyphAccumulatorFactory
from pyhanko.pdf_utils.incremental_writer import IncrementalPdfFileWriter
from pyhanko.sign import fields, signers
from pyhanko.sign.general import as_signing_certificate, simple_cms_attribute
from pyhanko.sign.timestamps.dummy_client import DummyTimeStamper
from pyhanko.stamp import TextStampStyle
from pyhanko_certvalidator.registry import SimpleCertificateStore
from pyhanko_certvalidator.util import get_pyca_cryptography_hash

# One box per role at the foot of the last page (points from the bottom-left corner of A4).
FIELD_BOXES: dict[str, tuple[int, int, int, int]] = {
    "LegalApproval": (42, 36, 292, 126),
    "EngineeringApproval": (303, 36, 553, 126),
}
# A TrueType font for the visible signatures: PDF/A wants every font embedded (not Courier).
STAMP_FONT_CANDIDATES = (
    Path("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"),
    Path("/usr/share/fonts/truetype/noto/NotoSans-Regular.ttf"),
)
# A signer's name in Chinese (or any script DejaVu lacks) is set in Noto Sans CJK SC instead
# (fonts-noto-cjk, scripts/system-deps; face 2 of the collection), cut down to Latin-1 and the
# characters of that stamp: its CFF outlines are 1000 units per em already.
CJK_STAMP_FONT = Path("/usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc")
CJK_STAMP_FONT_NUMBER = 2
STAMP_LATIN = frozenset([*range(0x20, 0x7F), *range(0xA0, 0x180), *range(0x2010, 0x2027)])
# Short lines: the stamp box is small. The full meaning text is the signature's /Reason, the
# packet's Signatures table and the sign-off record; the full fingerprint is in the certificate.
STAMP_TEXT = (
    "%(signer_name)s\n%(role)s reviewer: %(decision)s\nMeaning: %(meaning_short)s\n%(signed_at)s\ncert %(fingerprint)s"
)
# The signing time (%(signed_at)s) as the packet's English dates print it (governance/formats),
# always in UTC: the packet says the box prints the UTC time, and pyHanko's own %(ts)s is the
# host's local time.
STAMP_TIME_FORMAT = "%Y-%m-%d %H:%M UTC"
# Our own timestamp policy OID (a UUID OID, ITU-T X.667), so tokens do not claim a test policy.
TSA_POLICY_OID = "2.25.242295213393713858406312460153349474610"


def _asn1_cert(cert: x509.Certificate) -> asn1_x509.Certificate:
    return asn1_x509.Certificate.load(cert.public_bytes(serialization.Encoding.DER))


def _asn1_key(key: rsa.RSAPrivateKey) -> asn1_keys.PrivateKeyInfo:
    der = key.private_bytes(serialization.Encoding.DER, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    return asn1_keys.PrivateKeyInfo.load(der)


class OrganisationTimeStamper(DummyTimeStamper):
    """RFC 3161 tokens signed in-process with the organisation's TSA key (no network TSA here):
    pyHanko's in-process timestamper with our policy OID, signing with the already-loaded key
    (pyHanko re-parses and re-validates the RSA key on every token, ~0.1 s each)."""

    def __init__(self, *, tsa: SigningParty, ca_certificate: x509.Certificate) -> None:
        super().__init__(
            tsa_cert=_asn1_cert(tsa.certificate),
            tsa_key=_asn1_key(tsa.key),
            certs_to_embed=SimpleCertificateStore.from_certs([_asn1_cert(ca_certificate)]),
        )
        self._key = tsa.key

    def _build_tst_info(self, message_imprint: tsp.MessageImprint, dt: datetime, req: tsp.TimeStampReq) -> tsp.TSTInfo:
        info = super()._build_tst_info(message_imprint, dt, req)
        info["policy"] = tsp.ObjectIdentifier(TSA_POLICY_OID)
        return info

    def _sign_tst_info(self, tst_info_data: bytes, md_algorithm: str, dt: datetime) -> tuple[bytes, cms.CMSAttributes]:
        # RFC 5652 signed attributes: content type, signing time, the TSA certificate (RFC 5035), digest.
        digest = hashes.Hash(get_pyca_cryptography_hash(md_algorithm))
        digest.update(tst_info_data)
        attributes = cms.CMSAttributes(
            [
                simple_cms_attribute("content_type", "tst_info"),
                simple_cms_attribute("signing_time", cms.Time({"utc_time": core.UTCTime(dt)})),
                simple_cms_attribute("signing_certificate", as_signing_certificate(self.tsa_cert)),
                simple_cms_attribute("message_digest", digest.finalize()),
            ]
        )
        signature = self._key.sign(attributes.dump(), PKCS1v15(), get_pyca_cryptography_hash(md_algorithm.upper()))
        return signature, attributes


class _LoadedKeySigner(signers.SimpleSigner):
    """pyHanko's signer, signing with the already-decrypted key instead of re-parsing it per signature."""

    def __init__(self, *, party: SigningParty, ca_certificate: x509.Certificate) -> None:
        super().__init__(
            signing_cert=_asn1_cert(party.certificate),
            signing_key=_asn1_key(party.key),
            cert_registry=SimpleCertificateStore.from_certs([_asn1_cert(ca_certificate)]),
        )
        self._key = party.key

    def sign_raw(self, data: bytes, digest_algorithm: str) -> bytes:
        mechanism = self.get_signature_mechanism_for_digest(digest_algorithm).signature_algo
        if mechanism != "rsassa_pkcs1v15":
            raise ValueError(f"approval keys sign with RSA PKCS#1 v1.5, not {mechanism}")
        return self._key.sign(data, PKCS1v15(), get_pyca_cryptography_hash(digest_algorithm))


@dataclass(frozen=True, slots=True)
class SigningParty:
    certificate: x509.Certificate
    key: rsa.RSAPrivateKey


@dataclass(frozen=True, slots=True)
class StampText:
    signer_name: str
    role: str
    decision: str
    meaning_short: str
    fingerprint: str
    # The packet's language: the caller passes the translated template and time format
    template: str = STAMP_TEXT
    time_format: str = STAMP_TIME_FORMAT

    def params(self) -> dict[str, str]:
        return {
            "signer_name": self.signer_name,
            "role": self.role,
            "decision": self.decision,
            "meaning_short": self.meaning_short,
            "fingerprint": self.fingerprint,
        }


def add_signature_fields(pdf: bytes) -> bytes:
    """Pre-create the empty signature fields (one per role) on the last page."""
    writer = IncrementalPdfFileWriter(io.BytesIO(pdf))
    for name, box in FIELD_BOXES.items():
        fields.append_signature_field(writer, fields.SigFieldSpec(name, box=box, on_page=-1))
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


@functools.cache
def stamp_font() -> Path | None:
    """The stamp font cut down once per process to Latin-1 and general punctuation: pyHanko subsets
    the font it embeds on every signature, and subsetting all of DejaVu Sans took seconds."""
    source = next((path for path in STAMP_FONT_CANDIDATES if path.exists()), None)
    if source is None:
        return None
    target = Path(tempfile.gettempdir()) / f"governance-stamp-{source.stem}-{os.getuid()}-{os.getpid()}.ttf"
    options = subset.Options()
    options.drop_tables += ["FFTM", "MATH"]
    options.layout_features = ["*"]
    options.glyph_names = True  # pyHanko looks glyphs up by name
    options.notdef_outline = True
    options.name_IDs = ["*"]
    font = subset.load_font(str(source), options)
    subsetter = subset.Subsetter(options)
    subsetter.populate(unicodes=sorted(STAMP_LATIN))
    subsetter.subset(font)
    # pyHanko writes the font's advances into /W and its TJ adjustments as they are, but PDF reads
    # them per 1000 units of the em: at DejaVu's 2048 units every glyph was drawn twice as far
    # apart (stamps spread out letter by letter in poppler and clipped at the box's edge).
    scale_upem(font, 1000)
    subset.save_font(font, str(target), options)
    return target


@functools.lru_cache(maxsize=32)
def cjk_stamp_font(characters: str) -> Path | None:
    """Noto Sans CJK SC cut down to Latin-1 and `characters` (those of one stamp beyond Latin-1),
    once per process for each set; None when the font is not installed."""
    if not CJK_STAMP_FONT.exists():
        return None
    digest = hashlib.sha256(characters.encode()).hexdigest()[:16]
    target = Path(tempfile.gettempdir()) / f"governance-stamp-cjk-{digest}-{os.getuid()}-{os.getpid()}.otf"
    options = subset.Options()
    options.font_number = CJK_STAMP_FONT_NUMBER
    options.layout_features = ["*"]
    options.glyph_names = True
    options.notdef_outline = True
    options.name_IDs = ["*"]
    font = subset.load_font(str(CJK_STAMP_FONT), options)
    subsetter = subset.Subsetter(options)
    subsetter.populate(unicodes=sorted(STAMP_LATIN | {ord(ch) for ch in characters}))
    subsetter.subset(font)
    subset.save_font(font, str(target), options)
    return target


def _stamp_font_for(stamp_text: str) -> Path | None:
    """DejaVu (Latin) unless the stamp holds characters beyond it: then Noto Sans CJK SC with them."""
    beyond = "".join(sorted({ch for ch in stamp_text if ord(ch) not in STAMP_LATIN and not ch.isspace()}))
    return (cjk_stamp_font(beyond) if beyond else None) or stamp_font()


def _stamp_style(stamp_text: str = "", template: str = STAMP_TEXT) -> TextStampStyle:
    font = _stamp_font_for(stamp_text)
    box_style = (
        # The same size for the layout (harfbuzz advances) and for the text box: when they differ the
        # glyphs are placed for one size and drawn at the other (spread out, clipped by the box).
        text.TextBoxStyle(font=GlyphAccumulatorFactory(str(font), font_size=6), font_size=6, leading=8)
        if font is not None
        else text.TextBoxStyle(font_size=6, leading=8)
    )
    return TextStampStyle(stamp_text=template, text_box_style=box_style, border_width=1)


def sign_packet(
    pdf: bytes,
    *,
    field_name: str,
    certify: bool,
    signer: SigningParty,
    ca_certificate: x509.Certificate,
    tsa: SigningParty,
    reason: str,
    stamp: StampText,
) -> bytes:
    """Sign `pdf` in `field_name` as an incremental update and return the new file."""
    cms_signer = _LoadedKeySigner(party=signer, ca_certificate=ca_certificate)
    timestamper = OrganisationTimeStamper(tsa=tsa, ca_certificate=ca_certificate)
    metadata = signers.PdfSignatureMetadata(
        field_name=field_name,
        reason=reason,
        name=stamp.signer_name,
        subfilter=fields.SigSeedSubFilter.PADES,
        md_algorithm="sha256",
        certify=certify,
        docmdp_permissions=fields.MDPPerm.FILL_FORMS,
    )
    # our own placeholder, not pyHanko's %(ts)s: that one is the host's local time
    params = {**stamp.params(), "signed_at": datetime.now(UTC).strftime(stamp.time_format)}
    stamp_style = _stamp_style("".join(params.values()) + stamp.template, stamp.template)
    pdf_signer = signers.PdfSigner(metadata, cms_signer, timestamper=timestamper, stamp_style=stamp_style)
    out = pdf_signer.sign_pdf(IncrementalPdfFileWriter(io.BytesIO(pdf)), appearance_text_params=params)
    return out.getvalue()
