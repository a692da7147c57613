"""The request page's capacity section is cached per plan, computation and language: the same HTML
again, the other language's HTML in that language, and a newly computed plan's content at once."""

from __future__ import annotations

from typing import Any

from django.core.cache import cache
from django.utils import timezone

from governance.capacity.models import CapacityPlan
from governance.deployments.models import DeploymentRequest
from governance.deployments.selectors import latest_capacity_plan
from tests.conftest import Personas
from tests.deployments.conftest import Flow
from tests.web.test_pages import browser


def _capacity(client: Any, code: str, language: str = "en") -> str:
    html = client.get(f"/requests/{code}/", HTTP_ACCEPT_LANGUAGE=language).content.decode()
    start = html.index('<section id="capacity"')
    return html[start : html.index("</section>", start)]


def test_the_capacity_section_is_cached_per_plan_and_language(personas: Personas, flow: Flow, artifacts: Any) -> None:
    cache.clear()
    code = flow.to_review(artifacts["kimi"])
    client = browser(personas.legal)
    assert "Computing the capacity plan" in _capacity(client, code)  # pending: not cached
    flow.compute_capacity(code)
    plan = latest_capacity_plan(DeploymentRequest.objects.get(code=code))
    assert plan is not None
    assert plan.status == "done"
    first = _capacity(client, code)
    assert "Why this layout" in first
    assert _capacity(client, code) == first
    chinese = _capacity(client, code, "zh-hans")
    assert "Why this layout" not in chinese
    assert chinese != first
    # the cached section is served (a done plan's result never changes in place)...
    assert plan.result is not None
    result = {**plan.result, "notes": ["a note written by the new computation"]}
    CapacityPlan.objects.filter(pk=plan.pk).update(result=result)
    assert _capacity(client, code) == first
    # ...and a plan computed again (capacity_plan_finish sets computed_at) shows its content at once
    CapacityPlan.objects.filter(pk=plan.pk).update(computed_at=timezone.now())
    assert "a note written by the new computation" in _capacity(client, code)
