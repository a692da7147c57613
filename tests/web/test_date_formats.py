"""Dates in one format per language across the UI, the period report and the packet: every date
and time a page prints reads the way governance/formats gives it for the page's language (en:
2026-12-01 and 2026-12-01 19:07 UTC; zh-hans: 2026年12月1日 and 2026年12月1日 19:07 UTC), never
Django's other English forms (Dec. 1, 2026 / 12/01/2026 / 7:07 p.m.) or a raw ISO timestamp."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

import pytest
from django.test import Client
from django.utils import translation
from django.utils.html import escape

from governance.core.templatetags.dates import format_day, format_moment
from governance.licenses.models import License
from tests.conftest import Personas
from tests.deployments.conftest import Flow

MOMENT = {"en": "2026-12-01 19:07 UTC", "zh-hans": "2026年12月1日 19:07 UTC"}
DAY = {"en": "2026-12-01", "zh-hans": "2026年12月1日"}
# Forms no page may print, per language
MONTHS = r"\b(Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Sept|Oct|Nov|Dec|January|February|March|April|June|July|August|September|October|November|December)\.? \d{1,2}, \d{4}"
FOREIGN = {
    "en": [
        r"\d{4}年\d{1,2}月\d{1,2}日",
        r"\b\d{1,2}/\d{1,2}/\d{2,4}\b",
        MONTHS,
        r"\b[ap]\.m\.",
        r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}",
    ],
    "zh-hans": [r"\b\d{1,2}/\d{1,2}/\d{2,4}\b", MONTHS, r"\b[ap]\.m\.", r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}"],
}
# A date and time as this language prints one: anything else with a time in it is a second format
TIMES = {
    "en": (r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2})?[^<\n]{0,6}", r"\d{4}-\d{2}-\d{2} \d{2}:\d{2} UTC"),
    "zh-hans": (
        r"\d{4}年\d{1,2}月\d{1,2}日 ?\d{1,2}:\d{2}(:\d{2})?[^<\n]{0,6}",
        r"\d{4}年\d{1,2}月\d{1,2}日 \d{2}:\d{2} UTC",
    ),
}


@pytest.mark.parametrize("language", ["en", "zh-hans"])
def test_the_filters_give_one_format_per_language(language: str) -> None:
    moment = datetime(2026, 12, 1, 19, 7, 42, tzinfo=UTC)
    with translation.override(language):
        assert format_moment(moment) == MOMENT[language]
        assert format_moment("2026-12-01T19:07:42.123456Z") == MOMENT[language]  # as the audit trail stores it
        assert format_moment("2026-12-01 19:07:42 UTC") == MOMENT[language]  # as the period report's CSV has it
        assert format_day(moment) == DAY[language]
        assert format_day("2026-12-01T00:00:00Z") == DAY[language]  # a waiver's expiry in the evidence
        assert format_moment(moment.date()) == DAY[language]
        assert format_moment("not a date") == "not a date"
        assert format_moment(None) == ""


def mixed_formats(page: str, language: str, data: tuple[str, ...] = ()) -> list[str]:
    """Date forms other than the language's own; `data` is text the page quotes (a license's
    published title such as "MiniMax Model License (January 14, 2025 text)"), not a date it formats."""
    text = re.sub(r"<script.*?</script>|<style.*?</style>", "", page, flags=re.S)
    for quoted in data:
        text = text.replace(quoted, "")
    found = [m.group(0) for pattern in FOREIGN[language] for m in re.finditer(pattern, text)]
    loose, strict = TIMES[language]
    found += [m.group(0) for m in re.finditer(loose, text) if not re.match(strict, m.group(0))]
    return found


def test_the_scan_finds_a_second_format() -> None:
    assert mixed_formats("<td>Dec. 1, 2026, 7:07 p.m.</td><td>2026-12-01 19:07:42</td>", "en") == [
        "Dec. 1, 2026",
        "p.m.",
        "2026-12-01 19:07:42",
    ]
    assert mixed_formats("<td>2026-12-01 19:07 UTC</td>", "zh-hans") == ["2026-12-01 19:07"]
    assert mixed_formats("<td>2026-12-01 19:07 UTC</td><td>2026-12-01</td>", "en") == []


@pytest.mark.parametrize("language", ["en", "zh-hans"])
def test_no_page_mixes_date_formats(personas: Personas, flow: Flow, artifacts: Any, language: str) -> None:
    code = flow.to_review(artifacts["llama"])
    flow.compute_capacity(code)
    pages: dict[str, str] = {}
    for user, urls in (
        (personas.requester, ["/", "/requests/", f"/requests/{code}/", "/licenses/", "/licenses/llama-3.1/"]),
        (personas.legal, ["/", f"/requests/{code}/"]),
        (personas.auditor, ["/audit/", f"/audit/?deployment={code}", "/clusters/"]),
    ):
        client = Client()
        client.force_login(user)
        client.cookies["django_language"] = language
        for url in urls:
            response = client.get(url, HTTP_ACCEPT_LANGUAGE=language)
            assert response.status_code == 200, (url, response.status_code)
            pages[f"{user.username} {url}"] = response.content.decode()
    assert any(re.search(TIMES[language][1], page) for page in pages.values()), "no date printed at all"
    titles = tuple(escape(name) for name in License.objects.values_list("name", flat=True))
    problems = {name: found for name, page in pages.items() if (found := mixed_formats(page, language, titles))}
    assert not problems, problems


def test_the_period_report_pdf_is_english_with_english_dates_for_a_zh_auditor(personas: Personas) -> None:
    import subprocess

    client = Client()
    client.force_login(personas.auditor)
    client.cookies["django_language"] = "zh-hans"
    response = client.get("/audit/report.pdf", {"since": "2026-11-01", "until": "2026-12-01"})
    assert response.status_code == 200
    text = subprocess.run(["pdftotext", "-", "-"], input=response.content, capture_output=True, check=True).stdout
    assert "2026-11-01 to 2026-12-01" in text.decode()
    assert "年" not in text.decode()
