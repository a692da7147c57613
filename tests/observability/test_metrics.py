"""/metrics: who may scrape it, and that a gate check, a sign-off and an eval each move their series."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from governance.core.models import OutboxMessage
from governance.evaluations.models import Cluster, EvalStatus, ExecutorKind, JobKind, JobRun, JobRunState
from governance.observability.collectors import celery_queue_lengths
from tests.gate.conftest import Gate, record_eval

TOKEN = "metrics-scrape-token-0123456789abcdef"


@pytest.fixture(autouse=True)
def metrics_settings(settings: Any) -> None:
    settings.METRICS_TOKEN = TOKEN
    settings.METRICS_ALLOWED_NETWORKS = []


def scrape(client: Client | None = None) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    response = (client or Client()).get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    assert response.status_code == 200, response.content
    samples: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
    for family in text_string_to_metric_families(response.content.decode()):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def value(samples: dict[tuple[str, tuple[tuple[str, str], ...]], float], name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


@pytest.mark.django_db
def test_anonymous_scrape_is_refused() -> None:
    response = Client().get("/metrics")
    assert response.status_code == 401
    assert response["WWW-Authenticate"].startswith("Bearer")
    assert b"governance_" not in response.content


@pytest.mark.django_db
def test_wrong_token_is_refused() -> None:
    response = Client().get("/metrics", HTTP_AUTHORIZATION="Bearer not-the-token")
    assert response.status_code == 401


@pytest.mark.django_db
def test_nothing_configured_refuses_everyone(settings: Any) -> None:
    settings.METRICS_TOKEN = ""
    assert Client().get("/metrics").status_code == 403
    assert Client().get("/metrics", HTTP_AUTHORIZATION="Bearer ").status_code == 403


@pytest.mark.django_db
def test_allowed_network_scrapes_without_token(settings: Any) -> None:
    import ipaddress

    settings.METRICS_ALLOWED_NETWORKS = [ipaddress.ip_network("10.1.0.0/16")]
    assert Client(REMOTE_ADDR="10.1.2.3").get("/metrics").status_code == 200
    assert Client(REMOTE_ADDR="10.2.0.1").get("/metrics").status_code == 401
    # A forwarded-for header is written by the client: it does not make an outsider an insider.
    outsider = Client(REMOTE_ADDR="192.0.2.7").get("/metrics", HTTP_X_FORWARDED_FOR="10.1.2.3")
    assert outsider.status_code == 401


def test_bad_network_setting_names_the_variable() -> None:
    result = subprocess.run(
        [sys.executable, "-c", "import django; django.setup()"],
        env={
            **os.environ,
            "METRICS_ALLOWED_NETWORKS": "10.0.0.0/8,not-a-net",
            "DJANGO_SETTINGS_MODULE": "governance.settings_tests",
        },
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode != 0
    assert "METRICS_ALLOWED_NETWORKS" in result.stderr
    assert "not-a-net" in result.stderr


@pytest.mark.django_db
def test_gate_check_signoff_and_eval_move_their_counters(gate: Gate, tmp_path: Path) -> None:
    # The gate fixture approved a request: two sign-offs and a passed eval are on record already.
    before = scrape()
    assert value(before, "governance_signoffs_total", role="legal", decision="approve") >= 1
    assert value(before, "governance_signoffs_total", role="engineering", decision="approve") >= 1

    allow = gate.check()
    assert allow.json()["decision"] == "allow"
    deny = gate.check(artifact_digest="sha256:" + "0" * 64)
    assert deny.json()["decision"] == "deny"
    deny_codes = [reason["code"] for reason in deny.json()["reasons"]]

    refused = gate.flow.client(gate.p.legal).post(
        f"/api/v1/approvals/deployments/{gate.code}/signoffs",
        {"role": "legal", "decision": "approve", "password": "wrong", "evidence_digest": "a" * 64},
        format="json",
    )
    assert refused.status_code in (403, 409), refused.json()
    record_eval(gate.code, "w8a8", EvalStatus.FAILED, tmp_path)

    after = scrape()
    assert (
        value(after, "governance_gate_decisions_total", result="allow")
        == value(before, "governance_gate_decisions_total", result="allow") + 1
    )
    assert (
        value(after, "governance_gate_decisions_total", result="deny")
        == value(before, "governance_gate_decisions_total", result="deny") + 1
    )
    for code in deny_codes:
        assert value(after, "governance_gate_deny_reasons_total", reason=code) >= 1
    assert (
        value(after, "governance_gate_check_duration_seconds_count", status="200")
        >= value(before, "governance_gate_check_duration_seconds_count", status="200") + 2
    )
    refusal_code = refused.json()["extra"]["code"]
    assert (
        value(after, "governance_signoff_refusals_total", code=refusal_code)
        == value(before, "governance_signoff_refusals_total", code=refusal_code) + 1
    )
    assert (
        value(after, "governance_eval_runs", status="failed")
        == value(before, "governance_eval_runs", status="failed") + 1
    )
    # Packets were rendered and verified on the way to approval (the gate fixture signed twice).
    assert value(after, "governance_packet_render_duration_seconds_count") >= 1
    assert value(after, "governance_packet_verify_duration_seconds_count") >= 1
    for source in ("signoffs", "jobs", "outbox", "audit", "celery"):
        assert value(after, "governance_metrics_source_up", source=source) == 1, source


@pytest.mark.django_db
def test_job_states_durations_and_outbox_age(tmp_path: Path) -> None:
    cluster = Cluster.objects.create(name="local", executor=ExecutorKind.LOCAL, remote_root=str(tmp_path))
    now = timezone.now()
    finished = JobRun.objects.create(
        cluster=cluster, kind=JobKind.EVAL, command=["true"], time_limit_s=60, state=JobRunState.SUCCEEDED
    )
    JobRun.objects.filter(pk=finished.pk).update(created_at=now - timedelta(seconds=100), finished_at=now)
    JobRun.objects.create(cluster=cluster, kind=JobKind.EVAL, command=["true"], time_limit_s=60)
    message = OutboxMessage.objects.create(task="core.ping", args=[], kwargs={})
    OutboxMessage.objects.filter(pk=message.pk).update(created_at=now - timedelta(seconds=900))

    samples = scrape()
    assert value(samples, "governance_jobs", kind="eval", state="succeeded") == 1
    assert value(samples, "governance_jobs", kind="eval", state="queued") == 1
    assert value(samples, "governance_job_duration_seconds_count", kind="eval") == 1
    assert value(samples, "governance_job_duration_seconds_bucket", kind="eval", le="60.0") == 0
    assert value(samples, "governance_job_duration_seconds_bucket", kind="eval", le="120.0") == 1
    assert value(samples, "governance_job_duration_seconds_sum", kind="eval") == pytest.approx(100, abs=1)
    assert value(samples, "governance_outbox_depth") == 1
    assert value(samples, "governance_outbox_oldest_age_seconds") == pytest.approx(900, abs=30)


@pytest.mark.django_db
def test_audit_lag_and_published_checkpoint_age(django_capture_on_commit_callbacks: Any) -> None:
    from governance.audit.actions import AuditAction
    from governance.audit.services import audit_checkpoint_create, audit_record

    audit_record(actor="system:test", action=AuditAction.AUDIT_EXPORTED, data={})
    with django_capture_on_commit_callbacks(execute=True):  # published after commit
        audit_checkpoint_create(force=True)
    samples = scrape()
    assert value(samples, "governance_audit_head_lag_events") == 0
    assert 0 <= value(samples, "governance_audit_last_published_checkpoint_age_seconds") < 60
    head = value(samples, "governance_audit_head_seq")
    audit_record(actor="system:test", action=AuditAction.AUDIT_EXPORTED, data={})
    samples = scrape()
    assert value(samples, "governance_audit_head_seq") == head + 1
    assert value(samples, "governance_audit_head_lag_events") == 1


def test_redis_queue_length_counts_every_priority_list() -> None:
    import redis

    url = "redis://127.0.0.1:6379/4"
    client = redis.Redis.from_url(url)
    queue = "metrics-test-queue"
    try:
        client.delete(queue, f"{queue}\x06\x163")
        client.rpush(queue, "a", "b")
        client.rpush(f"{queue}\x06\x163", "c")
        assert celery_queue_lengths(url, [queue]) == {queue: 3}
    finally:
        client.delete(queue, f"{queue}\x06\x163")


def family_names(client: Client | None = None) -> set[str]:
    response = (client or Client()).get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    return {family.name for family in text_string_to_metric_families(response.content.decode())}


@pytest.mark.django_db
def test_dashboard_and_alerts_name_only_exported_metrics(django_capture_on_commit_callbacks: Any) -> None:
    """The Grafana dashboard and the alert rules in docs/ query series that exist."""
    from governance.audit.actions import AuditAction
    from governance.audit.services import audit_checkpoint_create, audit_record

    audit_record(actor="system:test", action=AuditAction.AUDIT_EXPORTED, data={})
    with django_capture_on_commit_callbacks(execute=True):  # so the published checkpoint's age is exported
        audit_checkpoint_create(force=True)
    exported = family_names()
    docs = Path(__file__).resolve().parents[2] / "docs"
    for document in ("grafana-dashboard.json", "prometheus-alerts.yaml"):
        text = (docs / document).read_text()
        used = {re.sub(r"_(bucket|count|sum|total)$", "", name) for name in re.findall(r"governance_[a-z0-9_]+", text)}
        assert used, document
        assert used <= exported, f"{document} names {sorted(used - exported)}"


MULTIPROCESS_SCRIPT = """
import multiprocessing, os, sys
import django
django.setup()
from django.test import RequestFactory
from governance.core.metrics import gate_decision_observe
from governance.observability.views import metrics

def one_worker():
    gate_decision_observe("deny", ["artifact.digest_mismatch"])

if __name__ == "__main__":
    ctx = multiprocessing.get_context("fork")
    for _ in range(3):  # three gunicorn workers, each answering one check
        process = ctx.Process(target=one_worker)
        process.start()
        process.join()
    request = RequestFactory().get("/metrics", HTTP_AUTHORIZATION="Bearer " + os.environ["METRICS_TOKEN"])
    sys.stdout.write(metrics(request).content.decode())
"""


def test_multiprocess_mode_sums_every_worker(tmp_path: Path) -> None:
    """Under gunicorn each worker is a process of its own: a scrape answered by one of them must
    count the decisions of all (PROMETHEUS_MULTIPROC_DIR)."""
    folder = tmp_path / "prometheus"
    folder.mkdir()
    env = {
        **os.environ,
        "PROMETHEUS_MULTIPROC_DIR": str(folder),
        "METRICS_TOKEN": TOKEN,
        "DJANGO_SETTINGS_MODULE": "governance.settings_tests",
        "DATABASE_URL": "sqlite:///" + str(tmp_path / "unmigrated.sqlite3"),  # the database part fails alone
    }
    result = subprocess.run(
        [sys.executable, "-c", MULTIPROCESS_SCRIPT], env=env, capture_output=True, text=True, check=False, timeout=120
    )
    assert result.returncode == 0, result.stderr
    samples = {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(result.stdout)
        for sample in family.samples
    }
    assert value(samples, "governance_gate_decisions_total", result="deny") == 3
    assert value(samples, "governance_gate_deny_reasons_total", reason="artifact.digest_mismatch") == 3
    assert value(samples, "governance_metrics_source_up", source="jobs") == 0
    # Files are named by host and pid, so two containers sharing the folder do not collide.
    assert all("-" in path.stem.split("_", 1)[1] for path in folder.glob("*.db"))


def test_multiprocess_files_clean_removes_only_this_hosts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import socket

    from governance.core.prometheus import multiprocess_files_clean

    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(tmp_path))
    mine = tmp_path / f"counter_{socket.gethostname().replace('_', '-')}-123.db"
    theirs = tmp_path / "counter_worker-container-123.db"
    mine.write_bytes(b"x")
    theirs.write_bytes(b"x")
    multiprocess_files_clean()
    assert not mine.exists()
    assert theirs.exists()
