"""Metrics read from the database (and the broker) at scrape time.

What the database records is right whichever process did the work (a Celery worker signs a
packet, another container runs an eval), so these are computed per scrape, not counted in memory.
Each source is one aggregate query; a source that fails (the broker down) is reported in
`governance_metrics_source_up` and the rest still answers."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db.models import Count, DurationField, ExpressionWrapper, F, Min, OuterRef, Q, QuerySet, Subquery, Sum
from django.utils import timezone
from django.utils.dateparse import parse_datetime
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

logger = logging.getLogger(__name__)

# Jobs take seconds (a plan) to hours (an eval of a large model on a busy cluster).
JOB_DURATION_BUCKETS_S = (1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 7200, 21600, 86400)
# kombu's Redis transport keeps priorities 3, 6 and 9 of a queue in lists of their own.
_REDIS_PRIORITY_SEP = "\x06\x16"
_REDIS_PRIORITY_STEPS = (3, 6, 9)


@dataclass(frozen=True, slots=True)
class JobSource:
    """Rows of one kind of background job: where its state is and when it started and ended.
    Another app's job (a quantize run in its own table) is one more entry in `job_sources`."""

    kind_field: str | None  # a column naming the kind, or None: every row is `kind`
    kind: str
    queryset: QuerySet[Any]
    state_field: str
    started_field: str
    finished_field: str


def job_sources() -> list[JobSource]:
    from governance.capacity.models import CapacityPlan
    from governance.evaluations.models import JobRun

    return [
        # eval, discovery and command runs on a cluster (every JobKind, as labels)
        JobSource("kind", "", JobRun.objects.all(), "state", "created_at", "finished_at"),
        JobSource(None, "plan", CapacityPlan.objects.all(), "status", "created_at", "computed_at"),
    ]


def _duration(source: JobSource) -> ExpressionWrapper:
    return ExpressionWrapper(F(source.finished_field) - F(source.started_field), output_field=DurationField())


def _seconds(value: Any) -> float:
    if value is None:
        return 0.0
    if isinstance(value, timedelta):
        return value.total_seconds()
    return float(value) / 1e6  # SQLite hands back microseconds


class DatabaseCollector(Collector):
    def collect(self) -> Iterator[Metric]:
        up = GaugeMetricFamily(
            "governance_metrics_source_up", "1 when this source of metrics answered this scrape.", labels=["source"]
        )
        for name, produce in (
            ("signoffs", self._signoffs),
            ("jobs", self._jobs),
            ("outbox", self._outbox),
            ("audit", self._audit),
            ("celery", self._celery_queues),
            ("fleet", self._fleet),
        ):
            try:
                families = list(produce())
            except Exception:
                logger.exception("metrics: source %s failed", name)
                up.add_metric([name], 0)
                continue
            up.add_metric([name], 1)
            yield from families
        yield up

    # --- sign-offs: from the audit trail, where every sign-off and refusal is recorded ---------
    def _signoffs(self) -> Iterator[Metric]:
        from governance.audit.actions import AuditAction
        from governance.audit.selectors import audit_data_counts

        recorded = CounterMetricFamily(
            "governance_signoffs", "Sign-offs recorded, by role and decision.", labels=["role", "decision"]
        )
        for role, verdict, n in audit_data_counts(AuditAction.SIGNOFF_RECORDED, "role", "verdict"):
            recorded.add_metric([str(role), str(verdict)], n)
        yield recorded
        refused = CounterMetricFamily(
            "governance_signoff_refusals", "Sign-off attempts refused, by refusal code.", labels=["code"]
        )
        for code, n in audit_data_counts(AuditAction.SIGNOFF_REFUSED, "code"):
            refused.add_metric([str(code)], n)
        yield refused

    # --- the fleet after promotion: each promoted deployment's newest re-check (canary.fleet_check) ---
    def _fleet(self) -> Iterator[Metric]:
        from governance.canary.models import FleetCheck
        from governance.deployments.choices import Status

        alerting = GaugeMetricFamily(
            "governance_fleet_alert",
            "1 while a promoted deployment's newest fleet check finds a figure sustained beyond its plan.",
            labels=["deployment", "metric"],
        )
        latest = FleetCheck.objects.filter(deployment=OuterRef("deployment")).order_by("-created_at").values("pk")[:1]
        newest = FleetCheck.objects.filter(
            pk=Subquery(latest), deployment__status__in=[Status.APPROVED, Status.IN_REVIEW]
        ).values_list("deployment__code", "alerts")
        for code, alerts in newest:
            for metric in alerts or []:
                alerting.add_metric([str(code), str(metric)], 1)
        yield alerting

    # --- background jobs: states now, durations of the finished ones -----------------------------
    def _jobs(self) -> Iterator[Metric]:
        states = GaugeMetricFamily("governance_jobs", "Background jobs by kind and state.", labels=["kind", "state"])
        durations = HistogramMetricFamily(
            "governance_job_duration_seconds",
            "From creation to result, for finished jobs (eval, discovery, command runs; capacity plans).",
            labels=["kind"],
        )
        for source in job_sources():
            group = [source.kind_field] if source.kind_field else []
            for row in source.queryset.order_by().values(*group, source.state_field).annotate(n=Count("pk")):
                kind = row[source.kind_field] if source.kind_field else source.kind
                states.add_metric([str(kind), str(row[source.state_field])], row["n"])
            finished = source.queryset.order_by().filter(**{f"{source.finished_field}__isnull": False})
            buckets = {
                f"le_{i}": Count("pk", filter=Q(took__lte=timedelta(seconds=bound)))
                for i, bound in enumerate(JOB_DURATION_BUCKETS_S)
            }
            rows = (
                finished.annotate(took=_duration(source))
                .values(*group)
                .annotate(total=Count("pk"), took_sum=Sum("took"), **buckets)
            )
            for row in rows:
                kind = row[source.kind_field] if source.kind_field else source.kind
                cumulative = [(str(float(b)), row[f"le_{i}"]) for i, b in enumerate(JOB_DURATION_BUCKETS_S)]
                durations.add_metric(
                    [str(kind)], [*cumulative, ("+Inf", row["total"])], sum_value=_seconds(row["took_sum"])
                )
        yield states
        yield durations
        from governance.evaluations.models import EvalRun

        verdicts = GaugeMetricFamily(
            "governance_eval_runs",
            "Quantization eval runs by status (running, passed, failed, ...).",
            labels=["status"],
        )
        for status, n in (
            EvalRun.objects.order_by().values_list("status").annotate(n=Count("pk")).values_list("status", "n")
        ):
            verdicts.add_metric([str(status)], n)
        yield verdicts

    # --- the transactional outbox ----------------------------------------------------------------
    def _outbox(self) -> Iterator[Metric]:
        from governance.core.models import OutboxMessage

        pending = OutboxMessage.objects.filter(acked_at__isnull=True)
        summary = pending.aggregate(
            depth=Count("pk"),
            oldest=Min("created_at"),
            given_up=Count("pk", filter=Q(attempts__gte=settings.OUTBOX_MAX_ATTEMPTS)),
        )
        yield GaugeMetricFamily(
            "governance_outbox_depth", "Outbox rows not yet acknowledged by a worker.", value=summary["depth"]
        )
        oldest = summary["oldest"]
        age = (timezone.now() - oldest).total_seconds() if oldest else 0.0
        yield GaugeMetricFamily(
            "governance_outbox_oldest_age_seconds", "Age of the oldest unacknowledged outbox row (0: none).", value=age
        )
        yield GaugeMetricFamily(
            "governance_outbox_given_up",
            "Unacknowledged rows past OUTBOX_MAX_ATTEMPTS (beat no longer sends them).",
            value=summary["given_up"],
        )
        yield GaugeMetricFamily(
            "governance_outbox_lease_seconds",
            "OUTBOX_LEASE_S: a row older than this should have been done.",
            value=settings.OUTBOX_LEASE_S,
        )

    # --- the audit chain and its published checkpoints -------------------------------------------
    def _audit(self) -> Iterator[Metric]:
        from governance.audit.integrity import last_published_statement
        from governance.audit.keys import load_signing_key
        from governance.audit.models import AuditChainHead
        from governance.audit.selectors import audit_checkpoints

        head = AuditChainHead.objects.filter(pk=1).values_list("seq", flat=True).first() or 0
        stored = audit_checkpoints().values_list("seq", flat=True).last()
        yield GaugeMetricFamily("governance_audit_head_seq", "Seq of the audit chain head.", value=head)
        published = None
        if Path(settings.AUDIT_SIGNING_KEY_PATH).exists():
            published = last_published_statement(load_signing_key().public_key())
        published_seq = int(published["seq"]) if published else 0
        yield GaugeMetricFamily(
            "governance_audit_head_lag_events",
            "Events after the last published checkpoint (not yet anchored outside the database).",
            value=max(head - published_seq, 0),
        )
        yield GaugeMetricFamily(
            "governance_audit_unsigned_events",
            "Events after the last checkpoint stored in the database.",
            value=max(head - (stored or 0), 0),
        )
        signed_at = parse_datetime(str(published["time"])) if published and published.get("time") else None
        if signed_at is not None:
            yield GaugeMetricFamily(
                "governance_audit_last_published_checkpoint_age_seconds",
                "Age of the last checkpoint in the published log whose signature checks out.",
                value=(timezone.now() - signed_at).total_seconds(),
            )
        yield GaugeMetricFamily(
            "governance_audit_checkpoint_interval_seconds",
            "AUDIT_CHECKPOINT_INTERVAL_S: beat signs and publishes a checkpoint this often.",
            value=settings.AUDIT_CHECKPOINT_INTERVAL_S,
        )

    # --- Celery queues, read from the broker -----------------------------------------------------
    def _celery_queues(self) -> Iterator[Metric]:
        lengths = GaugeMetricFamily(
            "governance_celery_queue_length", "Messages waiting in a Celery queue.", labels=["queue"]
        )
        queues = sorted({settings.CELERY_TASK_DEFAULT_QUEUE, settings.CELERY_HEAVY_QUEUE})
        for queue, length in celery_queue_lengths(settings.CELERY_BROKER_URL, queues).items():
            lengths.add_metric([queue], length)
        yield lengths


def celery_queue_lengths(broker_url: str, queues: list[str]) -> dict[str, int]:
    if broker_url.startswith(("redis://", "rediss://")):
        import redis

        client = redis.Redis.from_url(broker_url, socket_timeout=2, socket_connect_timeout=2)
        try:
            with client.pipeline(transaction=False) as pipe:
                for queue in queues:
                    for key in (queue, *(f"{queue}{_REDIS_PRIORITY_SEP}{p}" for p in _REDIS_PRIORITY_STEPS)):
                        pipe.llen(key)
                counts = pipe.execute()
        finally:
            client.close()
        per_queue = 1 + len(_REDIS_PRIORITY_STEPS)
        return {queue: int(sum(counts[i * per_queue : (i + 1) * per_queue])) for i, queue in enumerate(queues)}
    if broker_url.startswith("filesystem://"):
        # kombu's filesystem transport names each message file `<time>_<uuid>.<queue>.msg`.
        folder = Path(str(settings.CELERY_BROKER_TRANSPORT_OPTIONS.get("data_folder_in", "")))
        names = [p.name for p in folder.iterdir()] if folder.is_dir() else []
        return {queue: sum(1 for name in names if name.endswith(f".{queue}.msg")) for queue in queues}
    return {}
