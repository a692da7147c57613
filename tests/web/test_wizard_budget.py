"""The GPU budget through the API, the wizard's preview and the request page (issue 46): a plan that
fits only on 16 H200s against a budget of 8 says "does not fit your budget" wherever it is shown."""

from __future__ import annotations

from typing import Any

from django.test import Client

from governance.deployments.models import DeploymentRequest
from tests.conftest import Personas
from tests.deployments.conftest import SERVING, Flow
from tests.web.test_wizard_teams import FORM

TIMES = "\N{MULTIPLICATION SIGN}"


def _client(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_the_api_stores_the_budget_and_refuses_a_fixed_layout_above_it(
    personas: Personas, flow: Flow, artifacts: Any
) -> None:
    made = flow.create(artifacts["kimi"], serving_plan={**SERVING, "max_gpus": 8})
    assert made["serving_plan"]["max_gpus"] == 8
    body = {
        "artifact": str(artifacts["kimi"].code),
        "product_name": "Acme Assistant",
        "facts": {"use_case": "internal"},
        "serving_plan": {**SERVING, "tp": 8, "pp": 2, "max_gpus": 8},
    }
    refused = flow.client(personas.requester).post("/api/v1/deployments/", body, format="json")
    assert refused.status_code == 400
    assert "max_gpus" in str(refused.json()), refused.json()


def test_the_request_page_says_it_does_not_fit_the_budget(personas: Personas, flow: Flow, artifacts: Any) -> None:
    code = flow.create(artifacts["kimi"], serving_plan={**SERVING, "max_gpus": 8})["code"]
    assert flow.post(personas.requester, code, "submit").status_code == 200
    flow.compute_capacity(code)
    blockers = {b["code"]: b for b in flow.get(personas.requester, code)["blockers"]}
    assert "capacity.over_budget" in blockers, sorted(blockers)
    assert "16 GPUs" in blockers["capacity.over_budget"]["message"]
    page = _client(personas.requester).get(f"/requests/{code}/").content.decode()
    capacity = page[page.index('<section id="capacity"') :]
    assert f"does not fit your budget of 8 {TIMES} h200" in capacity
    assert "The serving plan fits." not in capacity
    chinese = _client(personas.requester).get(f"/requests/{code}/", HTTP_ACCEPT_LANGUAGE="zh-hans").content.decode()
    assert "预算" in chinese[chinese.index('<section id="capacity"') :]


def test_within_the_budget_the_page_says_so(personas: Personas, flow: Flow, artifacts: Any) -> None:
    code = flow.create(artifacts["kimi"], serving_plan={**SERVING, "max_gpus": 16})["code"]
    assert flow.post(personas.requester, code, "submit").status_code == 200
    flow.compute_capacity(code)
    evidence = DeploymentRequest.objects.get(code=code).evidence
    assert evidence is not None
    assert evidence["serving_envelope"]["max_gpus"] == 16
    blockers = {b["code"] for b in flow.get(personas.requester, code)["blockers"]}
    assert "capacity.over_budget" not in blockers
    page = _client(personas.requester).get(f"/requests/{code}/").content.decode()
    assert f"Within your budget of 16 {TIMES} h200" in page


def test_the_wizard_preview_says_it_does_not_fit_the_budget(personas: Personas, artifacts: Any) -> None:
    form = {**FORM, "artifact": str(artifacts["kimi"].code), "max_gpus": "8"}
    form.pop("create")
    preview = _client(personas.requester).post("/requests/new/preview", form).content.decode()
    assert f"does not fit your budget of 8 {TIMES} h200" in preview
    assert "It takes 16 GPUs" in preview
    roomy = _client(personas.requester).post("/requests/new/preview", {**form, "max_gpus": "16"}).content.decode()
    assert "The serving plan fits." in roomy
    assert f"Within your budget of 16 {TIMES} h200" in roomy
    # the no-JavaScript preview shows the same
    page = _client(personas.requester).post("/requests/new", {**form, "preview": "1"}).content.decode()
    assert f"does not fit your budget of 8 {TIMES} h200" in page
