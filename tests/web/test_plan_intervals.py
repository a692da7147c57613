"""The request page and the packet show how sure the capacity plan is (issue 47): each figure with its 80%
interval and what it stands on ("TPOT 9.9 ms, 80% interval 8.6 to 19.5 ms, from 41 held-out runs"), and the fit
verdict with its margin, in English and in Chinese."""

from __future__ import annotations

import copy
import re
from typing import Any

from django.core.cache import cache
from django.utils import translation

from governance.approvals.packet_render import PacketInput, render_html
from governance.capacity.selectors import plan_interval_rows, plan_verdict
from governance.deployments.models import DeploymentRequest
from governance.deployments.selectors import latest_capacity_plan
from tests.approvals.test_packet_content import _evidence, compiled  # noqa: F401
from tests.conftest import Personas
from tests.deployments.conftest import Flow
from tests.web.test_capacity_fragment import _capacity
from tests.web.test_pages import browser

GIB = 1 << 30
DASH = "\u2013"
INTERVALS = {
    "throughput.tpot_ms": {"low": 8.6, "high": 19.5, "coverage": 0.8, "n": 41, "basis": "41 held-out runs …"},
    "memory_per_gpu.kv_cache": {
        "low": 60 * GIB,
        "high": 61 * GIB,
        "coverage": 0.8,
        "n": 3,
        "basis": "3 of your startup logs on cluster gpu-a (vllm 0.11, h200): …",
    },
    "throughput.ttft_ms": {
        "low": 180.0,
        "high": 220.0,
        "coverage": 0.8,
        "n": 4,
        "basis": "4 of your canary measurements on cluster gpu-a (vllm 0.11, h200, one GPU per replica): …",
    },
}


def _result() -> dict[str, Any]:
    return {
        "throughput": {"tpot_ms": 9.9, "ttft_ms": 200.0},
        "memory_per_gpu": {"kv_cache": int(60.5 * GIB)},
        "intervals": INTERVALS,
        "verdict": "tight",
        "fit_margin": {"kv_bytes_per_gpu": int(0.25 * GIB), "sequences": 1},
        "notes": ["Tight: it fits at the central KV pool …"],
    }


def test_the_rows_state_each_figure_its_interval_and_its_basis() -> None:
    rows = {row.path: row for row in plan_interval_rows(_result())}
    tpot = rows["throughput.tpot_ms"]
    assert (tpot.figure_text, tpot.range_text, tpot.n, tpot.team) == ("9.9 ms", f"8.6{DASH}19.5 ms", 41, False)
    pool = rows["memory_per_gpu.kv_cache"]
    assert (pool.figure_text, pool.range_text, pool.team) == ("60.50 GiB", f"60.00{DASH}61.00 GiB", True)
    ttft = rows["throughput.ttft_ms"]
    assert (ttft.canary, ttft.team, ttft.n, tpot.canary, pool.canary) == (True, False, 4, False, False)
    verdict = plan_verdict(_result())
    assert verdict is not None
    assert (verdict.verdict, round(verdict.margin_gib, 2)) == ("tight", 0.25)
    assert plan_interval_rows({"throughput": {"tpot_ms": 9.9}}) == []  # a plan stored before intervals
    assert plan_verdict({}) is None


def test_the_request_page_shows_the_intervals_and_the_verdict(personas: Personas, flow: Flow, artifacts: Any) -> None:
    cache.clear()
    code = flow.to_review(artifacts["apache"])
    flow.compute_capacity(code)
    plan = latest_capacity_plan(DeploymentRequest.objects.get(code=code))
    assert plan is not None
    assert plan.result is not None
    client = browser(personas.legal)
    english = _capacity(client, code)
    tpot = plan.result["intervals"]["throughput.tpot_ms"]
    assert re.search(
        rf"TPOT {plan.result['throughput']['tpot_ms']:.1f} ms, 80% interval {tpot['low']:.1f}{DASH}{tpot['high']:.1f} "
        rf"ms, from {tpot['n']} held-out runs",
        english,
    ), english
    assert {"fits": "Verdict: fits", "tight": "Verdict: tight"}[plan.result["verdict"]] in english
    chinese = _capacity(client, code, "zh-hans")
    assert "计划的把握程度" in chinese
    assert f"依据 {tpot['n']} 次留出运行" in chinese
    assert "结论" in chinese
    assert f"from {tpot['n']} held-out runs" not in chinese


def test_the_packet_shows_the_intervals_and_the_verdict(compiled: None) -> None:  # noqa: F811
    evidence = _evidence()
    evidence["capacity_plan"]["result"] = {**copy.deepcopy(evidence["capacity_plan"]["result"]), **_result()}
    evidence["capacity_plan"]["result"]["throughput"] = {**_result()["throughput"], "decode_tokens_per_s": 100.0}

    def html(language: str) -> str:
        data = PacketInput(
            deployment_code="c",
            evidence_digest="7e" * 32,
            evidence=evidence,
            eval_categories={},
            audit_checkpoint=None,
            signatures=[],
            organisation="Acme GmbH",
            language=language,
        )
        with translation.override("en"):
            return render_html(data)

    english = html("en")
    assert f"TPOT 9.9 ms, 80% interval 8.6{DASH}19.5 ms, from 41 held-out runs" in english
    assert f"60.50 GiB, 80% interval 60.00{DASH}61.00 GiB, from 3 of your startup logs" in english
    assert f"TTFT 200.0 ms, 80% interval 180.0{DASH}220.0 ms, from 4 of your canary measurements" in english
    assert "tight: fits at the central figures only (0.25 GiB per GPU of margin)" in english
    chinese = html("zh-hans")
    assert "依据 41 次留出运行" in chinese
    assert "依据您的 3 份启动日志" in chinese
    assert "依据您的 4 次金丝雀实测" in chinese
    assert "偏紧" in chinese
