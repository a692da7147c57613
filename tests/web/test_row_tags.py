"""The row tags (request, audit and token tables) format dates and URLs as the template engine's
own `date` filter and `{% url %}` tag do, in each language and time zone, with the lookups made once
per table instead of once per row."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

import pytest
from django.template import Context, Template
from django.urls import reverse
from django.utils import timezone, translation

from governance.web import labels
from governance.web.templatetags.web import _url_maker, _when_formatter, request_rows

MOMENTS = [
    datetime(2026, 1, 2, 0, 5, tzinfo=UTC),
    datetime(2026, 6, 30, 12, 0, tzinfo=UTC),
    datetime(2026, 11, 30, 23, 59, 59, tzinfo=UTC),
    datetime(2026, 3, 4, 15, 30),  # noqa: DTZ001  (naive on purpose: formatted as it is)
]


@pytest.mark.parametrize("language", ["en", "zh-hans"])
@pytest.mark.parametrize("zone", ["UTC", "Asia/Shanghai", "America/Los_Angeles"])
def test_dates_read_as_the_date_filter_writes_them(language: str, zone: str) -> None:
    template = Template('{{ value|date:"SHORT_DATETIME_FORMAT" }}')
    with translation.override(language), timezone.override(zone):
        when = _when_formatter()
        for moment in MOMENTS:
            assert when(moment) == template.render(Context({"value": moment}))


def test_urls_read_as_reverse_writes_them() -> None:
    code = uuid.uuid4()
    assert _url_maker("web:deployment")(code) == reverse("web:deployment", args=[code])
    assert _url_maker("web:token-revoke")(code) == reverse("web:token-revoke", args=[code])


def test_request_rows_link_date_and_badge_each_row() -> None:
    rows = [
        {
            "code": uuid.uuid4(),
            "product_name": f"P<{i}>",
            "artifact__name": "Kimi",
            "team__name": "platform",
            "status": status,
            "updated_at": datetime(2026, 1, i + 1, 9, 0, tzinfo=UTC),
        }
        for i, status in enumerate(["draft", "approved", "draft"])
    ]
    with translation.override("zh-hans"):
        html = request_rows(rows, "caption", "empty")
        date = Template('{{ value|date:"SHORT_DATETIME_FORMAT" }}')
        for row in rows:
            assert f'href="{reverse("web:deployment", args=[row["code"]])}"' in html
            assert date.render(Context({"value": row["updated_at"]})) in html
        assert "P&lt;0&gt;" in html
        assert html.count('class="badge status-draft"') == 2
        assert html.count('class="badge status-approved"') == 1


def test_audit_rows_name_each_action_in_words() -> None:
    from governance.audit.actions import AuditAction
    from governance.audit.models import AuditEvent
    from governance.web.templatetags.web import audit_rows

    events = [
        AuditEvent(
            seq=i,
            occurred_at=MOMENTS[i % 3],
            actor_name="legal",
            action=action,
            object_type="deployments.deploymentrequest",
            object_id=str(uuid.uuid4()),
        )
        for i, action in enumerate([AuditAction.USER_LOGIN, AuditAction.LICENSE_EVALUATED, AuditAction.USER_LOGIN])
    ]
    html = audit_rows(events)
    words = labels.audit_action_names()
    for event in events:
        assert f"<td>{words[event.action]}</td>" in html
        assert f'<code class="id">{event.object_id}</code>' in html  # whole, never cut mid-UUID
    assert audit_rows([]).count("<tr>") == 1  # the "no events" row


def test_the_request_timeline_names_each_action(personas: Any, flow: Any, artifacts: Any) -> None:
    import re

    from governance.audit.models import AuditEvent
    from tests.web.test_pages import browser

    code = flow.to_review(artifacts["kimi"])
    html = browser(personas.legal).get(f"/requests/{code}/").content.decode()
    timeline = html[html.index('<ol class="timeline">') :]
    timeline = timeline[: timeline.index("</ol>")]
    events = AuditEvent.objects.filter(object_type="deployments.deploymentrequest", object_id=str(code))
    words = labels.audit_action_names()
    expected = [words[e.action] for e in events.order_by("-seq")]
    assert expected
    assert re.findall(r"<strong>([^<]*)</strong>", timeline) == expected


def test_select_options_are_escaped_and_marked_as_format_html_would() -> None:
    """The `field` tag writes a select's options without format_html (bench/ui.py: the audit
    filter's 500 requests): each value and label still escaped, a safe label kept, one selected."""
    from django import forms
    from django.utils.html import format_html_join
    from django.utils.safestring import mark_safe

    from governance.web.templatetags.web import field

    choices = [
        ("", "any"),
        ('x"><script>alert(1)</script>', "<b>&'\"</b>"),
        ("safe", mark_safe("<i>kept</i>")),
        (uuid.UUID(int=7), "Product (00000000)"),
    ]

    class Form(forms.Form):
        pick = forms.ChoiceField(choices=choices, required=False)

    expected = format_html_join(
        "",
        '<option value="{}"{}>{}</option>',
        ((value, mark_safe(" selected") if str(value) == "safe" else "", label) for value, label in choices),
    )
    html = field(Form({"pick": "safe"})["pick"])
    assert expected in html
    assert "<script>" not in html
    assert html.count(" selected") == 1
