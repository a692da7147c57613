"""The packet's blocker table in the packet's language (issue 46): the Chinese packet listed each
reason's English message and fix ("the serving plan does not fit…"), and narrow columns wrapped
Chinese two or three characters a line. Read with `pdftotext -layout` as a reviewer would."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from governance.approvals.packet_render import PacketInput, render_packet
from tests.approvals.test_packet_content import _evidence, compiled  # noqa: F401

pytestmark = pytest.mark.skipif(shutil.which("pdftotext") is None, reason="needs poppler's pdftotext")

BLOCKERS: tuple[dict[str, str], ...] = (
    {
        "code": "license.blocker",
        "message": "llama-3.1: use.non_commercial (1): commercial use not permitted",
        "fix": "the requester changes the facts so the term no longer applies, or …",
        "role": "requester",
        "license": "llama-3.1",
    },
    {
        "code": "capacity.over_budget",
        "message": "the serving plan fits only on 16 GPUs (h200), more than its budget of 8",
        "fix": "the requester changes the serving plan …",
        "role": "requester",
    },
    {
        "code": "capacity.tight",
        "message": "Tight: a thin margin",
        "fix": "an engineering reviewer decides …",
        "role": "engineering",
    },
)


def _text(tmp_path: Path, language: str, mode: str = "-layout") -> str:
    evidence: dict[str, Any] = _evidence()
    evidence["obligations"][0]["status"] = "acknowledged"  # eight characters in Chinese
    data = PacketInput(
        deployment_code="c",
        evidence_digest="7e" * 32,
        evidence=evidence,
        eval_categories={},
        audit_checkpoint=None,
        signatures=[],
        organisation="Acme GmbH",
        blockers=BLOCKERS,
        language=language,
    )
    pdf = tmp_path / f"packet-{language}.pdf"
    pdf.write_bytes(render_packet(data))
    return subprocess.run(["pdftotext", mode, str(pdf), "-"], capture_output=True, text=True, check=True).stdout


def _section(text: str, heading: str, end: str) -> str:
    return text[text.index(heading) : text.index(end, text.index(heading))]


def test_the_chinese_packet_lists_the_blockers_in_chinese(tmp_path: Path, compiled: None) -> None:  # noqa: F811
    text = _text(tmp_path, "zh-hans")
    table = _section(text, "阻碍批准的事项", "已批准的服务配置范围")
    # in content order (-layout interleaves the lines of side-by-side cells)
    flat = re.sub(r"\s+", "", _section(_text(tmp_path, "zh-hans", "-raw"), "阻碍批准的事项", "已批准的服务配置范围"))
    assert "推理方案只能放入16块GPU(h200)，超出其8块的预算。" in flat  # noqa: RUF001
    assert "许可方的书面许可" in flat
    assert "第二位法务审核人确认" in flat
    for english in ("the serving plan", "changes the", "engineering reviewer", "decides"):
        assert english not in table, english
    # the short labels keep their line: who acts, and the header of its column
    for label in ("由谁处理", "申请人", "工程审核人", "需要做什么"):
        assert re.search(rf"(^|\s){label}(\s|$)", table, re.M), (label, table)
    obligations = _section(text, "履行方式", "容量规划")
    assert "已确认，等待法务" in obligations, obligations  # noqa: RUF001


def test_the_english_packet_names_the_licensors_permission_and_the_second_reviewer(tmp_path: Path) -> None:
    raw = _text(tmp_path, "en", "-raw")
    table = re.sub(r"\s+", " ", _section(raw, "What blocks approval", "Approved serving envelope"))
    assert "the serving plan fits only on 16 GPUs (h200), more than its budget of 8" in table
    assert "licensor's written permission" in table
    assert "second legal reviewer confirms it" in table
