"""Tampering with a signed packet, or with the request after it was signed, is reported."""

from __future__ import annotations

import io
from pathlib import Path

from pyhanko.pdf_utils import generic
from pyhanko.pdf_utils.incremental_writer import IncrementalPdfFileWriter
from pyhanko.pdf_utils.reader import PdfFileReader

from governance.approvals.models import ApprovalPacket, PacketVerification
from governance.approvals.services import packet_verify, verify_bytes
from tests.approvals.conftest import SignFlow, pdfsig


def _signed(sign_flow: SignFlow, artifacts) -> tuple[str, bytes]:
    code = sign_flow.kimi(artifacts)
    sign_flow.approve_signed(code)
    return code, bytes(ApprovalPacket.objects.get(deployment__code=code, voided_at__isnull=True).pdf)


def test_one_flipped_byte_in_the_signed_range_invalidates(sign_flow: SignFlow, artifacts, tmp_path: Path) -> None:
    _, data = _signed(sign_flow, artifacts)
    assert verify_bytes(data).all_valid
    position = data.index(b"Deployment request") if b"Deployment request" in data else len(data) // 3
    position = data.index(b"/Type /Page") + 2 if b"/Type /Page" in data else position
    tampered = bytearray(data)
    tampered[position] ^= 0x01
    report = verify_bytes(bytes(tampered))
    assert not report.all_valid
    assert not any(s.intact for s in report.signatures)
    assert not report.valid_for("legal")
    assert not report.valid_for("engineering")
    path = tmp_path / "flipped.pdf"
    path.write_bytes(bytes(tampered))
    assert "Signature is Valid." not in pdfsig(path)


def test_incremental_update_changing_page_content_fails_bottom_line(sign_flow: SignFlow, artifacts) -> None:
    _, data = _signed(sign_flow, artifacts)
    writer = IncrementalPdfFileWriter(io.BytesIO(data))
    # Draw over page 1 after signing: every signature stays intact, but DocMDP forbids it.
    stream = generic.StreamObject(stream_data=b"q 1 0 0 rg 50 700 200 40 re f Q")
    writer.add_stream_to_page(0, writer.add_object(stream))
    out = io.BytesIO()
    writer.write(out)
    report = verify_bytes(out.getvalue())
    assert [s.intact for s in report.signatures] == [True, True]
    assert [s.bottom_line for s in report.signatures] == [False, False]
    assert report.signatures[0].docmdp_ok is False
    assert not report.all_valid
    assert "the last signature does not cover the whole file" in report.problems
    # the file pyHanko sees is still readable, with both signatures present
    assert len(PdfFileReader(io.BytesIO(out.getvalue())).embedded_signatures) == 2


def test_packet_whose_evidence_changed_is_reported_stale(sign_flow: SignFlow, artifacts, personas) -> None:
    code, data = _signed(sign_flow, artifacts)
    report, stored = packet_verify(data=data, actor="system:test")
    assert report.all_valid
    assert stored.evidence_current
    response = sign_flow.client(personas.requester).patch(
        f"/api/v1/deployments/{code}", {"target_cluster": "another-cluster"}, format="json"
    )
    assert response.status_code == 200, response.json()
    report, stored = packet_verify(data=data, actor="system:test")
    assert report.all_valid  # the signatures themselves are still fine
    assert not stored.evidence_current  # but they sign evidence that is no longer the request's
    assert PacketVerification.objects.get(pdf_sha256=report.pdf_sha256).evidence_current is False
