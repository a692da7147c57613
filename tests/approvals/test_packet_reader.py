"""The packet says everything the reviewers relied on, as a lawyer reads it (issue 46): memory in
GiB when the bytes are GiB ("71.1 GB" stood for 71.3 GiB), "1 GPU" (not "1 GPUs"), the cluster of
the eval that backs it (not "not stated"), the artifact's name (not the planner's "custom"), enums
in the packet's language ("派生方式 quantize"), license keys that never break across lines, and each
reviewer's comment inside the signature it belongs to."""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from django.utils import translation

from governance.approvals.packet_render import PacketInput, render_html, render_packet
from tests.approvals.test_packet_content import _evidence, compiled  # noqa: F401

GIB = 1024**3


def _small_evidence() -> dict[str, Any]:
    evidence = _evidence()
    evidence["request"].pop("target_cluster")
    result = evidence["capacity_plan"]["result"]
    result["model"] = "custom"
    result["parallel"] = {"tp": 1, "pp": 1, "ep": 1, "dp": 1, "gpus": 1, "nodes": 1}
    result["memory_per_gpu"]["weights"] = int(71.3 * GIB)
    evidence["licenses"][0]["license"] = "apache-2.0"
    return evidence


def _data(language: str = "en") -> PacketInput:
    return PacketInput(
        deployment_code="c",
        evidence_digest="7e" * 32,
        evidence=_small_evidence(),
        eval_categories={},
        eval_clusters={"e1": "h200-west"},
        audit_checkpoint=None,
        signatures=[],
        organisation="Acme GmbH",
        language=language,
    )


def _row(html: str, label: str) -> str:
    found = re.search(rf"<th>{re.escape(label)}</th><td[^>]*>(.*?)</td>", html, re.S)
    assert found, label
    return found.group(1)


def test_memory_is_in_gib_and_counts_agree_with_their_nouns() -> None:
    html = render_html(_data())
    assert re.search(r"weights 71\.3\sGiB", html)
    assert not re.search(r"\d GB\b", html)
    assert "1 GPU" in html
    assert "1 GPUs" not in html
    assert "node(s)" not in html


def test_the_eval_cluster_and_the_artifact_name_are_stated() -> None:
    html = render_html(_data())
    assert "h200-west" in _row(html, "Target cluster")
    model = _row(html, "Model / precision")
    assert "Llama-3.1-70B-Instruct" in model
    assert "custom" not in model


def test_enums_are_translated_in_the_chinese_packet(compiled: None) -> None:  # noqa: F811
    with translation.override("en"):
        html = render_html(_data("zh-hans"))
    derivation = _row(html, "派生方式")
    assert "量化" in derivation
    assert "quantize" not in derivation


def test_license_keys_are_kept_whole() -> None:
    html = render_html(_data())
    assert '<td class="key">apache-2.0</td>' in html
    style = html.split("<style>", 1)[1].split("</style>", 1)[0]
    assert re.search(r"\.key\s*\{[^}]*white-space:\s*nowrap", style)


@pytest.mark.skipif(shutil.which("pdftotext") is None, reason="needs poppler's pdftotext")
@pytest.mark.parametrize("language", ["en", "zh-hans"])
def test_the_pdf_never_breaks_a_license_key(tmp_path: Path, compiled: None, language: str) -> None:  # noqa: F811
    pdf = tmp_path / "packet.pdf"
    pdf.write_bytes(render_packet(_data(language)))
    text = subprocess.run(["pdftotext", "-layout", str(pdf), "-"], capture_output=True, text=True, check=True).stdout
    assert not re.search(r"apache-2\.\s*$", text, re.M), "a license key broken across lines"
    assert not re.search(r"apache-\s*$", text, re.M), "a license key broken across lines"
    assert re.search(r"71\.3\s+GiB", text)
    assert not re.search(r"\d GB\b", text)
    if language == "en":  # a header word broken inside its narrow column ("Claus" over "e")
        assert not re.search(r"\bClaus\b", text), "a column header broken inside a word"


@pytest.mark.django_db
def test_the_packet_input_names_each_evals_cluster(sign_flow: Any, artifacts: dict[str, Any]) -> None:
    from governance.approvals.services.packet_queue import packet_input
    from governance.deployments.models import DeploymentRequest

    code = sign_flow.ready(artifacts["apache"])  # fp8 with a passed eval on the "local" cluster
    data = packet_input(DeploymentRequest.objects.get(code=code))
    assert set(data.eval_clusters.values()) == {"local"}
    assert "local" in _row(render_html(data), "Target cluster") or data.evidence["request"].get("target_cluster")


@pytest.mark.django_db
def test_each_reviewers_comment_is_inside_their_signature(sign_flow: Any, artifacts: dict[str, Any]) -> None:
    import io

    from pyhanko.pdf_utils.reader import PdfFileReader

    from governance.approvals.models import ApprovalPacket
    from tests.approvals.conftest import run_packet_jobs

    code = sign_flow.ready(artifacts["apache"])
    comments = {"legal": "Apache-2.0 NOTICE shipped in the image.", "engineering": "fp8 eval reviewed: 0.4% worse."}
    for user, role in ((sign_flow.p.legal, "legal"), (sign_flow.p.engineer, "engineering")):
        assert sign_flow.sign(user, code, role, comment=comments[role]).status_code == 202
    run_packet_jobs(code, brief=True)
    packet = ApprovalPacket.objects.get(deployment__code=code, voided_at__isnull=True)
    reasons = [
        str(sig.sig_object.get("/Reason", ""))
        for sig in PdfFileReader(io.BytesIO(bytes(packet.pdf))).embedded_signatures
    ]
    assert len(reasons) == 2
    for comment in comments.values():
        assert any(comment in reason for reason in reasons), (comment, reasons)


@pytest.mark.skipif(shutil.which("pdftotext") is None, reason="needs poppler's pdftotext")
@pytest.mark.parametrize("language", ["en", "zh-hans"])
def test_finding_codes_break_only_between_their_words(tmp_path: Path, compiled: None, language: str) -> None:  # noqa: F811
    from tests.approvals.test_packet_content import _render

    text = subprocess.run(
        ["pdftotext", "-layout", str(_render(tmp_path, language)), "-"], capture_output=True, text=True, check=True
    ).stdout
    # "attribution.displa" over "y", "threshold.li" over "censor_appro" over "val": each word of a
    # code stays whole wherever the code itself is cut (after a '.' or a '_')
    assert text.count("threshold.") >= 2
    assert text.count("licensor_") >= text.count("threshold."), text
    assert text.count("display") >= text.count("attribution."), text


def test_who_acts_on_a_blocker_is_in_the_packets_language(compiled: None) -> None:  # noqa: F811

    blocker = {"code": "eval.missing", "message": "no fp8 eval", "fix": "engineering runs it", "role": "engineering"}
    data = replace(_data("zh-hans"), blockers=(blocker,))
    row = re.search(r"<code>eval\.missing</code>.*?</tr>", render_html(data), re.S)
    assert row
    assert "<td>engineering</td>" not in row.group(0)
    assert "工程" in row.group(0)


def test_the_memory_chart_draws_one_replica_and_says_so(compiled: None) -> None:  # noqa: F811
    """tp 4 x dp 2 is two identical replicas of 4 GPUs: four bars, captioned as one replica of 8 GPUs."""
    data = replace(_data(), evidence=_evidence())
    html = render_html(data)
    assert "Memory of each GPU of one replica of 4 GPUs, of 8 GPUs in 2 identical replicas" in html
    assert ">GPU 3<" in html
    assert ">GPU 4<" not in html
    with translation.override("en"):
        chinese = render_html(replace(data, language="zh-hans"))
    assert "副本" in chinese
