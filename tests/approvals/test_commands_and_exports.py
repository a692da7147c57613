"""verify_approval, the CA/CRL downloads, revisions by hash, and approval PDFs in the audit bundle."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import rsa
from django.conf import settings
from django.core.management import call_command

from governance.approvals.models import ApprovalPacket, Authority, PacketSignature
from governance.audit.exports import write_bundle
from tests.approvals.conftest import SignFlow

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_verify_approval_command(sign_flow: SignFlow, artifacts, tmp_path: Path, capsys, personas) -> None:
    code = sign_flow.kimi(artifacts)
    sign_flow.approve_signed(code)
    path = tmp_path / "packet.pdf"
    path.write_bytes(bytes(ApprovalPacket.objects.get(deployment__code=code).pdf))
    call_command("verify_approval", str(path))
    result = json.loads(capsys.readouterr().out)
    assert result["all_valid"]
    assert result["evidence_current"]
    assert [s["signer"] for s in result["signatures"]] == ["legal", "eng"]
    assert all(s["signed_at"] and s["coverage"] for s in result["signatures"])
    response = sign_flow.client(personas.requester).patch(
        f"/api/v1/deployments/{code}", {"target_cluster": "elsewhere"}, format="json"
    )
    assert response.status_code == 200
    with pytest.raises(SystemExit) as exit_info:  # stale now
        call_command("verify_approval", str(path))
    assert exit_info.value.code == 1
    assert json.loads(capsys.readouterr().out)["evidence_current"] is False


@pytest.mark.slow
def test_ca_crl_revisions_and_audit_bundle(
    sign_flow: SignFlow, artifacts, personas, org_pki: Authority, tmp_path: Path, django_capture_on_commit_callbacks
) -> None:
    code = sign_flow.kimi(artifacts)
    sign_flow.approve_signed(code)
    anonymous = sign_flow.client(None)
    ca = anonymous.get("/api/v1/approvals/ca.pem")
    assert ca.status_code == 200
    assert ca.content.decode() == org_pki.certificate_pem
    crl = x509.load_der_x509_crl(anonymous.get("/api/v1/approvals/crl").content)
    ca_key = x509.load_pem_x509_certificate(ca.content).public_key()
    assert isinstance(ca_key, rsa.RSAPublicKey)  # the organisation's CA key (governance.approvals.pki)
    assert crl.is_signature_valid(ca_key)

    legal_revision = PacketSignature.objects.get(signoff__deployment__code=code, signoff__role="legal").pdf_sha256
    response = sign_flow.client(personas.auditor).get(f"/api/v1/approvals/packets/{legal_revision}")
    assert response.status_code == 200
    assert hashlib.sha256(response.content).hexdigest() == legal_revision
    assert (
        sign_flow.client(personas.other_requester).get(f"/api/v1/approvals/packets/{legal_revision}").status_code == 404
    )

    bundle_path = tmp_path / "audit.zip"
    # The export signs a checkpoint of the head and publishes it once the transaction commits.
    with django_capture_on_commit_callbacks(execute=True), bundle_path.open("wb") as handle:
        manifest = write_bundle(handle)
    final = ApprovalPacket.objects.get(deployment__code=code)
    name = f"approvals/{final.pdf_sha256}.pdf"
    assert manifest["files"][name] == final.pdf_sha256  # type: ignore[index]
    with zipfile.ZipFile(bundle_path) as bundle:
        assert hashlib.sha256(bundle.read(name)).hexdigest() == final.pdf_sha256
        index = json.loads(bundle.read("approvals/index.json"))
    assert index[0]["deployment"] == code
    assert index[0]["status"] == "complete"
    assert index[0]["current"] is True
    public_key = tmp_path / "public.pem"
    with zipfile.ZipFile(bundle_path) as bundle:
        public_key.write_bytes(bundle.read("audit-public-key.pem"))
    checked = subprocess.run(
        [
            sys.executable,
            "-m",
            "governance.audit.verify",
            str(bundle_path),
            "--public-key",
            str(public_key),
            # The export signed and published a checkpoint of the head: the anchor from outside the database.
            "--checkpoints",
            str(settings.AUDIT_CHECKPOINT_PUBLISH_PATH),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
