"""The approval packet's language is the request's: chosen when the request is filed (the API's
`language`, else the language the requester is using), fixed afterwards, and the one a reviewer's
packet is rendered in whatever the reviewer's own UI language."""

from __future__ import annotations

from django.utils import translation

from governance.approvals.services.packet_queue import packet_input
from governance.deployments.models import DeploymentRequest
from governance.deployments.services.lifecycle import request_language
from tests.deployments.conftest import FACTS, SERVING, Flow


def test_the_api_takes_the_language_or_the_callers_accept_language(flow: Flow, artifacts: dict) -> None:
    chosen = flow.create(artifacts["apache"], language="zh-hans")
    assert chosen["language"] == "zh-hans"
    body = {
        "artifact": str(artifacts["apache"].code),
        "product_name": "中文客服助手",
        "facts": FACTS,
        "serving_plan": SERVING,
    }
    client = flow.client(flow.p.requester)
    response = client.post("/api/v1/deployments/", body, format="json", HTTP_ACCEPT_LANGUAGE="zh-CN,zh;q=0.9")
    assert response.status_code == 201, response.json()
    assert response.json()["language"] == "zh-hans"
    response = client.post("/api/v1/deployments/", body, format="json", HTTP_ACCEPT_LANGUAGE="fr")
    assert response.json()["language"] == "en"  # not a packet language: the default


def test_an_unknown_language_is_refused_naming_the_field(flow: Flow, artifacts: dict) -> None:
    body = {"artifact": str(artifacts["apache"].code), "product_name": "x", "facts": FACTS, "serving_plan": SERVING}
    response = flow.client(flow.p.requester).post("/api/v1/deployments/", {**body, "language": "xx"}, format="json")
    assert response.status_code == 400
    assert "language" in response.json()["extra"]["fields"], response.json()


def test_the_language_is_fixed_once_filed(flow: Flow, artifacts: dict) -> None:
    code = flow.create(artifacts["apache"], language="zh-hans")["code"]
    response = flow.client(flow.p.requester).patch(f"/api/v1/deployments/{code}", {"language": "en"}, format="json")
    assert response.status_code == 400
    assert "language" in response.json()["extra"]["fields"], response.json()
    assert DeploymentRequest.objects.get().language == "zh-hans"


def test_left_out_the_language_is_the_one_the_requester_is_using(flow: Flow, artifacts: dict) -> None:
    code = flow.create(artifacts["apache"])["code"]  # the API client sends no Accept-Language
    assert DeploymentRequest.objects.get(code=code).language == "en"
    # the UI's switcher sets the session's language; LocaleMiddleware activates it for the wizard
    with translation.override("zh-hans"):
        assert request_language(None) == "zh-hans"
        assert request_language("en") == "en"
    with translation.override("en-gb"):
        assert request_language(None) == "en"


def test_a_reviewer_with_an_english_ui_renders_a_zh_request_in_chinese(flow: Flow, artifacts: dict) -> None:
    code = flow.create(artifacts["apache"], language="zh-hans")["code"]
    deployment = DeploymentRequest.objects.get(code=code)
    with translation.override("en"):
        data = packet_input(deployment)
    assert data.language == "zh-hans"
    assert "从法律角度批准本次部署" in data.signatures[0]["approve"]
