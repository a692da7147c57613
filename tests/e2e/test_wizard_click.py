"""The wizard's first click on "Create the request" right after typing (issue 46: it was lost three
times in a row). Pressing the button takes the focus from the field just typed in: `change` fired
and the license preview was posted and swapped in while the button was still held down, so the
page could move under the pointer between the press and the release (no click). The preview now
waits a moment after a change: nothing is swapped in during a press, and the press submits."""

from __future__ import annotations

from typing import Any

import pytest

from governance.deployments.models import DeploymentRequest
from tests.conftest import Personas
from tests.e2e.conftest import wait_for
from tests.e2e.test_review_flow import Session

pytestmark = [pytest.mark.e2e]

# every preview request the page sends, counted in the page (evaluated over DevTools: the CSP's
# script-src 'self' does not govern it)
COUNT_PREVIEWS = """() => { window.previews = 0;
  document.body.addEventListener('htmx:beforeSend', () => { window.previews += 1; }); }"""


def test_the_first_click_on_create_after_typing_creates_the_request(
    browser: Any, live_server: Any, personas: Personas, catalog: Any, artifacts: Any
) -> None:
    session = Session(browser, live_server.url, "en")
    try:
        page = session.login("req")
        page.goto("/requests/new")
        page.select_option("#id_artifact", str(artifacts["llama"].code))
        page.select_option("#id_use_case", "external_commercial")
        page.fill("#id_monthly_active_users", "800000000")
        wait_for(page, "#preview .preview-result")
        page.evaluate(COUNT_PREVIEWS)
        # as a person does: types the product's name, then goes straight to the button
        page.click("#id_product_name")
        page.keyboard.type("First Click Assistant", delay=10)
        page.wait_for_timeout(800)  # the preview of what was typed has come and gone
        typed = page.evaluate("window.previews")
        page.evaluate("document.querySelector('button[name=create]').scrollIntoView({block: 'center'})")
        box = page.locator("button[name=create]").bounding_box()
        assert box is not None
        page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
        page.mouse.down()  # the field loses the focus: `change`
        page.wait_for_timeout(200)  # a hand's press
        during_press = page.evaluate("window.previews") - typed
        page.mouse.up()
        assert during_press == 0, "the preview was posted and swapped in while the button was held down"
        page.wait_for_url("**/requests/*/", timeout=10_000)
        assert DeploymentRequest.objects.filter(product_name="First Click Assistant").exists()
    finally:
        session.close()
