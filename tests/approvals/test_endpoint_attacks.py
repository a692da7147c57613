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
