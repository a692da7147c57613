"""The blocker list refreshes itself while something it depends on is pending (htmx polls its
fragment while the capacity plan computes or an eval runs, and stops when nothing is pending),
and is gone once the request is approved (unless a usage report flagged it again)."""

from __future__ import annotations

import re

from django.test import Client

from governance.deployments.choices import Status
from governance.deployments.models import DeploymentRequest
from tests.conftest import Personas
from tests.deployments.conftest import Flow


def _client(personas: Personas) -> Client:
    client = Client()
    client.force_login(personas.requester)
    return client


def _section(html: str) -> str:
    found = re.search(r'<section id="blockers".*?</section>', html, flags=re.S)
    return found.group(0) if found else ""


def _opening(section: str) -> str:
    return section.split(">", 1)[0]


def test_the_blocker_list_polls_while_the_plan_computes_and_stops_after(
    flow: Flow, personas: Personas, artifacts: dict
) -> None:
    code = flow.create(artifacts["qwen"])["code"]
    assert flow.post(personas.requester, code, "submit").status_code == 200
    client = _client(personas)
    fragment_url = f"/requests/{code}/blockers"
    section = _section(client.get(f"/requests/{code}/").content.decode())
    assert f'hx-get="{fragment_url}"' in _opening(section)
    assert 'hx-trigger="every 2s"' in _opening(section)
    assert 'hx-swap="outerHTML"' in _opening(section)
    pending = client.get(fragment_url)
    assert pending.status_code == 200
    assert 'data-code="capacity.pending"' in pending.content.decode()
    assert "hx-trigger" in _opening(_section(pending.content.decode()))
    flow.compute_capacity(code)  # the plan computed and made evidence, as the worker's hook does
    done = _section(client.get(fragment_url).content.decode())
    assert done  # still there: other blockers (sign-offs) remain
    assert 'data-code="capacity.pending"' not in done
    assert "hx-trigger" not in _opening(done)  # nothing pending: the polling stops


def test_the_blocker_list_is_gone_once_approved(flow: Flow, personas: Personas, artifacts: dict) -> None:
    code = flow.create(artifacts["qwen"])["code"]
    assert flow.post(personas.requester, code, "submit").status_code == 200
    DeploymentRequest.objects.filter(code=code).update(status=Status.APPROVED)
    client = _client(personas)
    page = client.get(f"/requests/{code}/").content.decode()
    assert _section(page) == ""
    assert 'href="#blockers"' not in page
    assert _section(client.get(f"/requests/{code}/blockers").content.decode()) == ""
    # a usage report that crosses a threshold flags it again: what to do is shown again
    DeploymentRequest.objects.filter(code=code).update(flagged=True, flag_reason="monthly active users crossed")
    assert _section(client.get(f"/requests/{code}/").content.decode())


def test_the_page_turns_off_htmx_inline_indicator_styles(personas: Personas) -> None:
    """htmx 2 injects a <style> element for its indicators unless told not to; the CSP
    (style-src 'self') refuses it, and app.css carries those rules instead."""
    page = _client(personas).get("/").content.decode()
    assert '<meta name="htmx-config" content=\'{"includeIndicatorStyles": false}\'>' in page


def test_the_blocker_list_polls_while_the_worker_renders_the_packet(
    flow: Flow, personas: Personas, artifacts: dict
) -> None:
    """A sign-off is recorded at once and signed by the heavy worker: the list waits for it."""
    from governance.approvals.choices import PacketStatus
    from governance.approvals.models import ApprovalPacket

    code = flow.to_review(artifacts["qwen"])
    flow.compute_capacity(code)
    client = _client(personas)
    fragment_url = f"/requests/{code}/blockers"
    assert "hx-trigger" not in _opening(_section(client.get(fragment_url).content.decode()))
    deployment = DeploymentRequest.objects.get(code=code)
    ApprovalPacket.objects.create(
        deployment=deployment, evidence_digest=deployment.evidence_digest, status=PacketStatus.RENDERING, pdf=b""
    )
    assert 'hx-trigger="every 2s"' in _opening(_section(client.get(fragment_url).content.decode()))
