"""The CI tokens page, the packet verifier and the request page's packet and gate panels:
who may use them, that writes go through the gate and approvals services, the secret shown once,
and a constant number of queries per list."""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.utils import timezone

from governance.approvals.models import ApprovalPacket
from governance.audit.actions import AuditAction
from governance.audit.models import AuditEvent
from governance.core.models import ApiToken
from governance.core.tokens import api_token_resolve
from governance.gate.services import ci_token_issue
from tests.approvals.conftest import verify_web
from tests.conftest import Personas
from tests.deployments.conftest import Flow
from tests.gate.conftest import Gate, approved_request, bearer, gate  # noqa: F401  (fixture)
from tests.web.test_pages import _queries, browser

SECRET = re.compile(r"gov_[A-Za-z0-9_-]{20,}")


def _form(team: str = "platform", **changes: Any) -> dict[str, Any]:
    expires = (timezone.now() + timedelta(days=30)).date().isoformat()
    return {
        "name": "deploy-prod",
        "team": team,
        "scopes": ["gate:check"],
        "environments": "production",
        "deployments": "",
        "expires_at": expires,
        **changes,
    }


def _issue(personas: Personas, name: str, team: Any = None) -> ApiToken:
    token, _ = ci_token_issue(
        actor=personas.admin, team=team or personas.team, name=name, expires_at=timezone.now() + timedelta(days=30)
    )
    return token


# --- the tokens page ------------------------------------------------------------------------------


def test_tokens_page_for_admins_and_team_leads_only(personas: Personas) -> None:
    _issue(personas, "platform-deploy")
    _issue(personas, "research-deploy", personas.other_team)
    personas.team.leads.add(personas.requester)
    admin_page = browser(personas.admin).get("/tokens/")
    assert admin_page.status_code == 200
    assert "platform-deploy" in admin_page.content.decode()
    assert "research-deploy" in admin_page.content.decode()
    lead_page = browser(personas.requester).get("/tokens/").content.decode()
    assert "platform-deploy" in lead_page
    assert "research-deploy" not in lead_page  # only the teams they lead
    assert '<option value="research"' not in lead_page
    for user in (personas.other_requester, personas.legal, personas.engineer, personas.auditor, personas.outsider):
        assert browser(user).get("/tokens/").status_code == 403, user.username
        assert browser(user).post("/tokens/", _form()).status_code == 403, user.username
    assert ApiToken.objects.count() == 2
    anonymous = Client().get("/tokens/")
    assert anonymous.status_code == 302
    assert anonymous["Location"].startswith("/accounts/login/")


def test_created_secret_is_shown_once_and_only_its_hash_is_stored(personas: Personas) -> None:
    personas.team.leads.add(personas.requester)
    client = browser(personas.requester)
    created = client.post("/tokens/", _form(scopes=["gate:check", "usage:write"], environments="staging, production"))
    assert created.status_code == 200
    assert "no-store" in created["Cache-Control"]
    body = created.content.decode()
    secrets = set(SECRET.findall(body))
    assert len(secrets) == 1, secrets
    secret = secrets.pop()
    assert f'<pre id="token-secret">{secret}</pre>' in body
    token = ApiToken.objects.get()
    assert api_token_resolve(secret) == token  # the secret works and is this token
    assert secret not in {token.digest, token.prefix, token.name}
    assert token.team == personas.team
    assert token.created_by == personas.requester
    assert sorted(token.scopes) == ["gate:check", "usage:write"]
    assert token.environments == ["production", "staging"]
    assert token.user.username.startswith("ci-")  # the team's service user, not the lead
    assert AuditEvent.objects.filter(action=AuditAction.API_TOKEN_ISSUED).count() == 1
    listing = client.get("/tokens/")
    assert secret not in listing.content.decode()
    assert token.prefix in listing.content.decode()
    assert secret not in browser(personas.admin).get("/tokens/").content.decode()


def test_create_refusals_are_shown_on_the_form(personas: Personas) -> None:
    personas.team.leads.add(personas.requester)
    client = browser(personas.requester)
    too_late = (timezone.now() + timedelta(days=400)).date().isoformat()
    refused = client.post("/tokens/", _form(expires_at=too_late))
    assert refused.status_code == 400
    page = refused.content.decode()
    assert 'id="id_expires_at"' in page
    assert 'aria-invalid="true"' in page
    assert "366" in page
    unknown = client.post("/tokens/", _form(deployments="00000000-0000-4000-8000-000000000000"))
    assert unknown.status_code == 400  # not a request of the team: the service names the field
    assert "not requests of team platform" in unknown.content.decode()
    assert client.post("/tokens/", _form(team="research")).status_code == 400  # not a team they lead
    assert client.post("/tokens/", _form(scopes=["deployments:write"])).status_code == 400
    assert client.post("/tokens/", _form(environments="prod uction")).status_code == 400
    assert ApiToken.objects.count() == 0


def test_revoke_through_the_gate_service(personas: Personas) -> None:
    mine = _issue(personas, "platform-deploy")
    theirs = _issue(personas, "research-deploy", personas.other_team)
    personas.team.leads.add(personas.requester)
    client = browser(personas.requester)
    assert client.post(f"/tokens/{theirs.code}/revoke").status_code == 404  # another team's: not found
    assert browser(personas.other_requester).post(f"/tokens/{mine.code}/revoke").status_code == 404
    assert client.get(f"/tokens/{mine.code}/revoke").status_code == 405
    response = client.post(f"/tokens/{mine.code}/revoke", follow=True)
    assert response.redirect_chain[-1][0] == "/tokens/"
    mine.refresh_from_db()
    theirs.refresh_from_db()
    assert mine.revoked_at is not None
    assert theirs.revoked_at is None
    assert f'data-prefix="{mine.prefix}" data-active="false"' in response.content.decode()
    assert AuditEvent.objects.filter(action=AuditAction.API_TOKEN_REVOKED).count() == 1
    again = client.post(f"/tokens/{mine.code}/revoke", follow=True)  # the service's 409, as a message
    assert "already revoked" in again.content.decode()
    assert AuditEvent.objects.filter(action=AuditAction.API_TOKEN_REVOKED).count() == 1


def test_token_list_queries_do_not_grow(personas: Personas, django_assert_max_num_queries: Any) -> None:
    personas.team.leads.add(personas.requester)
    _issue(personas, "t0")
    for user in (personas.requester, personas.admin):
        client = browser(user)
        client.get("/tokens/")
        few = _queries(client, "/tokens/")
        for index in range(5):
            _issue(personas, f"t{user.pk}-{index}", personas.other_team if index % 2 else personas.team)
        assert _queries(client, "/tokens/") == few
        with django_assert_max_num_queries(12):
            client.get("/tokens/")


def test_navigation_and_dashboard_link_the_new_pages(personas: Personas) -> None:
    plain = browser(personas.requester).get("/").content.decode()
    assert 'href="/verify/"' in plain
    assert 'href="/tokens/"' not in plain
    personas.team.leads.add(personas.requester)
    lead = browser(personas.requester).get("/").content.decode()
    assert lead.count('href="/tokens/"') == 2  # the menu and the dashboard
    assert browser(personas.admin).get("/").content.decode().count('href="/tokens/"') == 2
    assert 'href="/tokens/"' not in browser(personas.auditor).get("/").content.decode()


def test_tokens_and_verify_pages_in_chinese(personas: Personas) -> None:
    client = browser(personas.admin)
    client.post("/i18n/setlang/", {"language": "zh-hans", "next": "/"})
    tokens = client.get("/tokens/").content.decode()
    assert "CI 令牌" in tokens
    assert "创建令牌" in tokens
    verify = client.get("/verify/").content.decode()
    assert "验证审批文件包" in verify
    assert "上传已签名的审批文件包" in verify


# --- verify a PDF -----------------------------------------------------------------------------------


def _packet_bytes(code: str) -> bytes:
    packet = ApprovalPacket.objects.get(deployment__code=code, voided_at__isnull=True)
    return bytes(packet.pdf)


def _upload(data: bytes) -> SimpleUploadedFile:
    return SimpleUploadedFile("packet.pdf", data, content_type="application/pdf")


def test_verify_a_signed_packet(personas: Personas, flow: Flow, artifacts: Any, tmp_path: Path) -> None:
    code = approved_request(flow, artifacts["apache"], tmp_path)
    data = _packet_bytes(code)
    for user in (personas.requester, personas.legal, personas.engineer, personas.auditor, personas.admin):
        assert browser(user).get("/verify/").status_code == 200, user.username
    assert browser(personas.outsider).get("/verify/").status_code == 403
    response = verify_web(browser(personas.auditor), data)
    assert response.status_code == 200
    page = response.content.decode()
    assert 'data-status="done"' in page
    assert 'data-all-valid="true"' in page
    assert page.count('class="signature"') == 2
    assert 'data-role="legal" data-accepted="true"' in page
    assert 'data-role="engineering" data-accepted="true"' in page
    assert 'data-current="true"' in page
    from governance.deployments.models import DeploymentRequest

    assert DeploymentRequest.objects.get(code=code).evidence_digest in page
    assert AuditEvent.objects.filter(action=AuditAction.PACKET_VERIFIED).exists()


def test_verify_reports_a_tampered_packet_and_a_missing_file(
    personas: Personas, flow: Flow, artifacts: Any, tmp_path: Path
) -> None:
    code = approved_request(flow, artifacts["apache"], tmp_path)
    data = bytearray(_packet_bytes(code))
    at = data.find(b"/Producer")
    assert at > 0
    data[at + 12] ^= 0x01  # one byte inside the signed range
    client = browser(personas.legal)
    page = verify_web(client, bytes(data)).content.decode()
    assert 'data-all-valid="false"' in page
    assert 'data-accepted="true"' not in page
    missing = client.post("/verify/", {})
    assert missing.status_code == 400
    assert 'aria-invalid="true"' in missing.content.decode()
    # Not a PDF at all: refused at once naming the problem (400), never queued or reported as verified.
    garbage = client.post("/verify/", {"file": _upload(b"not a pdf at all")})
    assert garbage.status_code == 400
    assert 'aria-invalid="true"' in garbage.content.decode()
    assert 'data-accepted="true"' not in garbage.content.decode()
    # One the parsers cannot read: the worker refuses it, and the upload's page says why.
    unreadable = verify_web(client, b"%PDF-1.7\n" + b"(" * 5000).content.decode()
    assert 'data-status="refused"' in unreadable
    assert "not a readable PDF" in unreadable
    assert 'data-accepted="true"' not in unreadable


# --- the request page's packet and gate panels ---------------------------------------------------


def test_request_page_shows_packet_verification_and_gate_decisions(gate: Gate, personas: Personas) -> None:  # noqa: F811
    assert gate.codes() == []
    assert "serving.max_model_len_exceeded" in gate.codes(serving={"max_model_len": 65536})
    page = browser(personas.requester).get(f"/requests/{gate.code}/").content.decode()
    assert f'href="/api/v1/approvals/deployments/{gate.code}/packet"' in page or "/packet" in page
    assert 'data-legal-valid="true" data-engineering-valid="true" data-current="true"' in page
    assert page.count('class="gate-decision"') == 2
    assert 'data-decision="allow"' in page
    assert 'data-decision="deny"' in page
    assert "<code>serving.max_model_len_exceeded</code>" in page
    for user in (personas.legal, personas.auditor):
        assert browser(user).get(f"/requests/{gate.code}/").content.decode().count('class="gate-decision"') == 2
    assert browser(personas.other_requester).get(f"/requests/{gate.code}/").status_code == 404


def test_request_page_queries_do_not_grow_with_gate_decisions(
    gate: Gate,  # noqa: F811
    personas: Personas,
    django_assert_max_num_queries: Any,
) -> None:
    client = browser(personas.legal)
    url = f"/requests/{gate.code}/"
    gate.codes()
    client.get(url)
    few = _queries(client, url)
    for _ in range(4):
        gate.codes(serving={"max_model_len": 65536})
    assert _queries(client, url) == few
    with django_assert_max_num_queries(22):  # the in-review page's 20, plus the packet's stored verification
        client.get(url)


@pytest.mark.parametrize("language", ["en", "zh-hans"])
def test_request_page_before_any_gate_check(language: str, gate: Gate, personas: Personas) -> None:  # noqa: F811
    client = browser(personas.requester)
    client.post("/i18n/setlang/", {"language": language, "next": "/"})
    page = client.get(f"/requests/{gate.code}/").content.decode()
    assert 'class="gate-decision"' not in page
    expected = "The CI gate has not been asked about this request yet." if language == "en" else "CI 门禁尚未"
    assert expected in page


def test_expiry_date_input_is_iso_in_every_language(personas: Personas) -> None:
    """<input type=date> takes only YYYY-MM-DD: a localised value (zh-Hans: 2027/02/27) is
    dropped by the browser and the form comes back with a required field empty."""
    client = browser(personas.admin)
    client.post("/i18n/setlang/", {"language": "zh-hans", "next": "/"})
    page = client.get("/tokens/").content.decode()
    default = (timezone.now() + timedelta(days=90)).date().isoformat()
    assert re.search(rf'<input type="date" name="expires_at" id="id_expires_at" value="{default}"', page), page
    assert client.post("/tokens/", _form()).status_code == 200
