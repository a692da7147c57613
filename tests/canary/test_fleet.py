"""The fleet after promotion: the beat task re-checks each promoted deployment's series against its
capacity plan. Debian's Prometheus on loopback scrapes two test exporters of vLLM's metric names (a
calm production deployment and one whose KV cache is saturated, whose requests queue and which
preempts); sustained beyond the plan is an alert (the service's /metrics, a notification, audited)
and, where FLEET_SEND_BACK_TO_REVIEW is set, the request goes back to review (audited)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from django.core import mail
from django.test import Client

from governance.audit.models import AuditEvent
from governance.canary.fleet import judge_fleet, sustained
from governance.canary.models import CanaryAnalysis, CanaryStatus, PlanMeasurement
from governance.canary.prometheus import engine_queries
from governance.canary.risk import envelope_digest, serving_envelope
from governance.canary.services import fleet_check_run
from governance.deployments.models import DeploymentRequest
from tests.canary.conftest import Rollout
from tests.canary.exporter import VllmExporter
from tests.canary.promserver import loopback_prometheus, needs_prometheus, wait_for_samples
from tests.conftest import Personas

METRICS_TOKEN = "fleet-scrape-token"


def test_a_spike_is_not_sustained_a_saturated_window_is() -> None:
    assert not sustained("kv_cache_usage", [0.5, 0.5, 0.99, 0.5, 0.5], 0.95, 0.8).alert
    figure = sustained("kv_cache_usage", [0.96, 0.97, 0.99, 0.98, 0.5], 0.95, 0.8)
    assert figure.alert
    assert figure.breaching == 0.8
    assert "4 of 5 samples" in figure.detail


def test_the_limits_come_from_the_plan_and_no_data_never_alerts() -> None:
    figures = {f.metric: f for f in judge_fleet({"throughput": {"ttft_ms": 200}}, {}, kv_saturated=0.95, fraction=0.8)}
    assert figures["queue_time_seconds"].limit == 0.2  # the plan's TTFT
    assert figures["preemptions_per_second"].limit == 0.0
    assert not any(f.alert for f in figures.values())
    assert "no data" in figures["kv_cache_usage"].detail


def promoted(rollout: Rollout, selector: dict[str, str]) -> CanaryAnalysis:
    envelope = serving_envelope(rollout.serving())
    return CanaryAnalysis.objects.create(
        deployment=rollout.deployment,
        digest=rollout.digest,
        envelope=envelope,
        envelope_digest=envelope_digest(envelope),
        status=CanaryStatus.PASSED,
        canary_selector={"deployment": "canary"},
        stable_selector=selector,
    )


def alert_lines(settings: Any) -> list[str]:
    settings.METRICS_TOKEN = METRICS_TOKEN
    body = Client().get("/metrics", HTTP_AUTHORIZATION=f"Bearer {METRICS_TOKEN}").content.decode()
    return [line for line in body.splitlines() if line.startswith("governance_fleet_alert{")]


@pytest.mark.slow
@needs_prometheus
@pytest.mark.django_db
def test_sustained_saturation_queueing_and_preemption_alert_and_optionally_send_back_to_review(
    rollout: Rollout, personas: Personas, tmp_path: Path, settings: Any, django_capture_on_commit_callbacks: Any
) -> None:
    settings.FLEET_WINDOW_S, settings.FLEET_STEP_S = 20, 2
    assert settings.FLEET_SEND_BACK_TO_REVIEW is False  # off unless the organisation sets it
    personas.engineer.email = "engineering@example.com"
    personas.engineer.save()
    plan = rollout.evidence["capacity_plan"]["result"]["throughput"]
    ttft_s, tpot_s = plan["ttft_ms"] / 1000, plan["tpot_ms"] / 1000
    calm = VllmExporter(0.5 * ttft_s, 0.5 * tpot_s, 0.5, queue_s=0.001)
    hot = VllmExporter(0.9 * ttft_s, 0.9 * tpot_s, 0.98, queue_s=3 * ttft_s, preemptions_per_scrape=2)
    with (
        calm,
        hot,
        loopback_prometheus(
            tmp_path / "prom", {"deployment=prod-calm": calm.address, "deployment=prod-hot": hot.address}
        ) as client,
    ):
        for name in ("prod-calm", "prod-hot"):
            wait_for_samples(client, engine_queries("vllm", {"deployment": name})["queue_time_seconds"], 8, step=2)
        analysis = promoted(rollout, {"deployment": "prod-calm"})

        # a calm fleet: checked, nothing to say
        with django_capture_on_commit_callbacks(execute=True):
            [check] = fleet_check_run(prometheus=lambda: client, now=time.time())
        assert check.status == "ok", check.figures
        assert {f["metric"]: f["alert"] for f in check.figures} == {
            "kv_cache_usage": False, "queue_time_seconds": False, "preemptions_per_second": False,
        }  # fmt: skip
        assert alert_lines(settings) == []
        assert not AuditEvent.objects.filter(action=815).exists()
        # no alert, yet its latencies, half the plan's, are below the plan's interval: engineering is told
        # (tests/canary/test_outside_interval.py), once
        assert {f["figure"]: f["position"] for f in check.plan if f["position"]} == {
            "ttft_ms": "below", "tpot_ms": "below",
        }  # fmt: skip
        assert AuditEvent.objects.filter(action=816, data__source="fleet").count() == 1
        outside = [m for m in mail.outbox if "outside its capacity plan's interval" in m.subject]
        assert len(outside) == 1

        # the same request's production now saturated: an alert, the request stays approved
        analysis.stable_selector = {"deployment": "prod-hot"}
        analysis.save()
        with django_capture_on_commit_callbacks(execute=True):
            [check] = fleet_check_run(prometheus=lambda: client, now=time.time())
        assert check.status == "alert"
        assert set(check.alerts) == {"kv_cache_usage", "queue_time_seconds", "preemptions_per_second"}, check.figures
        kv = next(f for f in check.figures if f["metric"] == "kv_cache_usage")
        assert kv["value"] == pytest.approx(0.98)
        assert kv["breaching"] >= 0.8
        event = AuditEvent.objects.get(action=815)
        assert event.data["sent_back"] is False
        assert set(event.data["alerts"]) == set(check.alerts)
        assert DeploymentRequest.objects.get(pk=rollout.deployment.pk).status == "approved"
        [message] = [m for m in mail.outbox if m not in outside]
        assert "serves beyond its capacity plan" in message.subject
        assert "kv_cache_usage" in message.body
        assert "engineering@example.com" in message.to
        engineer = Client()
        engineer.force_login(personas.engineer)
        shown = engineer.get(f"/requests/{rollout.code}/").content.decode()
        assert 'data-fleet="alert"' in shown
        assert "serving beyond its capacity plan, sustained" in shown
        chinese = engineer.get(f"/requests/{rollout.code}/", HTTP_ACCEPT_LANGUAGE="zh-hans").content.decode()
        assert "持续超出容量规划" in chinese
        lines = alert_lines(settings)
        assert f'governance_fleet_alert{{deployment="{rollout.code}",metric="kv_cache_usage"}} 1.0' in lines
        assert len(lines) == 3

        # still alerting: no second message about the same alerts
        with django_capture_on_commit_callbacks(execute=True):
            fleet_check_run(prometheus=lambda: client, now=time.time())
        assert len(mail.outbox) == 2  # the alert's, and the calm check's outside-interval message

        # where the organisation sends such a request back to review: audited as a transition
        settings.FLEET_SEND_BACK_TO_REVIEW = True
        with django_capture_on_commit_callbacks(execute=True):
            [check] = fleet_check_run(prometheus=lambda: client, now=time.time())
    assert check.sent_back
    # each check's figures are calibration rows too (source fleet), the saturated ones as worse
    fleet_rows = PlanMeasurement.objects.filter(deployment=rollout.deployment, source="fleet")
    assert fleet_rows.filter(figure="kv_cache_usage", verdict="worse").count() == 3
    assert fleet_rows.filter(figure="ttft_ms").exclude(measured=None).exists()
    deployment = DeploymentRequest.objects.get(pk=rollout.deployment.pk)
    assert (deployment.status, deployment.flagged) == ("in_review", True)
    assert "beyond its capacity plan" in deployment.flag_reason
    transition = AuditEvent.objects.filter(action=402, data__to="in_review").order_by("-seq").first()
    assert transition is not None
    assert transition.actor_name == "system:fleet"
    assert AuditEvent.objects.filter(action=815, data__sent_back=True).count() == 1
    assert len([m for m in mail.outbox if m not in outside]) == 2  # the alert, once more with the return to review
    assert rollout.check("production")["decision"] == "deny"  # no longer approved
    # a request back in review is no longer a promoted deployment: the next beat leaves it alone
    assert fleet_check_run(prometheus=lambda: None) == []


def test_beat_runs_the_fleet_check_on_its_schedule() -> None:
    from django.conf import settings

    from governance.canary.tasks import fleet_check_task

    entry = settings.CELERY_BEAT_SCHEDULE["canary-fleet-check"]
    assert entry == {"task": fleet_check_task.name, "schedule": float(settings.FLEET_CHECK_INTERVAL_S)}
    assert fleet_check_task.name == "canary.fleet_check"
