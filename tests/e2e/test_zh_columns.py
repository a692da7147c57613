"""Narrow columns give Chinese room (issue 46): in the zh-hans request page the blocker table's
"Who acts" column was squeezed between two long ones and set 法务审核人 two or three characters a
line. Measured in Chromium: each label there, and each header, is one line."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import Personas
from tests.deployments.conftest import Flow
from tests.e2e.conftest import wait_for
from tests.e2e.test_review_flow import Session

pytestmark = [pytest.mark.e2e]

# the number of lines each cell's text is set on (a Range's client rects: one per line box)
LINES = """(selector) => Array.from(document.querySelectorAll(selector)).map((cell) => {
  const range = document.createRange(); range.selectNodeContents(cell);
  const tops = new Set(Array.from(range.getClientRects()).map((r) => Math.round(r.top)));
  return [cell.textContent.trim(), tops.size]; })"""


def test_who_acts_and_the_headers_keep_their_line_in_chinese(
    browser: Any, live_server: Any, personas: Personas, flow: Flow, artifacts: Any
) -> None:
    code = flow.to_review(artifacts["llama"])
    flow.compute_capacity(code)
    session = Session(browser, live_server.url, "zh-hans")
    try:
        page = session.login("legal")
        page.goto(f"/requests/{code}/")
        wait_for(page, "#blockers tr.blocker")
        who = page.evaluate(LINES, "#blockers td.who")
        assert who, "no blocker rows"
        assert {text for text, _lines in who} >= {"法务审核人"}, who
        assert all(lines == 1 for _text, lines in who), who
        headers = page.evaluate(LINES, "#blockers th, #findings th")
        assert all(lines == 1 for _text, lines in headers), headers
    finally:
        session.close()
