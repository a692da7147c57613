"""The packet's content for a legal reader: facts as labelled values, the whole serving envelope,
a summary page first, meaning texts with no placeholder. Pure formatting tests, then one render of
a packet with maximal realistic content checked with poppler's `pdftotext -layout`."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from governance.approvals.packet_content import fact_rows, format_money, summary

MAXIMAL_FACTS: dict[str, Any] = {
    "use_case": "external_commercial",
    "commercial_entity": True,
    "hosted_service": True,
    "production": True,
    "monthly_active_users": 812_000_000,
    "monthly_active_users_at_model_release": None,
    "monthly_revenue": {"amount": 25000000.0, "currency": "USD"},
    "org_country": "DE",
    "multimodal": False,
    "outputs_used_to_train_other_models": False,
    "derivative": {"kind": "quantize", "distribution": "public", "name": "Acme-Llama-3.1-70B-W4A8"},
    "redistributes_original_weights": False,
    "intended_uses": [],
    "guardrails_removed": False,
}

PYTHON_REPR = re.compile(r"\{'|'\}|\bTrue\b|\bFalse\b|\bNone\b|\[\]|\[signer\]|\{[a-z_]+(:[^}]*)?\}")


def test_facts_are_labelled_values_not_python_reprs() -> None:
    rows = dict(fact_rows(MAXIMAL_FACTS))
    assert rows["Use case"] == "External commercial"
    assert rows["Commercial entity"] == "yes"
    assert rows["Multimodal model"] == "no"
    assert rows["Monthly active users"] == "812,000,000"
    assert rows["Monthly active users on the model's release date"] == "not stated"
    assert rows["Monthly revenue"] == "USD 25,000,000.00"
    assert rows["Intended uses on an acceptable-use list"] == "none"
    assert rows["Derivative"] == "quantize, distributed publicly, named Acme-Llama-3.1-70B-W4A8"
    assert rows["Principal place of business"] == "DE"
    for label, value in rows.items():
        assert not PYTHON_REPR.search(value), (label, value)
        assert "_" not in label


def test_facts_left_out_read_not_stated() -> None:
    rows = dict(fact_rows({"use_case": "internal"}))
    assert rows["Monthly revenue"] == "not stated"
    assert rows["Commercial entity"] == "not stated"


def test_money_keeps_its_currency() -> None:
    assert format_money({"amount": 1500000, "currency": "EUR"}) == "EUR 1,500,000.00"
    assert format_money(None) == "not stated"


def _evidence() -> dict[str, Any]:
    digest = "sha256:" + "9f" * 32
    return {
        "request": {
            "code": "2c4b7f0e-3b7a-4c1e-9d55-1f3f8d9a0b11",
            "team": "platform",
            "product_name": "Acme Assistant",
            "environments": ["staging", "production"],
            "facts": MAXIMAL_FACTS,
            "target_cluster": "h200-west",
        },
        "artifact": {
            "name": "Llama-3.1-70B-Instruct",
            "source_repo": "meta-llama/Llama-3.1-70B-Instruct",
            "revision": "945c8663693130f8be2ee66210e062158b2a9693",
            "weights_digest": digest,
            "derivation": "quantize",
        },
        "licenses": [
            {
                "license": "llama-3.1",
                "version": "2024-07-23",
                "text_sha256": "ab" * 32,
                "decision": "licensor_approval_required",
                "findings": [
                    {
                        "code": "threshold.licensor_approval",
                        "severity": "approval",
                        "clause": "2",
                        "message": "More than 700 million monthly active users on the release date: a license "
                        "from Meta is required before use, which Meta may grant in its sole discretion. " * 3,
                        "params": {"metric": "monthly_active_users", "limit": 700000000, "value": 812000000},
                    },
                    {
                        "code": "attribution.display",
                        "severity": "obligation",
                        "clause": "1.b.i",
                        "message": 'Display "Built with Llama" on a related website, user interface, blogpost, '
                        "about page, or product documentation.",
                        "params": {"text": "Built with Llama"},
                    },
                ],
            }
        ],
        "waivers": [
            {
                "license": "llama-3.1",
                "code": "threshold.licensor_approval",
                "clause": "2",
                "severity": "approval",
                "expires_at": "2027-06-30T00:00:00Z",
                "reason": "Meta granted the license on 2026-10-02 (letter attached).",
                "granted_by": "Lena Legal",
                "confirmed_by": "Lars Lawyer",
                "permission": {"name": "meta-license-grant.pdf", "size": 183_204, "sha256": "cd" * 32},
            }
        ],
        "obligations": [
            {
                "license": "llama-3.1",
                "code": "attribution.display",
                "clause": "1.b.i",
                "status": "accepted",
                "how_met": "footer",
            }
        ],
        "capacity_plan": {
            "plan": "5d3c8a3e-8f3b-4c2a-9a4e-0c1b2d3e4f50",
            "status": "computed",
            "fits": True,
            "planner_version": "1",
            "result": {
                "model": "llama-3.1-70b",
                "precision": "w4a8",
                "parallel": {"tp": 4, "pp": 1, "ep": 1, "dp": 2, "gpus": 8, "nodes": 1},
                "fits": True,
                "max_concurrency": 212,
                "throughput": {"decode_tokens_per_s": 5321.4, "tpot_ms": 21.0, "ttft_ms": 310.0},
                "memory_per_gpu": {
                    "weights": 19_000_000_000,
                    "kv_cache": 90_000_000_000,
                    "activations": 2_000_000_000,
                    "overhead": 1_000_000_000,
                    "total": 112_000_000_000,
                    "capacity": 150_000_000_000,
                },
            },
        },
        "eval_results": [
            {
                "eval": "e1",
                "scheme": "w4a8",
                "status": "passed",
                "eval_set_sha256": "ef" * 32,
                "threshold": 0.1,
                "overall": {"n": 1200, "failures": 31, "upper_bound_95": 0.0351, "threshold": 0.1, "pass": True},
            }
        ],
        "serving_envelope": {"engine": "vllm", "precision": "w4a8", "gpu": "h200", "max_model_len": 131072},
    }


def test_the_summary_states_what_each_signer_signs_and_the_whole_envelope() -> None:
    found = summary(_evidence(), organisation="Acme GmbH")
    assert found["envelope"]["tp"] == 4
    assert found["license_decisions"] == [("llama-3.1 (2024-07-23)", "licensor approval required")]
    assert found["obligations"] == "1 obligation: 1 accepted by legal"
    assert found["loose_thresholds"] == [("w4a8", 0.1)]


def _render(tmp_path: Path, language: str = "en") -> Path:
    from django.utils import translation

    from governance.approvals.packet_render import PacketInput, render_packet
    from governance.approvals.selectors import meaning_templates

    evidence = _evidence()
    with translation.override(language):
        signatures = meaning_templates(organisation="Acme GmbH")
    data = PacketInput(
        deployment_code=evidence["request"]["code"],
        evidence_digest="7e" * 32,
        evidence=evidence,
        eval_categories={
            "e1": {
                name: {"n": 100, "failures": 3, "upper_bound_95": 0.081, "threshold": 0.1, "pass": True}
                for name in ("arithmetic", "code_generation", "long_context_retrieval", "multilingual_qa")
            }
        },
        audit_checkpoint={
            "origin": "governance",
            "seq": 4711,
            "head_hash": "12" * 32,
            "signed_at": "2026-12-01T10:00:00.000000Z",
            "key_id": "34" * 32,
        },
        signatures=signatures,
        organisation="Acme GmbH",
        language=language,
    )
    pdf = tmp_path / f"packet-{language}.pdf"
    pdf.write_bytes(render_packet(data))
    return pdf


def _text(pdf: Path, *mode: str) -> str:
    return subprocess.run(["pdftotext", *mode, str(pdf), "-"], capture_output=True, text=True, check=True).stdout


@pytest.mark.skipif(shutil.which("pdftotext") is None, reason="needs poppler's pdftotext")
def test_a_maximal_packet_reads_cleanly_in_pdftotext(tmp_path: Path) -> None:
    pdf = _render(tmp_path)
    text = _text(pdf, "-layout")
    pages = text.split("\f")
    assert "Summary" in pages[0]
    assert "Acme Assistant" in pages[0]
    assert "Who signs what" in pages[0]
    assert "licensor approval required" in pages[0]
    assert "USD 25,000,000.00" in text
    assert "812,000,000" in text
    for marker in ("tp 4", "pp 1", "ep 1"):
        assert marker in text, marker
    assert re.search(r"page 1 of \d+", text)
    assert "looser than the default" in text
    for label, pattern in (("python repr or placeholder", PYTHON_REPR),):
        match = pattern.search(text)
        assert match is None, f"{label}: {text[max(match.start() - 80, 0) : match.end() + 80]!r}"
    # nothing clipped: every digest and the longest finding survive whole (wrapped, not cut); read in
    # content order, as -layout interleaves the lines of side-by-side cells
    flat = re.sub(r"\s+", "", _text(pdf, "-raw"))
    for digest in ("9f" * 32, "ab" * 32, "cd" * 32, "ef" * 32, "7e" * 32, "12" * 32):
        assert digest in flat, digest
    assert "whichMetamaygrantinitssolediscretion." in flat
    # no column squeezed to one character a line: a reason keeps its words together
    assert "Meta granted" in text
    width = max(len(line) for line in text.splitlines())
    assert width < 200, width  # no table running off the page into one endless line


@pytest.mark.skipif(shutil.which("pdftotext") is None, reason="needs poppler's pdftotext")
def test_no_code_is_printed_where_words_belong(tmp_path: Path) -> None:
    text = _text(_render(tmp_path), "-layout")
    assert "licensor_approval_required" not in text
    assert "licensorapprovalrequired" not in text
    assert text.count("licensor approval required") >= 2  # the summary and the licenses table


# Chinese words the zh packet must carry, one per part of it (summary, facts, licenses, findings,
# waivers, capacity, evals, envelope, checkpoint, signatures, the page counter)
ZH_WORDS = (
    "部署审批文件",
    "摘要",
    "签署人及签署内容",
    "需要许可方批准",
    "月活跃用户数",
    "公开分发",
    "严重程度",
    "豁免至 2027年6月30日",
    "能否容纳",
    "评测结果",
    "已批准的服务配置范围",
    "张量并行（tp）",  # noqa: RUF001 (Chinese punctuation is what is checked)
    "审计链检查点",
    "2026年12月1日 10:00 UTC",
    "从法律角度批准本次部署",
    "第 1 页，共",  # noqa: RUF001
)


@pytest.fixture(scope="module")
def compiled() -> None:
    from tests.conftest import compile_messages

    compile_messages()


@pytest.mark.skipif(shutil.which("pdftotext") is None, reason="needs poppler's pdftotext and pdffonts")
@pytest.mark.parametrize("language", ["en", "zh-hans"])
def test_the_packet_is_pdfa_3b_with_every_font_embedded(tmp_path: Path, compiled: None, language: str) -> None:
    from tests.approvals.pdfa import pdfa_3b_problems

    pdf = _render(tmp_path, language)
    assert pdfa_3b_problems(pdf) == []
    fonts = subprocess.run(["pdffonts", str(pdf)], capture_output=True, text=True, check=True).stdout
    if language == "zh-hans":
        assert "NotoSansCJK" in fonts.replace("-", ""), fonts  # the CJK face from fonts-noto-cjk, subset
        # the Simplified Chinese face throughout: the chart's labels once fell back to the Japanese one
        assert "CJK-JP" not in fonts, fonts


@pytest.mark.skipif(shutil.which("pdftotext") is None, reason="needs poppler's pdftotext")
def test_a_zh_request_gets_a_chinese_packet_whatever_language_renders_it(tmp_path: Path, compiled: None) -> None:
    from django.utils import translation

    # rendered while English is active (a reviewer's UI, the worker's default): still Chinese
    with translation.override("en"):
        pdf = _render(tmp_path, "zh-hans")
    text = _text(pdf, "-layout")
    flat = re.sub(r"\s+", "", _text(pdf, "-raw"))
    for words in ZH_WORDS:
        assert re.sub(r"\s+", "", words) in flat, words
    assert re.search(r"第 1 页，共 \d+ 页", text), text[:400]  # noqa: RUF001
    # nothing left in English but data (names, codes, license text quoted from the catalog)
    for english in ("Summary", "Who signs what", "not stated", "licensor approval required", "page 1 of", "Warning"):
        assert english not in text, english
    match = PYTHON_REPR.search(text)
    assert match is None, text[max(match.start() - 80, 0) : match.end() + 80]
    for digest in ("9f" * 32, "ab" * 32, "cd" * 32, "ef" * 32, "7e" * 32, "12" * 32):
        assert digest in flat, digest
    assert "whichMetamaygrantinitssolediscretion." in flat  # the finding text, whole
    # Chinese never set one character a line: no line of the layout holds a lone CJK character
    # with nothing else (a column squeezed to one glyph's width would)
    lone = [line for line in text.splitlines() if re.fullmatch(r"\s*[\u4e00-\u9fff]\s*", line)]
    assert not lone, lone


def test_the_packet_language_is_the_request_language_not_the_ui_language(tmp_path: Path, compiled: None) -> None:
    from django.utils import translation

    from governance.approvals.packet_render import PacketInput, render_html

    evidence = _evidence()
    data = PacketInput(
        deployment_code="c",
        evidence_digest="7e" * 32,
        evidence=evidence,
        eval_categories={},
        audit_checkpoint=None,
        signatures=[],
        organisation='Acme "GmbH" </style><script>',
    )
    with translation.override("zh-hans"):
        html = render_html(data)
    assert '<html lang="en">' in html
    assert "Deployment approval packet" in html
    assert "部署审批文件" not in html
    # the organisation's name reaches the page header's CSS string escaped, never ending it
    style = html.split("<style>", 1)[1].split("</style>", 1)[0]
    assert html.count("</style") == 1
    assert "<script>" not in html
    assert '"GmbH"' not in style
