"""The request list pages through the requests the user may see (50 a page), counted without the
joins its rows make for their names, with and without a status filter."""

from __future__ import annotations

from typing import Any

from governance.deployments.models import DeploymentRequest
from tests.conftest import Personas
from tests.deployments.conftest import Flow
from tests.web.test_pages import browser
from tests.web.test_query_counts import _grow


def test_the_list_counts_and_pages_the_visible_requests(personas: Personas, flow: Flow, artifacts: Any) -> None:
    first = DeploymentRequest.objects.get(code=flow.to_review(artifacts["kimi"]))
    _grow(personas, first, 120)
    client = browser(personas.requester)
    assert "Page 1 of 3" in client.get("/requests/").content.decode()
    for status in ("draft", "approved", "in_review"):
        total = DeploymentRequest.objects.filter(status=status).count()
        pages = -(-total // 50)
        html = client.get(f"/requests/?status={status}").content.decode()
        assert (f"Page 1 of {pages}" in html) == (pages > 1), status
        last = client.get(f"/requests/?status={status}&page={pages}").content.decode()
        assert last.count('<tr><td><a href="/requests/') == total - 50 * (pages - 1), status
