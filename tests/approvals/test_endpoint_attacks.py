"""An attacker's pass over the approvals endpoints (issue 29, after verification moved to the worker):
each finding here failed on the code before its fix.

- The verify endpoints read a body up to API_MAX_BODY_BYTES (48 MiB) before refusing a file over
  APPROVALS_MAX_UPLOAD_BYTES (20 MiB): now a body over the upload bound answers 413 before any
  view or parser reads it, on the API and on the web form.
- A packet by hash loaded the PDF's bytes (and hashed its revisions) for any signed-in user before
  checking that they may see its request, and took any string as a hash."""

from __future__ import annotations

from typing import Any

from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from tests.approvals.conftest import SignFlow, as_file
from tests.conftest import Personas


def _over_the_bound(settings: Any) -> bytes:
    settings.APPROVALS_MAX_UPLOAD_BYTES = 64 * 1024
    return b"%PDF-1.7\n" + b"0" * (settings.APPROVALS_MAX_UPLOAD_BYTES + 200 * 1024)


def test_an_upload_over_the_bound_is_refused_before_it_is_read(personas: Personas, org_pki: Any, settings: Any) -> None:
    data = _over_the_bound(settings)
    client = APIClient()
    client.force_authenticate(personas.auditor)
    api = client.post("/api/v1/approvals/verify", {"file": as_file(data)}, format="multipart")
    assert api.status_code == 413, api.content[:200]
    assert api.json()["extra"]["limit"] < len(data)
    browser = Client()
    browser.force_login(personas.auditor)
    web = browser.post("/verify/", {"file": as_file(data)})
    assert web.status_code == 413


def test_a_packet_by_hash_checks_the_reader_before_loading_the_pdf(
    sign_flow: SignFlow, artifacts: Any, personas: Personas
) -> None:
    code = sign_flow.ready(artifacts["apache"])
    assert sign_flow.client(personas.legal).post(f"/api/v1/approvals/deployments/{code}/packet").status_code == 202
    from governance.approvals.models import ApprovalPacket
    from tests.approvals.conftest import run_packet_jobs

    run_packet_jobs(code)
    sha = ApprovalPacket.objects.get(deployment__code=code).pdf_sha256
    assert sign_flow.client(personas.requester).get(f"/api/v1/approvals/packets/{sha}").status_code == 200
    with CaptureQueriesContext(connection) as queries:
        denied = sign_flow.client(personas.other_requester).get(f"/api/v1/approvals/packets/{sha}")
    assert denied.status_code == 404
    assert not [q["sql"] for q in queries.captured_queries if '"pdf"' in q["sql"] and "SELECT" in q["sql"]]
    for bad in ("x" * 64, sha.upper(), sha[:63], "0" * 4000):
        assert sign_flow.client(personas.requester).get(f"/api/v1/approvals/packets/{bad}").status_code == 404, bad


def test_an_upload_does_not_rewrite_the_verification_the_gate_reads(
    sign_flow: SignFlow, artifacts: Any, personas: Personas
) -> None:
    """The gate and the request page read the verification stored for the approved packet's bytes
    (made by the worker when the packet completed). An upload of the same bytes by anyone with a role
    re-verified them and overwrote that row: its time, and, for a user of another team, its link to
    the request and "evidence current" (gone from the request's record of its own approval)."""
    from governance.approvals.models import ApprovalPacket, PacketVerification
    from governance.approvals.selectors import approval_state
    from governance.deployments.models import DeploymentRequest
    from tests.approvals.conftest import verify_api

    code = sign_flow.ready(artifacts["apache"])
    sign_flow.approve_signed(code)
    deployment = DeploymentRequest.objects.get(code=code)
    before = approval_state(deployment)
    assert before is not None
    pdf = bytes(ApprovalPacket.objects.get(deployment=deployment, voided_at__isnull=True).pdf)
    stored = PacketVerification.objects.get(pdf_sha256=before.pdf_sha256)
    assert stored.deployment_id == deployment.pk
    assert stored.evidence_current
    other = verify_api(sign_flow.client(personas.other_requester), pdf).json()
    assert other["status"] == "done", other
    assert other["report"]["all_valid"] is True
    assert other["report"]["evidence_current"] is False  # not theirs to know
    own = verify_api(sign_flow.client(personas.auditor), pdf).json()
    assert own["report"]["evidence_current"] is True
    after = PacketVerification.objects.get(pdf_sha256=before.pdf_sha256)
    assert (after.deployment_id, after.evidence_current, after.verified_at) == (
        deployment.pk,
        True,
        stored.verified_at,
    )
    assert approval_state(deployment) == before
