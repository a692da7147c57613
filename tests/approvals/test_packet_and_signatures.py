"""A Kimi K2 W4A8 request signed by legal then engineering: the packet is PDF/A-3b with the
evidence attached, Chinese text renders, and both signatures verify with pyHanko and with
poppler's pdfsig (an independent implementation)."""

from __future__ import annotations

import io
import json
import re
import subprocess
from pathlib import Path

from pyhanko.pdf_utils.reader import PdfFileReader

from governance.approvals.models import ApprovalPacket, PacketVerification
from governance.approvals.selectors import approval_state
from governance.approvals.services import verify_bytes
from governance.approvals.verification import read_attachment
from governance.audit.actions import AuditAction
from governance.audit.models import AuditCheckpoint, AuditEvent
from governance.core.canonical import canonical_sha256
from governance.deployments.models import DeploymentRequest
from tests.approvals.conftest import KIMI_PRODUCT, SignFlow, pdfsig, verify_api


def _final_pdf(code: str) -> bytes:
    packet = ApprovalPacket.objects.get(deployment__code=code, voided_at__isnull=True)
    return bytes(packet.pdf)


def test_kimi_packet_signed_by_both_verifies_everywhere(
    sign_flow: SignFlow, artifacts, tmp_path: Path, nss_trusting: Path
) -> None:
    code = sign_flow.kimi(artifacts)
    sign_flow.approve_signed(code)
    deployment = DeploymentRequest.objects.get(code=code)
    assert deployment.status == "approved"
    data = _final_pdf(code)
    path = tmp_path / "kimi.pdf"
    path.write_bytes(data)

    # poppler, trusting the organisation's CA through its own NSS database
    out = pdfsig(path, nss_trusting)
    assert out.count("Signature is Valid.") == 2, out
    assert out.count("Certificate is Trusted.") == 2, out
    signatures = out.split("Signature #")[1:]
    assert "LegalApproval" in signatures[0]
    assert "Not total document signed" in signatures[0]
    assert "EngineeringApproval" in signatures[1]
    assert "Total document signed" in signatures[1]

    # pyHanko
    report = verify_bytes(data)
    assert [s.field for s in report.signatures] == ["LegalApproval", "EngineeringApproval"]
    assert all(s.bottom_line and s.intact and s.valid and s.trusted and s.timestamp_trusted for s in report.signatures)
    assert report.signatures[0].modification_level == "FORM_FILLING"
    assert report.signatures[1].coverage == "ENTIRE_FILE"
    assert report.all_valid
    assert report.problems == []

    # the evidence travels inside the file and hashes to the request's digest
    evidence = json.loads(read_attachment(PdfFileReader(io.BytesIO(data)), "evidence.json") or b"{}")
    assert evidence["evidence_digest"] == deployment.evidence_digest == canonical_sha256(evidence["evidence"])
    assert evidence["evidence"]["serving_envelope"]["precision"] == "w4a8"
    checkpoint = evidence["audit_checkpoint"]
    assert AuditCheckpoint.objects.filter(seq=checkpoint["seq"], head_hash=checkpoint["head_hash"]).exists()
    assert set(evidence) >= {"deployment", "evidence", "audit_checkpoint", "signatures", "eval_categories"}

    # PDF/A-3b identification survives both incremental signatures; Chinese glyphs are embedded
    xmp = PdfFileReader(io.BytesIO(data)).root["/Metadata"].get_object().data
    # (attribute or element form: WeasyPrint writes one, pyHanko re-serialises the other)
    assert re.search(rb'pdfaid:part(="|>)3', xmp), xmp
    assert re.search(rb'pdfaid:conformance(="|>)B', xmp), xmp
    assert data.startswith(b"%PDF-1.7")
    # an audit checkpoint was signed right after the final signature, covering its events
    last = AuditCheckpoint.objects.order_by("-seq").first()
    assert last is not None
    signed = AuditEvent.objects.filter(action=AuditAction.PACKET_SIGNED).order_by("-seq").first()
    assert signed is not None
    assert last.seq >= signed.seq
    fonts = subprocess.run(["pdffonts", str(path)], capture_output=True, text=True, check=True).stdout
    assert "Noto-Sans-CJK" in fonts, fonts
    assert all(" yes " in line for line in fonts.splitlines()[2:]), fonts  # every font embedded (PDF/A)
    text = subprocess.run(["pdftotext", str(path), "-"], capture_output=True, text=True, check=True).stdout
    assert "中文客服助手" in text
    assert "月之暗面" in text
    assert "GPU 0" in text
    assert "KV cache" in text

    # stored verification, and the gate's read of it
    stored = PacketVerification.objects.get(pdf_sha256=report.pdf_sha256)
    assert stored.legal_valid
    assert stored.engineering_valid
    assert stored.evidence_current
    state = approval_state(deployment)
    assert state is not None
    assert state.pdf_sha256 == report.pdf_sha256
    assert state.evidence_digest == deployment.evidence_digest
    assert state.legal_valid
    assert state.engineering_valid
    assert KIMI_PRODUCT  # product name with Chinese text was used


def test_download_and_verify_endpoint(sign_flow: SignFlow, artifacts, personas) -> None:
    code = sign_flow.kimi(artifacts)
    sign_flow.approve_signed(code)
    response = sign_flow.client(personas.auditor).get(f"/api/v1/approvals/deployments/{code}/packet")
    assert response.status_code == 200
    assert response["Content-Type"] == "application/pdf"
    data = b"".join(response) if hasattr(response, "streaming_content") else response.content
    assert (
        sign_flow.client(personas.other_requester).get(f"/api/v1/approvals/deployments/{code}/packet").status_code
        == 404
    )
    answer = verify_api(sign_flow.client(personas.auditor), data)
    assert answer.status_code == 200, answer.json()
    assert answer.json()["status"] == "done", answer.json()
    body = answer.json()["report"]
    assert body["all_valid"]
    assert body["legal_valid"]
    assert body["engineering_valid"]
    assert body["evidence_current"]
    assert [s["bottom_line"] for s in body["signatures"]] == [True, True]
    missing = sign_flow.client(personas.auditor).post("/api/v1/approvals/verify", {}, format="multipart")
    assert missing.status_code == 400
    assert "file" in missing.json()["message"]
