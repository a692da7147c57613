"""A reviewer previews the exact packet in the UI before signing: a button on the request page
renders it (the API's packet endpoint), and the page then offers its download."""

from __future__ import annotations

from typing import Any

from django.test import Client

from governance.approvals.models import ApprovalPacket
from tests.approvals.conftest import SignFlow, run_packet_jobs


def test_a_reviewer_previews_the_packet_then_signs_that_one(sign_flow: SignFlow, artifacts: Any, personas: Any) -> None:
    code = sign_flow.kimi(artifacts)
    client = Client()
    client.force_login(personas.legal)
    page = client.get(f"/requests/{code}/").content.decode()
    assert f"/requests/{code}/packet-preview" in page
    assert ApprovalPacket.objects.count() == 0
    response = client.post(f"/requests/{code}/packet-preview")
    assert response.status_code == 302
    packet = ApprovalPacket.objects.get()
    run_packet_jobs(code)  # the heavy worker renders it
    page = client.get(f"/requests/{code}/").content.decode()
    assert "Download the approval packet (PDF)" in page
    assert sign_flow.sign(personas.legal, code, "legal").status_code == 202
    assert ApprovalPacket.objects.get().pk == packet.pk  # the one previewed is the one signed


def test_a_requester_cannot_render_it(sign_flow: SignFlow, artifacts: Any, personas: Any) -> None:
    code = sign_flow.kimi(artifacts)
    client = Client()
    client.force_login(personas.requester)
    assert client.post(f"/requests/{code}/packet-preview").status_code == 403
