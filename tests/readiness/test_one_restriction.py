"""One restriction for reads: the web audit page shows exactly the events the audit API shows the
same person. A reviewer never sees events of a draft request (drafts are their team's alone)."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.test import Client

from governance.audit.models import AuditEvent
from tests.conftest import Personas
from tests.deployments.conftest import Flow

pytestmark = pytest.mark.django_db


def event_rows(html: str) -> str:
    """The events table's body (the page also echoes the filter in its forms)."""
    found = re.search(r"<tbody>(.*?)</tbody>", html, re.S)
    assert found is not None
    return found.group(1)


def test_the_web_audit_page_hides_another_teams_draft_as_the_api_does(
    flow: Flow, artifacts: dict[str, Any], personas: Personas
) -> None:
    draft = flow.create(artifacts["apache"])["code"]
    assert AuditEvent.objects.filter(object_id=draft).exists()  # the draft's creation is audited

    for user in (personas.legal, personas.engineer):
        api = personas.client(user).get("/api/v1/audit/events", {"object_id": draft})
        assert api.status_code == 200
        assert api.json()["results"] == []
        web = Client()
        web.force_login(user)
        page = web.get("/audit/", {"object_id": draft})
        assert page.status_code == 200
        assert draft[:8] not in event_rows(page.content.decode())
        assert draft[:8] not in event_rows(web.get("/audit/").content.decode())

    # The requester's own team and an auditor see it, on the page as in the API.
    web = Client()
    web.force_login(personas.auditor)
    assert draft[:8] in event_rows(web.get("/audit/").content.decode())


def test_the_hidden_requests_are_a_subquery_of_the_audit_read(
    flow: Flow, artifacts: dict[str, Any], personas: Personas
) -> None:
    """deployments_hidden_from answers a query, not a list of every hidden code: the audit read
    excludes them in its own statement, and the codes read as the text the audit stores."""
    from django.db import connection
    from django.db.models import QuerySet
    from django.test.utils import CaptureQueriesContext

    from governance.audit.selectors import audit_events_filter, audit_events_visible_to
    from governance.deployments.selectors import deployments_hidden_from

    draft = flow.create(artifacts["apache"])["code"]
    hidden = deployments_hidden_from(personas.legal)
    assert isinstance(hidden, QuerySet)
    assert list(hidden) == [draft]  # str(uuid) exactly, on PostgreSQL and SQLite alike
    personas.legal.refresh_from_db()
    with CaptureQueriesContext(connection) as queries:
        events = list(audit_events_visible_to(personas.legal, audit_events_filter(object_id=draft)))
    assert events == []
    selects = [q["sql"] for q in queries.captured_queries if "deploymentrequest" in q["sql"]]
    assert len(selects) == 1, selects
    assert "audit" in selects[0]  # the hidden codes were read inside the events' statement
