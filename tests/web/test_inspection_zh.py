"""What the inspection found and a fact left out, read in Chinese: a reviewer in zh-hans read the stored codes of the
checkpoint section raw ("读取自 inspection", "在 local 上读取的文件\uff1apassed", file kinds `license`,
`weights`, a match "(catalog)", the derivation "(quantize)"), found trying the first run as a new user.
The pages name each code in the reader's language; the API keeps the codes."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from django.test import Client

from governance.approvals.models import Authority
from governance.artifacts.models import Derivation
from tests.conftest import Personas
from tests.deployments.conftest import FACTS, SERVING, Flow
from tests.deployments.test_inspection import (  # the inspection's own fixtures, run as that module runs them
    W4A16,
    _checkpoint,
    _locate_and_inspect,
    _register,
    models,  # noqa: F401  (shared fixture)
)

pytestmark = pytest.mark.django_db

CELL = re.compile(r"<td>([^<]*)</td>")


def test_the_checkpoint_section_and_the_artifact_page_name_the_codes_in_chinese(
    flow: Flow,
    personas: Personas,
    models: Path,  # noqa: F811
    django_capture_on_commit_callbacks: Any,
    org_pki: Authority,
) -> None:
    parent_dir = _checkpoint(models, "tiny-parent")
    parent = _register(personas, parent_dir, "apache-2.0")
    directory = _checkpoint(models, "tiny-w4a16", source=W4A16)
    artifact = _register(personas, directory, "apache-2.0", derivation=Derivation.QUANTIZE, parent=parent)
    inspection = _locate_and_inspect(personas, artifact, directory, django_capture_on_commit_callbacks)
    assert inspection.status == "passed", inspection.reason
    code = flow.create(artifact, serving_plan={**SERVING, "precision": "w4a16"})["code"]
    answer = flow.post(flow.p.requester, code, "submit")
    assert answer.status_code == 200, answer.json()
    client = Client()
    client.force_login(personas.legal)

    request_page = client.get(f"/requests/{code}/", HTTP_ACCEPT_LANGUAGE="zh-hans").content.decode()
    section = request_page[request_page.index('id="checkpoint"') :]
    section = section[: section.index("</section>")]
    colon = "\uff1a"  # the Chinese full-width colon the translation of "Files read on …:" ends with
    for shown in ("(读取自 在集群上读取的文件)", f"{colon}通过", "<td>许可证</td>", "(目录中的标准文本)", "<dd>量化"):
        assert shown in section, (shown, section)
    for raw in ("读取自 inspection", f"{colon}passed", "<td>license</td>", "(catalog)", "<dd>quantize"):
        assert raw not in section, (raw, section)

    artifact_page = client.get(f"/artifacts/{artifact.code}/", HTTP_ACCEPT_LANGUAGE="zh-hans").content.decode()
    cells = set(CELL.findall(artifact_page))
    assert {"权重", "配置", "分词器", "许可证"} <= cells, cells
    assert not {"weights", "config", "tokenizer", "license", "model_card"} & cells
    assert " · 通过" in artifact_page  # the readings list
    assert "(量化)" in artifact_page
    for raw in ("(quantize)", "(catalog)", "读取自 inspection"):
        assert raw not in artifact_page, raw

    # the API keeps the stored codes: its contract
    body = personas.client(personas.requester).get(f"/api/v1/artifacts/{artifact.code}/inspections").json()
    assert body["weights"]["source"] == "inspection"
    assert body["results"][0]["license_files"][0]["kind"] == "license"


def test_a_fact_left_out_reads_in_chinese_on_the_request_page_and_in_the_wizard_preview(
    flow: Flow, artifacts: dict[str, Any]
) -> None:
    """The engine's `facts.assumed` finding ("monthly_revenue was not given; assumed the most
    conservative value: …", "Provide facts.monthly_revenue for a precise evaluation.") is worded by
    its field on the pages, as the blockers are; the API keeps the engine's English message."""
    facts = {key: value for key, value in FACTS.items() if key != "monthly_revenue"}
    code = flow.create(artifacts["apache"], facts=facts)["code"]
    client = Client()
    client.force_login(flow.p.requester)
    page = client.get(f"/requests/{code}/", HTTP_ACCEPT_LANGUAGE="zh-hans").content.decode()
    row = page[page.index('data-code="facts.assumed"') :]
    row = row[: row.index("</tr>")]
    assert "monthly_revenue" in row
    assert "未提供" in row, row
    assert "facts.monthly_revenue" in row
    for english in ("was not given", "most conservative", "not stated", "for a precise evaluation"):
        assert english not in row, (english, row)

    preview = client.post(
        "/requests/new/preview",
        {"artifact": str(artifacts["apache"].code), "use_case": "internal", "monthly_active_users": "500"},
        HTTP_ACCEPT_LANGUAGE="zh-hans",
    ).content.decode()
    assumed = re.findall(r'data-code="facts.assumed">(.*?)</li>', preview, re.S)
    assert assumed, preview
    for item in assumed:
        assert "未提供" in item, item
        assert "was not given" not in item, item
        assert "for a precise evaluation" not in item, item
        assert "条款  ·" not in item, item  # no clause: no empty "Clause" label before the confidence

    english = flow.client(flow.p.requester).get(f"/api/v1/deployments/{code}").json()
    [finding] = [f for f in english["licenses"][0]["findings"] if f["code"] == "facts.assumed"]
    assert finding["message"].startswith("monthly_revenue was not given")
