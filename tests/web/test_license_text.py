"""The license page shows each term's message with its limits filled in and the deployment's own
figures in words, never a raw `{value_display}` or `{limit:,}` placeholder."""

from __future__ import annotations

import re
from typing import Any

from django.test import Client

from governance.web.selectors.catalog import readable_message


def test_placeholders_are_filled_or_worded() -> None:
    text = readable_message(
        "Commercial use with {value_display} monthly active users, more than {limit:,}: display {text} {unknown}.",
        {"limit": 100000000, "text": '"Kimi K2"'},
    )
    assert text == (
        "Commercial use with the deployment's own figure monthly active users, more than 100,000,000: "
        'display "Kimi K2" ….'
    )


def test_the_license_page_has_no_raw_placeholder(personas: Any, catalog: Any) -> None:
    client = Client()
    client.force_login(personas.legal)
    page = client.get("/licenses/kimi-k2-modified-mit/").content.decode()
    assert "100,000,000" in page
    assert not re.search(r"\{[a-z_]+(:[^}]*)?\}", page), re.search(r".{60}\{[a-z_]+(:[^}]*)?\}.{20}", page)
