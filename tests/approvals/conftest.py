"""Fixtures: the organisation's PKI (RSA keys generated once per session: RSA 3072 generation is
the slow part and says nothing about the code under test), and a request ready for sign-off."""

from __future__ import annotations

import contextlib
import io
import subprocess
from collections.abc import Iterator
from html import escape
from pathlib import Path
from typing import Any
from unittest import mock

import pytest

from governance.approvals.models import Authority
from governance.deployments.models import DeploymentRequest
from tests.conftest import Personas
from tests.deployments.conftest import FACTS, Flow, artifacts, catalog, ensure_passed_eval, flow  # noqa: F401

KIMI_SERVING = {
    "engine": "vllm",
    "precision": "w4a8",
    "gpu": "h200",
    "tp": 8,
    "ep": 8,
    "max_model_len": 131072,
    "concurrency": 8,
}
KIMI_PRODUCT = "Kimi K2 中文客服助手 (月之暗面 W4A8)"


class SignFlow(Flow):
    def __init__(self, personas: Personas, capture_on_commit: Any) -> None:
        super().__init__(personas)
        self.capture_on_commit = capture_on_commit

    def ready(
        self, artifact: Any, how_met: str = "footer of every page", *, with_eval: bool = True, **extra: Any
    ) -> str:
        """A request in review with capacity computed, obligations accepted and (unless told
        otherwise) a passed eval of its precision when that precision is quantized."""
        code = self.create(artifact, **extra)["code"]
        assert self.post(self.p.requester, code, "submit").status_code == 200
        assert self.post(self.p.legal, code, "start-review").status_code == 200
        with self.capture_on_commit(execute=True):  # the computed plan becomes evidence after commit
            self.compute_capacity(code)
        if with_eval:
            ensure_passed_eval(code)
        self.meet_obligations(code, how_met)
        assert (DeploymentRequest.objects.get(code=code).evidence or {})["capacity_plan"]["fits"]
        return code

    def digest(self, code: str) -> str:
        return str(DeploymentRequest.objects.get(code=code).evidence_digest)

    def sign(
        self,
        user: Any,
        code: str,
        role: str,
        decision: str = "approve",
        *,
        password: str | None = None,
        digest: str | None = None,
        comment: str = "",
    ) -> Any:
        body = {
            "role": role,
            "decision": decision,
            "password": password or f"pw-{user.username}",
            "evidence_digest": digest or self.digest(code),
            "comment": comment,
        }
        return self.client(user).post(f"/api/v1/approvals/deployments/{code}/signoffs", body, format="json")

    def approve_signed(self, code: str) -> None:
        """Both approvals, and the heavy worker's job run here: builds the real signed PDF (1.5-2.4 s);
        tests that only need a decision recorded call `sign` alone (no PDF work at all)."""
        for user, role in ((self.p.legal, "legal"), (self.p.engineer, "engineering")):
            response = self.sign(user, code, role)
            assert response.status_code == 202, response.json()
        run_packet_jobs(code)

    def kimi(self, registered: dict[str, Any]) -> str:
        return self.ready(registered["kimi"], product_name=KIMI_PRODUCT, serving_plan=KIMI_SERVING)


def run_packet_jobs(code: str, *, brief: bool = False) -> None:
    """What the heavy worker does after sign-offs: render and sign the request's live packet, inline
    (no worker process, no broker); tests with a real worker use `celery_worker` instead.

    `brief=True`: for tests that need an approval, not a packet to read (the gate's, the state
    machine's). The packet is a one-page PDF/A naming the request and its evidence digest instead of
    the full layout (WeasyPrint laying out the real packet is ~1.5 s of each approval); everything
    else is the product's path: the evidence attachment, the signature fields, both real signatures
    with their timestamps, and the verification the approval waits for."""
    from governance.approvals.models import ApprovalPacket
    from governance.approvals.services import packet_complete

    packets = ApprovalPacket.objects.filter(deployment__code=code, voided_at__isnull=True).values_list("pk", flat=True)
    with brief_packet_layout() if brief else contextlib.nullcontext():
        for packet_id in packets:
            packet_complete(packet_id=packet_id)


@contextlib.contextmanager
def brief_packet_layout() -> Iterator[None]:
    from governance.approvals import packet_render

    def brief_html(data: packet_render.PacketInput) -> str:
        return (
            f"<html lang='{escape(data.language)}'><body><h1>Approval packet {escape(data.deployment_code)}</h1>"
            f"<p>Evidence {escape(data.evidence_digest)}</p></body></html>"
        )

    with mock.patch.object(packet_render, "render_html", brief_html):
        yield


@pytest.fixture
def sign_flow(
    personas: Personas,
    artifacts: dict[str, Any],  # noqa: F811
    org_pki: Authority,
    django_capture_on_commit_callbacks: Any,
) -> SignFlow:
    return SignFlow(personas, django_capture_on_commit_callbacks)


def pdfsig(path: Path, nss_dir: Path | None = None) -> str:
    args = ["pdfsig", *(["-nssdir", f"sql:{nss_dir}"] if nss_dir else []), str(path)]
    return subprocess.run(args, capture_output=True, text=True, check=False).stdout


@pytest.fixture
def nss_trusting(tmp_path: Path, org_pki: Authority) -> Path:
    """An NSS database that trusts the organisation's root CA, for poppler's independent check."""
    folder = tmp_path / "nss"
    folder.mkdir()
    ca = tmp_path / "ca.pem"
    ca.write_text(org_pki.certificate_pem)
    subprocess.run(["certutil", "-N", "-d", f"sql:{folder}", "--empty-password"], check=True, capture_output=True)
    subprocess.run(
        ["certutil", "-A", "-d", f"sql:{folder}", "-n", "approvals-ca", "-t", "CT,C,C", "-i", str(ca)],
        check=True,
        capture_output=True,
    )
    return folder


def as_file(data: bytes) -> io.BytesIO:
    handle = io.BytesIO(data)
    handle.name = "packet.pdf"
    return handle


def run_verifications() -> list[str]:
    """What the heavy worker does with uploads: verify every queued file, inline (no worker
    process, no broker); tests/approvals/test_verify_worker.py runs them through real workers."""
    from governance.approvals.models import VerificationJob
    from governance.approvals.services import verification_job_run

    queued = VerificationJob.objects.filter(status="queued").order_by("id").values_list("pk", flat=True)
    return [verification_job_run(job_id=pk) for pk in list(queued)]


def verify_api(client: Any, data: bytes) -> Any:
    """Upload through the API (202), let the worker's part run here, and read the status URL."""
    answer = client.post("/api/v1/approvals/verify", {"file": as_file(data)}, format="multipart")
    if answer.status_code != 202:
        return answer
    run_verifications()
    return client.get(answer.json()["status_url"])


def verify_web(client: Any, data: bytes, name: str = "packet.pdf") -> Any:
    """Upload through /verify/ (303 to the upload's page), run the worker's part here, read the page."""
    from django.core.files.uploadedfile import SimpleUploadedFile

    answer = client.post("/verify/", {"file": SimpleUploadedFile(name, data, "application/pdf")})
    if answer.status_code != 302:
        return answer
    run_verifications()
    return client.get(answer["Location"])
