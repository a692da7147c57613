"""Verifying a packet whose evidence has since changed: its signatures are still valid, but the
page must not say so in green as if it were the approval; it says "valid signatures over
superseded evidence" and links the request's current packet."""

from __future__ import annotations

from typing import Any

from django.test import Client

from tests.approvals.conftest import SignFlow, verify_web


def test_a_superseded_packet_is_not_shown_as_the_approval(sign_flow: SignFlow, artifacts: Any, personas: Any) -> None:
    code = sign_flow.kimi(artifacts)
    sign_flow.approve_signed(code)
    response = sign_flow.client(personas.auditor).get(f"/api/v1/approvals/deployments/{code}/packet")
    old = b"".join(response) if hasattr(response, "streaming_content") else response.content
    client = Client()
    client.force_login(personas.auditor)

    def verify() -> str:
        page = verify_web(client, old)
        assert page.status_code == 200
        return page.content.decode()

    current = verify()
    assert "Every signature is valid and trusted" in current
    assert "superseded evidence" not in current
    edited = sign_flow.client(personas.requester).patch(
        f"/api/v1/deployments/{code}", {"product_name": "Renamed product"}, format="json"
    )
    assert edited.status_code == 200, edited.json()
    superseded = verify()
    assert "Every signature is valid and trusted" not in superseded
    assert "Valid signatures over superseded evidence" in superseded
    assert 'data-superseded="true"' in superseded
    assert f'href="/requests/{code}/#signoff"' in superseded
