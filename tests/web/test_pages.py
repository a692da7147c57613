"""The UI pages: who sees what, that writes go through the services, constant queries per page."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from governance.deployments.models import DeploymentRequest
from tests.conftest import Personas
from tests.deployments.conftest import Flow


def browser(user: User | None) -> Client:
    client = Client()
    if user is not None:
        client.force_login(user)
    return client


def test_anonymous_is_sent_to_login(db: None) -> None:
    response = Client().get("/")
    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/")


def test_user_without_role_is_refused(personas: Personas) -> None:
    assert browser(personas.outsider).get("/").status_code == 403


def test_pages_render_for_each_role(personas: Personas, flow: Flow, artifacts: Any) -> None:
    code = flow.to_review(artifacts["kimi"])
    for user in (personas.requester, personas.legal, personas.engineer, personas.auditor):
        client = browser(user)
        for url in (
            "/",
            "/requests/",
            f"/requests/{code}/",
            "/licenses/",
            "/licenses/kimi-k2-modified-mit/",
            "/clusters/",
        ):
            response = client.get(url)
            assert response.status_code == 200, (user.username, url, response.status_code)
    assert browser(personas.requester).get("/requests/new").status_code == 200
    assert browser(personas.legal).get("/requests/new").status_code == 403
    assert browser(personas.auditor).get("/audit/").status_code == 200
    assert browser(personas.requester).get("/audit/").status_code == 403


def test_outsider_team_cannot_see_a_request(personas: Personas, flow: Flow, artifacts: Any) -> None:
    code = flow.create(artifacts["kimi"])["code"]
    assert browser(personas.other_requester).get(f"/requests/{code}/").status_code == 404
    assert browser(personas.legal).get(f"/requests/{code}/").status_code == 404  # a draft: not submitted yet


def _queries(client: Client, url: str) -> int:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as captured:
        assert client.get(url).status_code == 200, url
    return len(captured)


@pytest.mark.parametrize(
    ("username", "page"),
    [
        ("requester", "/"),
        ("legal", "/"),
        ("requester", "/requests/"),
        ("requester", "/requests/new"),
        ("legal", "request"),
        ("auditor", "/audit/"),
        ("requester", "/licenses/"),
    ],
)
def test_queries_per_page_do_not_grow_with_the_data(
    username: str, page: str, personas: Personas, flow: Flow, artifacts: Any, django_assert_max_num_queries: Any
) -> None:
    """The same number of queries with one request as with several (each with findings,
    obligations, decisions and audit events): no query per row."""
    first = flow.to_review(artifacts["kimi"])
    client = browser(getattr(personas, username))
    url = f"/requests/{first}/" if page == "request" else page
    client.get(url)  # warm per-process caches (license specs, content types)
    few = _queries(client, url)
    for _ in range(4):
        code = flow.to_review(artifacts["kimi"])
        flow.meet_obligations(code)
    flow.meet_obligations(first)
    many = _queries(client, url)
    assert many == few, f"{url}: {few} queries with 1 request, {many} with 5"
    with django_assert_max_num_queries(MAX_QUERIES):
        client.get(url)


MAX_QUERIES = 20


def test_language_switcher_and_localised_numbers(personas: Personas, flow: Flow, artifacts: Any) -> None:
    client = browser(personas.requester)
    response = client.post("/i18n/setlang/", {"language": "zh-hans", "next": "/"})
    assert response.status_code == 302
    page = client.get("/").content.decode()
    assert '<html lang="zh-hans">' in page
    assert "仪表板" in page
    assert "等待我处理" in page
    english = browser(personas.requester).get("/").content.decode()
    assert '<html lang="en">' in english
    assert "Waiting on me" in english


def test_wizard_works_without_javascript(personas: Personas, artifacts: Any) -> None:
    """The preview button and the create button are plain form posts."""
    client = browser(personas.requester)
    form = {
        "artifact": str(artifacts["kimi"].code),
        "product_name": "Acme Assistant",
        "environments": "production",
        "use_case": "external_commercial",
        "commercial_entity": "on",
        "hosted_service": "on",
        "production": "on",
        "monthly_active_users": "2000000",
        "revenue_amount": "25000000",
        "revenue_currency": "USD",
        "org_country": "US",
        "derivative_kind": "none",
        "derivative_distribution": "none",
        "engine": "vllm",
        "precision": "w4a8",
        "gpu": "h200",
        "kv_dtype": "bf16",
        "max_model_len": "131072",
        "concurrency": "8",
    }
    preview = client.post("/requests/new", {**form, "preview": "1"}).content.decode()
    assert 'data-code="attribution.display"' in preview
    assert DeploymentRequest.objects.count() == 0
    response = client.post("/requests/new", {**form, "create": "1"})
    assert response.status_code == 302
    created = DeploymentRequest.objects.get()
    assert response["Location"] == f"/requests/{created.code}/"
    assert created.facts["monthly_revenue"] == {"amount": 25000000.0, "currency": "USD"}
    assert created.serving_plan["precision"] == "w4a8"
    bad = client.post("/requests/new", {**form, "max_model_len": "8", "create": "1"})
    assert bad.status_code == 200
    assert 'aria-invalid="true"' in bad.content.decode()


def test_usage_form_records_a_report_for_the_team(personas: Personas, flow: Flow, artifacts: Any) -> None:
    from governance.deployments.models import UsageReport

    code = flow.to_review(artifacts["kimi"])
    form = {"month": "2026-01", "monthly_active_users": "1200", "revenue_amount": "", "revenue_currency": "USD"}
    response = browser(personas.requester).post(f"/requests/{code}/usage", form)
    assert response.status_code == 302
    assert UsageReport.objects.filter(request__code=code, month="2026-01").count() == 1
    assert browser(personas.other_requester).post(f"/requests/{code}/usage", form).status_code == 404
