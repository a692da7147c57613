"""Evidence digest, re-review on edit, usage-report thresholds, waivers and license re-evaluation."""

from datetime import timedelta

from django.core import mail
from django.db import transaction
from django.utils import timezone

from governance.audit.actions import AuditAction
from governance.audit.models import AuditEvent
from governance.deployments.models import DeploymentRequest
from governance.deployments.services import (
    deployment_evidence_refresh,
    deployment_lock,
    deployments_reevaluate,
    waivers_expire,
)
from governance.licenses.models import LicenseVersion
from governance.licenses.services import license_version_publish
from tests.deployments.conftest import FACTS, Flow


def test_same_evidence_same_digest_any_change_another(flow: Flow, artifacts, personas) -> None:
    code = flow.create(artifacts["apache"])["code"]
    request = DeploymentRequest.objects.get(code=code)
    digest = request.evidence_digest
    assert len(digest) == 64
    with transaction.atomic():
        assert deployment_evidence_refresh(deployment_lock(request), "system:test", "no change") is False
    assert DeploymentRequest.objects.get(code=code).evidence_digest == digest
    seen = {digest}
    for change in (
        {"product_name": "Other"},
        {"facts": {**FACTS, "monthly_active_users": 3}},
        {"serving_plan": {"precision": "w4a8", "gpu": "h200", "max_model_len": 32768}},
        {"environments": ["staging"]},
    ):
        response = flow.client(personas.requester).patch(f"/api/v1/deployments/{code}", change, format="json")
        assert response.status_code == 200, response.json()
        assert response.json()["evidence_digest"] not in seen, change
        seen.add(response.json()["evidence_digest"])


def test_edit_after_approval_returns_to_review_and_voids_signoffs(flow: Flow, artifacts, personas) -> None:
    code = flow.to_review(artifacts["apache"])
    assert flow.approve(code)["status"] == "approved"
    response = flow.client(personas.requester).patch(
        f"/api/v1/deployments/{code}", {"facts": {**FACTS, "monthly_active_users": 5_000_000}}, format="json"
    )
    body = response.json()
    assert body["status"] == "in_review"
    assert all(d["voided"] for d in body["decisions"])
    assert AuditEvent.objects.filter(action=AuditAction.SIGNOFF_VOIDED, object_id=code).count() == 2
    last = AuditEvent.objects.filter(action=AuditAction.DEPLOYMENT_TRANSITIONED, object_id=code).order_by("-seq")[0]
    assert last.data == {**last.data, "from": "approved", "to": "in_review"}
    assert "facts" in last.data["reason"]


def test_kimi_revenue_in_cny_crossing_flags_the_request(
    flow: Flow, artifacts, personas, django_capture_on_commit_callbacks
) -> None:
    personas.legal.email = "legal@example.com"
    personas.legal.save()
    code = flow.to_review(artifacts["kimi"], {**FACTS, "monthly_revenue": {"amount": 100_000_000, "currency": "CNY"}})
    assert flow.approve(code)["status"] == "approved"
    with django_capture_on_commit_callbacks(execute=True):  # the e-mail is sent after commit
        response = flow.post(
            personas.requester,
            code,
            "usage",
            {
                "month": "2026-10",
                "monthly_active_users": 3_000_000,
                "monthly_revenue": {"amount": "150000000", "currency": "CNY"},
            },
        )
    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["flagged"] is True
    assert body["status"] == "in_review"  # the gate denies until re-approved
    assert "kimi-k2-modified-mit:attribution.display:obligation" in body["flag_reason"]
    kimi = next(item for item in body["obligations"] if item["finding_code"] == "attribution.display")
    assert kimi["params"]["text"] == "Kimi K2"
    assert kimi["params"]["conversion"]["currency"] == "CNY"
    event = AuditEvent.objects.get(action=AuditAction.DEPLOYMENT_USAGE_REPORTED, object_id=code)
    assert event.data["crossed"] == ["kimi-k2-modified-mit:attribution.display:obligation"]
    assert len(mail.outbox) == 1
    assert mail.outbox[0].to == ["legal@example.com"]
    # Signing is refused for the unaccepted obligation; the rest is what signing again clears.
    assert {b["code"] for b in body["blockers"]} == {
        "obligation.not_accepted",
        "signature.stale",
        "usage.threshold_crossed",
    }


def test_a_second_clause_of_the_same_duty_crossed_by_usage_flags_the_request(flow: Flow, artifacts, personas) -> None:
    """Approved with Kimi K2's display duty from revenue (over USD 20M); a report over 100M monthly
    active users brings the same duty under its other clause: a new finding, so a flag."""
    revenue = {"amount": 25_000_000, "currency": "USD"}
    code = flow.to_review(artifacts["kimi"], {**FACTS, "monthly_revenue": revenue})
    assert flow.approve(code)["status"] == "approved"
    response = flow.post(
        personas.requester,
        code,
        "usage",
        {"month": "2026-10", "monthly_active_users": 150_000_000, "monthly_revenue": revenue},
    )
    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["flagged"] is True
    assert body["status"] == "in_review"
    assert "kimi-k2-modified-mit:attribution.display:obligation" in body["flag_reason"]


def test_qwen_mau_crossing_needs_licensor_approval(flow: Flow, artifacts, personas) -> None:
    code = flow.to_review(artifacts["qwen"])
    flow.approve(code)
    same = flow.post(personas.requester, code, "usage", {"month": "2026-10", "monthly_active_users": 100_000_000})
    assert same.json()["flagged"] is False  # "more than" 100M is strict
    crossed = flow.post(personas.requester, code, "usage", {"month": "2026-11", "monthly_active_users": 100_000_001})
    body = crossed.json()
    assert body["flagged"] is True
    assert any(b.get("finding") == "threshold.licensor_approval" for b in body["blockers"])


def test_usage_report_by_scoped_token_and_bad_input(flow: Flow, artifacts, personas) -> None:
    from rest_framework.test import APIClient

    from governance.core.tokens import api_token_issue

    code = flow.to_review(artifacts["qwen"])
    # A billing token is issued for the team whose requests it reports on (issue 13).
    billing = api_token_issue(
        user=personas.outsider, name="billing", scopes=["usage:write"], team=personas.team
    ).clear_text
    unscoped = api_token_issue(user=personas.outsider, name="other").clear_text
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {unscoped}")
    assert (
        client.post(
            f"/api/v1/deployments/{code}/usage", {"month": "2026-10", "monthly_active_users": 5}, format="json"
        ).status_code
        == 404
    )
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {billing}")
    before = DeploymentRequest.objects.get(code=code)
    for body, field in (
        ({"month": "2026-13", "monthly_active_users": 5}, "month"),
        ({"month": "2026-10", "monthly_active_users": -5}, "monthly_active_users"),
        (
            {"month": "2026-10", "monthly_active_users": 5, "monthly_revenue": {"amount": 1, "currency": "XYZ"}},
            "monthly_revenue.currency",
        ),
        ({"month": "2026-10", "monthly_active_users": 5, "extra": 1}, "extra"),
    ):
        response = client.post(f"/api/v1/deployments/{code}/usage", body, format="json")
        assert response.status_code == 400
        assert field in response.json()["extra"]["fields"], response.json()
    after = DeploymentRequest.objects.get(code=code)
    assert (after.facts, after.evidence_digest) == (before.facts, before.evidence_digest)
    ok = client.post(
        f"/api/v1/deployments/{code}/usage", {"month": "2026-10", "monthly_active_users": 7}, format="json"
    )
    assert ok.status_code == 201
    assert DeploymentRequest.objects.get(code=code).facts["monthly_active_users"] == 7


def test_waiver_hides_a_blocker_until_it_expires(flow: Flow, artifacts, personas) -> None:
    code = flow.to_review(artifacts["qwen"], {**FACTS, "monthly_active_users": 200_000_000})
    blockers = flow.get(personas.legal, code)["blockers"]
    assert any(b.get("finding") == "threshold.licensor_approval" for b in blockers)
    expires = timezone.now() + timedelta(days=30)
    bad = flow.post(
        personas.legal,
        code,
        "waivers",
        {"license": "qwen", "finding_code": "use.research_only", "reason": "x", "expires_at": expires.isoformat()},
    )
    assert bad.status_code == 400
    assert "finding_code" in bad.json()["extra"]["fields"]
    assert (
        flow.post(
            personas.requester,
            code,
            "waivers",
            {
                "license": "qwen",
                "finding_code": "threshold.licensor_approval",
                "reason": "x",
                "expires_at": expires.isoformat(),
            },
        ).status_code
        == 403
    )
    granted = flow.post(
        personas.legal,
        code,
        "waivers",
        {
            "license": "qwen",
            "finding_code": "threshold.licensor_approval",
            "reason": "Alibaba Cloud license QW-2026-17 signed",
            "expires_at": expires.isoformat(),
        },
    )
    assert granted.status_code == 201, granted.json()
    body = granted.json()
    assert not any(b.get("finding") == "threshold.licensor_approval" for b in body["blockers"])
    finding = next(f for e in body["licenses"] for f in e["findings"] if f["code"] == "threshold.licensor_approval")
    assert finding["waived"] is True  # still visible
    flow.approve(code)
    assert waivers_expire() == 0  # not yet expired
    import time_machine

    with time_machine.travel(expires + timedelta(minutes=1)):
        assert waivers_expire() == 1
        reopened = flow.get(personas.legal, code)
    assert reopened["status"] == "in_review"
    assert any(b.get("finding") == "threshold.licensor_approval" for b in reopened["blockers"])
    assert AuditEvent.objects.filter(action=AuditAction.WAIVER_EXPIRED, object_id=code).count() == 1


def test_new_license_version_reevaluates_approved_requests(flow: Flow, artifacts, personas) -> None:
    code = flow.to_review(artifacts["apache"])
    flow.approve(code)
    old = LicenseVersion.objects.get(license__key="apache-2.0")
    new = LicenseVersion.objects.create(license=old.license, version="2.0-r1", effective_date="2030-01-01")
    for term in old.terms.all():
        term.pk = None
        term.version = new
        term.save()
    new.terms.create(
        code="attribution.display",
        severity="obligation",
        clause="new",
        condition="facts.hosted_service",
        params={"text": "Powered by Apache", "where": "UI"},
        message='Display "{text}"',
        position=99,
    )
    affected = license_version_publish(version=new, actor=personas.admin)
    assert ("deployments.deploymentrequest", code) in affected
    assert deployments_reevaluate(license_key="apache-2.0") == 1
    body = flow.get(personas.legal, code)
    assert body["status"] == "in_review"
    assert body["licenses"][0]["version"] == "2.0-r1"
