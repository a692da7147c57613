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


def test_an_api_path_that_names_nothing_answers_the_api_s_json_404(personas: Any) -> None:
    """`/api/v1/artifacts/nope/signature` (a code that is not a UUID, so no route) answered the HTML
    page to an API client; the API's error shape is JSON, as every other 404 of the API is."""
    from rest_framework.test import APIClient

    client = APIClient()
    client.force_authenticate(personas.requester)
    answer = client.get("/api/v1/artifacts/nope/signature")
    assert answer.status_code == 404
    assert answer["Content-Type"].startswith("application/json"), answer["Content-Type"]
    assert answer.json() == {"message": "no such API endpoint: /api/v1/artifacts/nope/signature", "extra": {}}
    page = Client().get("/no-such-page/")  # a page's 404 stays the page
    assert page.status_code == 404
    assert page["Content-Type"].startswith("text/html")
