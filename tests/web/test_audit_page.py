"""The audit page: actions in words (English and Chinese), a filter by deployment request, object
ids printed whole (never cut mid-UUID)."""

from __future__ import annotations

from typing import Any

from django.test import Client

from governance.audit.actions import AuditAction
from governance.web import labels


def test_every_audit_action_has_words() -> None:
    names = labels.audit_action_names()
    for action in AuditAction:
        assert names[int(action)] != action.label, action.label
        assert not set("._") & set(names[int(action)]), names[int(action)]


def test_the_page_shows_words_filters_by_request_and_prints_whole_ids(flow: Any, artifacts: Any) -> None:
    first = flow.create(artifacts["apache"])["code"]
    second = flow.create(artifacts["kimi"])["code"]
    client = Client()
    client.force_login(flow.p.auditor)
    page = client.get("/audit/").content.decode()
    assert "Request created" in page
    assert ">deployment.created<" not in page  # a raw code is an option's value, never its text
    assert first in page  # the whole UUID
    assert 'name="deployment"' in page
    filtered = client.get("/audit/", {"deployment": second}).content.decode()
    assert second in filtered
    assert first not in filtered.split("<tbody>")[1]
    chinese = client.get("/audit/", HTTP_ACCEPT_LANGUAGE="zh-hans").content.decode()
    assert "申请已创建" in chinese
