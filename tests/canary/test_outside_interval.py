"""A canary's or the fleet's latency measured outside the capacity plan's 80% interval is flagged to engineering
(issue 47): an audit event `canary.outside_interval`, a message to the engineering reviewers, and a finding on the
request page in English and Chinese; the fleet's only when the figures outside change, not at every re-check.
Each row keeps its ratio to the catalog's figure, so a plan the team's measurements corrected calibrates the next
ones from the catalog's figure, not from its own."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.core import mail

from governance.audit.models import AuditEvent
from governance.canary.models import CanaryAnalysis, CanaryStatus, FleetCheck, PlanMeasurement
from governance.canary.plan_fit import latency_figure, outside_interval, plan_vs_measured
from governance.canary.prometheus import PromClient
from governance.canary.risk import envelope_digest, serving_envelope
from governance.canary.services import fleet_check_one
from governance.evaluations.models import EvalRun
from tests.canary.conftest import Rollout
from tests.canary.fakes import FakeEngine, FakePrometheus
from tests.canary.test_analysis import analyse, engine_like_approved, metrics, reference  # noqa: F401 (fixtures)
from tests.canary.test_plan_fit import page
from tests.conftest import Personas

OUTSIDE_INTERVAL = 816  # AuditAction.CANARY_OUTSIDE_INTERVAL


def test_a_latency_either_side_of_the_interval_is_outside_and_inside_is_not() -> None:
    above = latency_figure("tpot_ms", 20.0, (18.0, 24.0), [0.03], None, 0.25)
    below = latency_figure("tpot_ms", 20.0, (18.0, 24.0), [0.01], None, 0.25)
    inside = latency_figure("tpot_ms", 20.0, (18.0, 24.0), [0.021], None, 0.25)
    assert [f.position for f in outside_interval([above, below, inside])] == ["above", "below"]
    assert below.verdict == "as_planned"  # faster than planned is no failure, yet the plan is off: flagged


def test_the_ratio_to_the_catalog_undoes_the_plan_s_own_correction() -> None:
    plan = {
        "throughput": {"tpot_ms": 23.0, "ttft_ms": 200.0},  # the catalog's 20 ms x 1.15, from earlier measurements
        "throughput_estimate": {"team_correction": {"tpot_ms": 1.15}},
    }
    by = {
        f.figure: f
        for f in plan_vs_measured(
            plan, {"inter_token_latency_seconds": [0.023], "ttft_seconds": [0.2]}, {}, tolerance=0.25, kv_saturated=0.95
        )
    }
    assert by["tpot_ms"].ratio == pytest.approx(1.0)
    assert by["tpot_ms"].catalog_ratio == pytest.approx(1.15)
    assert by["ttft_ms"].catalog_ratio == pytest.approx(1.0)


def _engineers(personas: Personas) -> None:
    personas.engineer.email = "engineering@example.com"
    personas.engineer.save()


def _tpot_above_factor(rollout: Rollout) -> float:
    """The canary factor on test_analysis.metrics' TPOT base (half the plan's) that puts it half again above the
    plan's interval."""
    result = rollout.evidence["capacity_plan"]["result"]
    return float(result["intervals"]["throughput.tpot_ms"]["high"] * 1.5 / (result["throughput"]["tpot_ms"] * 0.5))


@pytest.mark.django_db
def test_a_canary_outside_the_plan_s_interval_is_flagged_to_engineering(
    rollout: Rollout,
    personas: Personas,
    reference: EvalRun,  # noqa: F811
    engine_like_approved: FakeEngine,  # noqa: F811
    django_capture_on_commit_callbacks: Any,
) -> None:
    _engineers(personas)
    # TTFT as planned (inside), TPOT far above the plan's interval
    series = metrics(rollout, {"time_to_first_token": 2.0, "inter_token_latency": _tpot_above_factor(rollout)})
    with django_capture_on_commit_callbacks(execute=True):
        analysis = analyse(rollout, personas, engine_like_approved, series, cluster="gpu-east")

    rows = {row.figure: row for row in PlanMeasurement.objects.filter(analysis=analysis)}
    assert (rows["tpot_ms"].position, rows["ttft_ms"].position) == ("above", "inside")
    assert rows["tpot_ms"].catalog_ratio == pytest.approx(rows["tpot_ms"].ratio)  # the plan took no correction
    event = AuditEvent.objects.get(action=OUTSIDE_INTERVAL)
    assert event.actor_name == "system:canary"
    assert (event.data["source"], event.data["cluster"]) == ("canary", "gpu-east")
    assert set(event.data["figures"]) == {"tpot_ms"}
    assert event.data["figures"]["tpot_ms"]["position"] == "above"
    [message] = [m for m in mail.outbox if "outside its capacity plan's interval" in m.subject]
    assert message.to == ["engineering@example.com"]
    assert "tpot_ms" in message.body
    assert "(above)" in message.body
    assert "on cluster gpu-east" in message.body

    english = page(personas.engineer, rollout.code)
    assert 'data-finding="outside_interval"' in english
    assert "For engineering: measured outside the capacity plan's interval." in english
    chinese = page(personas.engineer, rollout.code, "zh-hans")
    assert "实测超出容量规划的区间" in chinese
    assert "measured outside the capacity plan" not in chinese


@pytest.mark.django_db
def test_a_canary_inside_the_interval_is_not_flagged(
    rollout: Rollout,
    personas: Personas,
    reference: EvalRun,  # noqa: F811
    engine_like_approved: FakeEngine,  # noqa: F811
) -> None:
    # both latencies as planned (test_analysis.metrics' bases are half the plan's)
    series = metrics(rollout, {"time_to_first_token": 2.0, "inter_token_latency": 2.0})
    analysis = analyse(rollout, personas, engine_like_approved, series)
    assert {row.position for row in PlanMeasurement.objects.filter(analysis=analysis, figure__endswith="_ms")} == {
        "inside"
    }
    assert not AuditEvent.objects.filter(action=OUTSIDE_INTERVAL).exists()
    assert 'data-finding="outside_interval"' not in page(personas.engineer, rollout.code)


def _fleet_series(rollout: Rollout, tpot_factor: float) -> Callable[[str], list[float | None] | None]:
    """The promoted deployment's series: TTFT as planned, TPOT `tpot_factor` x the plan's, a calm pool."""
    throughput = rollout.evidence["capacity_plan"]["result"]["throughput"]
    values = {
        "time_to_first_token": throughput["ttft_ms"] / 1000,
        "inter_token_latency": throughput["tpot_ms"] / 1000 * tpot_factor,
        "kv_cache_usage": 0.5,
        "request_queue_time": 0.001,
        "num_preemptions": 0.0,
    }

    def series(query: str) -> list[float | None] | None:
        name = next((key for key in values if key in query), None)
        return None if name is None else [values[name]] * 10

    return series


@pytest.mark.django_db
def test_the_fleet_outside_the_interval_is_flagged_once_while_it_stays_there(
    rollout: Rollout, personas: Personas, django_capture_on_commit_callbacks: Any
) -> None:
    _engineers(personas)
    envelope = serving_envelope(rollout.serving())
    analysis = CanaryAnalysis.objects.create(
        deployment=rollout.deployment,
        digest=rollout.digest,
        envelope=envelope,
        envelope_digest=envelope_digest(envelope),
        status=CanaryStatus.PASSED,
        canary_selector={"deployment": "canary"},
        stable_selector={"deployment": "stable"},
        cluster="gpu-east",
    )
    result = rollout.evidence["capacity_plan"]["result"]
    above = result["intervals"]["throughput.tpot_ms"]["high"] * 1.5 / result["throughput"]["tpot_ms"]

    def check(tpot_factor: float) -> FleetCheck:
        with (
            FakePrometheus(_fleet_series(rollout, tpot_factor)) as prometheus,
            django_capture_on_commit_callbacks(execute=True),
        ):
            return fleet_check_one(analysis, PromClient(prometheus.url, timeout_s=5), 1_800_000_000.0)

    first = check(above)
    assert first.status == "ok"  # no fleet alert: the pool is calm and nothing queues
    assert {f["figure"]: f["position"] for f in first.plan if f["position"]} == {
        "tpot_ms": "above",
        "ttft_ms": "inside",
    }
    event = AuditEvent.objects.get(action=OUTSIDE_INTERVAL)
    assert (event.actor_name, event.data["source"], set(event.data["figures"])) == (
        "system:fleet",
        "fleet",
        {"tpot_ms"},
    )
    assert len([m for m in mail.outbox if "outside its capacity plan's interval" in m.subject]) == 1
    english = page(personas.engineer, rollout.code)
    assert 'data-finding="fleet_outside_interval"' in english
    assert "For engineering: the fleet measured outside the capacity plan's interval." in english
    assert "线上服务实测超出容量规划的区间" in page(personas.engineer, rollout.code, "zh-hans")

    check(above)  # still there: not flagged again
    assert AuditEvent.objects.filter(action=OUTSIDE_INTERVAL).count() == 1
    assert len([m for m in mail.outbox if "outside its capacity plan's interval" in m.subject]) == 1

    check(1.0)  # back inside: nothing to flag, and the page says nothing
    assert AuditEvent.objects.filter(action=OUTSIDE_INTERVAL).count() == 1
    assert 'data-finding="fleet_outside_interval"' not in page(personas.engineer, rollout.code)

    check(above)  # outside again: flagged again
    assert AuditEvent.objects.filter(action=OUTSIDE_INTERVAL).count() == 2
    assert PlanMeasurement.objects.filter(analysis=analysis, source="fleet", figure="tpot_ms").count() == 4
