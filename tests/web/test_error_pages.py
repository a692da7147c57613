"""403 and 404 pages keep the navigation and speak the user's language; the 500 page stands alone."""

from __future__ import annotations

from typing import Any

from django.template.loader import render_to_string
from django.test import Client
from django.utils import translation


def test_a_403_and_a_404_page_have_navigation_and_chinese(personas: Any) -> None:
    client = Client()
    client.force_login(personas.requester)
    client.post("/i18n/setlang/", {"language": "zh-hans", "next": "/"})
    missing = client.get("/requests/00000000-0000-4000-8000-000000000000/")
    assert missing.status_code == 404
    body = missing.content.decode()
    assert "未找到" in body
    assert 'href="/"' in body
    refused = client.get("/audit/")
    assert refused.status_code == 403
    assert "无权访问" in refused.content.decode()
    assert "<nav" in refused.content.decode()


def test_the_500_page_renders_without_a_request() -> None:
    with translation.override("en"):
        assert "Something went wrong" in render_to_string("500.html")


def test_verdicts_are_words_in_both_languages() -> None:
    from governance.web import labels

    with translation.override("en"):
        assert labels.label("verdict", "approve") == "Approves"
    with translation.override("zh-hans"):
        assert labels.label("verdict", "reject") == "拒绝"
