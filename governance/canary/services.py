"""Writes of canary analyses: request one (the pipeline names its canary), run it (the Celery job:
live regression through the canary, then the serving metrics from Prometheus), and an engineering
reviewer's decision on an inconclusive one. Each write records its audit event in the same
transaction. The run holds no transaction while it talks to the canary or to Prometheus."""

from __future__ import annotations

import json
import logging
import os
import re
import statistics
import time
import urllib.parse
import uuid
from collections.abc import Callable, Mapping
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone

from governance.audit.actions import AuditAction
from governance.audit.services import audit_record
from governance.canary.fleet import FLEET_METRICS, FleetFigure, judge_fleet
from governance.canary.models import (
    CANARY_OK,
    CanaryAnalysis,
    CanaryStatus,
    FleetCheck,
    MeasurementSource,
    PlanMeasurement,
)
from governance.canary.plan_fit import (
    OUTSIDE,
    PlanFigure,
    outside_interval,
    outside_text,
    plan_vs_measured,
    worse_than_planned,
)
from governance.canary.prometheus import (
    LABEL_NAME,
    RULES,
    PromClient,
    PrometheusError,
    engine_queries,
    metric_names_of,
)
from governance.canary.regression import MIN_CASES, Answer, run_live_regression, sample_cases
from governance.canary.risk import envelope_digest, serving_envelope
from governance.canary.verdict import FAILED, Check, compare_with_plan, compare_with_stable, overall
from governance.core.canonical import sha256_hex
from governance.core.errors import ConflictError, PermissionDeniedError, invalid_input
from governance.core.roles import Role, has_role
from governance.core.services import write_service
from governance.deployments.choices import Status
from governance.deployments.models import DeploymentRequest
from governance.deployments.readiness import approved_eval
from governance.deployments.services.notifications import notify_outside_interval, notify_serving_alert
from governance.deployments.services.transitions import deployment_lock, deployment_transition
from governance.evaluations.models import EvalRun
from planner.evaljob.cases import load_cases

logger = logging.getLogger(__name__)

CREDENTIAL_REF = re.compile(r"^[A-Z][A-Z0-9_]{0,99}$")
DECISIONS = {"promote": CanaryStatus.PROMOTED, "roll_back": CanaryStatus.ROLLED_BACK}
# How far above the capacity plan's TTFT / TPOT a canary may measure (engine-side medians), and the
# KV-cache usage that counts as a saturated pool.
PLAN_TOLERANCE = 0.25
KV_SATURATED = 0.95
METRICS_STEP_S = 15.0


class ReferenceMissing(ValueError):
    """The approved eval's cases or candidate answers cannot be had: the live regression has no data."""


def _validate_endpoint(endpoint: str) -> str:
    parts = urllib.parse.urlsplit(endpoint)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise invalid_input("endpoint", "must be the canary's http(s) base URL")
    if parts.username or parts.password:
        raise invalid_input("endpoint", "carries a credential: name it by credential_ref instead")
    if parts.query or parts.fragment:
        raise invalid_input("endpoint", "must have no query or fragment (a credential belongs in credential_ref)")
    return endpoint.rstrip("/")


def _validate_selector(field: str, labels: Mapping[str, Any] | None) -> dict[str, str]:
    labels = dict(labels or {})
    for name, value in labels.items():
        if not LABEL_NAME.match(str(name)) or not isinstance(value, str):
            raise invalid_input(field, f"{name!r}: a Prometheus label name and a string value")
    return labels


@write_service
def canary_analysis_request(
    *,
    deployment: DeploymentRequest,
    artifact_digest: str,
    serving: Mapping[str, Any],
    endpoint: str,
    actor: User | None,
    model_name: str = "",
    credential_ref: str = "",
    canary_selector: Mapping[str, Any] | None = None,
    stable_selector: Mapping[str, Any] | None = None,
    sample_size: int = 100,
    cluster: str = "",
) -> CanaryAnalysis:
    """Record the canary the pipeline deployed and queue its analysis after commit."""
    if deployment.status != Status.APPROVED:
        raise ConflictError(f"the request is {deployment.status}: a canary serves an approved request's weights")
    approved = str(((deployment.evidence or {}).get("artifact") or {}).get("weights_digest") or "")
    if artifact_digest.lower() != approved.lower():
        raise invalid_input("artifact_digest", f"{artifact_digest} is not the approved weights {approved}")
    envelope = serving_envelope(serving)
    if not envelope.get("engine"):
        raise invalid_input("serving.engine", "name the engine the canary runs")
    if credential_ref and not CREDENTIAL_REF.match(credential_ref):
        raise invalid_input("credential_ref", "the NAME of an environment variable (A-Z, 0-9, _), never the secret")
    if not MIN_CASES <= sample_size <= settings.CANARY_MAX_CASES:
        raise invalid_input("sample_size", f"between {MIN_CASES} and {settings.CANARY_MAX_CASES}")
    cluster = (cluster or deployment.target_cluster).strip()
    if len(cluster) > 120:
        raise invalid_input("cluster", "at most 120 characters")
    analysis = CanaryAnalysis.objects.create(
        deployment=deployment,
        digest=approved.lower(),
        envelope=envelope,
        envelope_digest=envelope_digest(envelope),
        endpoint=_validate_endpoint(endpoint),
        model_name=model_name[:200],
        credential_ref=credential_ref,
        canary_selector=_validate_selector("canary_selector", canary_selector),
        stable_selector=_validate_selector("stable_selector", stable_selector),
        sample_size=sample_size,
        cluster=cluster,
        requested_by=actor,
    )
    audit_record(
        actor=actor,
        action=AuditAction.CANARY_REQUESTED,
        obj=deployment,
        data={
            "analysis": str(analysis.code),
            "digest": analysis.digest,
            "envelope_digest": analysis.envelope_digest,
            "endpoint": analysis.endpoint,
            "credential_ref": credential_ref,  # the name only
            "sample_size": sample_size,
        },
    )
    transaction.on_commit(lambda: canary_analysis_send(analysis.pk))
    return analysis


def canary_analysis_send(analysis_id: int) -> bool:
    """Queue the run; on a broker outage the analysis stays pending and beat resends it."""
    from governance.canary.tasks import canary_analysis_run_task

    try:
        canary_analysis_run_task.delay(analysis_id)
    except Exception:  # kombu's OperationalError, redis' ConnectionError, ...: the analysis is saved
        logger.warning("canary analysis not sent; beat resends it", extra={"analysis": analysis_id}, exc_info=True)
        return False
    return True


def approved_reference(deployment: DeploymentRequest) -> tuple[EvalRun, list[dict[str, Any]], dict[str, str]]:
    """The approved served eval, its cases and its candidate's answers (what the canary must match)."""
    run = approved_eval(deployment.evidence or {})
    if run is None:
        raise ReferenceMissing("no passed served eval covers the approved weights and configuration")
    try:
        code = uuid.UUID(str(run.get("eval")))
    except ValueError:
        raise ReferenceMissing(f"the approved eval's code {run.get('eval')!r} is not a uuid") from None
    evaluation = EvalRun.objects.select_related("job").filter(code=code).first()
    if evaluation is None:
        raise ReferenceMissing(f"the approved eval {run.get('eval')} is not on record")
    answers = (evaluation.summary or {}).get("candidate_answers") or {}
    if not answers:
        raise ReferenceMissing(
            f"the approved eval {evaluation.code} kept no candidate answers (it ran before they were kept): "
            "run the eval again"
        )
    text = (evaluation.job.files or {}).get("eval_set.jsonl") if evaluation.job else None
    if text:
        cases = [json.loads(line) for line in text.splitlines() if line.strip()]
        digest = sha256_hex(text.encode())
    else:
        cases, digest = load_cases(None, None)
    if evaluation.eval_set_sha256 and digest != evaluation.eval_set_sha256:
        raise ReferenceMissing(f"the eval set at hand ({digest[:12]}…) is not the one the approved eval ran")
    return evaluation, [c for c in cases if c["id"] in answers], {str(k): str(v) for k, v in answers.items()}


@write_service
def _start(analysis_id: int) -> CanaryAnalysis | None:
    with transaction.atomic():
        analysis = CanaryAnalysis.objects.select_for_update().get(pk=analysis_id)
        if analysis.status not in (CanaryStatus.PENDING, CanaryStatus.RUNNING):
            return None  # finished (or decided): a resent task does nothing
        resumed = analysis.status == CanaryStatus.RUNNING
        analysis.status, analysis.started_at = CanaryStatus.RUNNING, timezone.now()
        analysis.save(update_fields=["status", "started_at", "updated_at"])
        audit_record(
            actor="system:canary",
            action=AuditAction.CANARY_STARTED,
            obj=analysis.deployment,
            data={"analysis": str(analysis.code), "resumed": resumed},
        )
    return analysis


def _credential(ref: str) -> str:
    if not ref:
        return ""
    value = os.environ.get(ref) or getattr(settings, ref, "")
    if not value:
        raise ReferenceMissing(f"the credential {ref} is not set on the worker")
    return str(value)


def _summary(values: list[float]) -> dict[str, float | int] | None:
    if not values:
        return None
    ordered = sorted(values)
    return {
        "n": len(ordered),
        "median": round(statistics.median(ordered), 6),
        "p95": round(ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))], 6),
    }


def _live_regression(analysis: CanaryAnalysis) -> tuple[list[Check], dict[str, Any]]:
    try:
        evaluation, cases, reference = approved_reference(analysis.deployment)
        api_key = _credential(analysis.credential_ref)
    except ReferenceMissing as exc:
        return [Check("regression", "live_regression", None, None, None, None, FAILED, f"no data: {exc}")], {}
    sample = sample_cases(cases, analysis.sample_size, str(analysis.code))
    started = time.perf_counter()
    check, answers = run_live_regression(
        base_url=analysis.endpoint,
        model=analysis.model_name or "default",
        cases=sample,
        reference=reference,
        generation=evaluation.generation or {},
        threshold=float(evaluation.threshold),
        api_key=api_key,
        timeout_s=float(settings.CANARY_HTTP_TIMEOUT_S),
    )
    measured = _client_figures(answers)
    measured.update(
        reference_eval=str(evaluation.code),
        cases=len(sample),
        of_cases=len(cases),
        wall_s=round(time.perf_counter() - started, 3),
    )
    return [check], measured


def _client_figures(answers: list[Answer]) -> dict[str, Any]:
    return {
        "client_ttft_seconds": _summary([a.ttft_s for a in answers if a.ttft_s is not None]),
        "client_tpot_seconds": _summary([a.tpot_s for a in answers if a.tpot_s is not None]),
        "client_latency_seconds": _summary([a.latency_s for a in answers]),
    }


Samples = dict[str, list[float]]


def _metrics(
    analysis: CanaryAnalysis, client: PromClient | None, now: float
) -> tuple[list[Check], dict[str, Any], Samples]:
    """Canary vs stable per engine metric, and the canary against the capacity plan; the canary's
    samples per metric (what the plan is held against)."""
    if client is None:
        return (
            [Check("stable", "prometheus", None, None, None, None, FAILED, "no data: no Prometheus configured")],
            {},
            {},
        )
    if not analysis.canary_selector or not analysis.stable_selector:
        return (
            [
                Check(
                    "stable",
                    "prometheus",
                    None,
                    None,
                    None,
                    None,
                    FAILED,
                    "no data: no canary or stable series selector",
                )
            ],
            {},
            {},
        )
    engine = str(analysis.envelope.get("engine"))
    try:
        canary_q = engine_queries(engine, analysis.canary_selector)
        stable_q = engine_queries(engine, analysis.stable_selector)
    except ValueError as exc:
        return [Check("stable", "prometheus", None, None, None, None, FAILED, f"no data: {exc}")], {}, {}
    start = now - settings.CANARY_METRICS_WINDOW_S
    checks: list[Check] = []
    samples: Samples = {}
    timings: list[float] = []
    for metric, rule in RULES.items():
        try:
            began = time.perf_counter()
            canary = client.samples(canary_q[metric], start=start, end=now, step=METRICS_STEP_S)
            stable = client.samples(stable_q[metric], start=start, end=now, step=METRICS_STEP_S)
            timings.append((time.perf_counter() - began) / 2)
        except PrometheusError as exc:
            checks.append(Check("stable", metric, None, None, rule.allowed_change, None, FAILED, f"no data: {exc}"))
            continue
        samples[metric] = canary
        checks.append(compare_with_stable(rule, canary, stable))
    plan = _plan_result(analysis.deployment).get("throughput") or {}
    for metric, key in (("ttft_seconds", "ttft_ms"), ("inter_token_latency_seconds", "tpot_ms")):
        planned = plan.get(key)
        checks.append(
            compare_with_plan(
                metric, samples.get(metric, []), None if planned is None else float(planned) / 1000, PLAN_TOLERANCE
            )
        )
    checks.append(compare_with_plan("kv_cache_usage", samples.get("kv_cache_usage", []), KV_SATURATED, 0.0))
    return checks, {"prometheus_query_s": _summary(timings), "metric_names": metric_names_of(engine)}, samples


def _plan_result(deployment: DeploymentRequest) -> dict[str, Any]:
    return dict(((deployment.evidence or {}).get("capacity_plan") or {}).get("result") or {})


def canary_analysis_run(
    *, analysis_id: int, prometheus: Callable[[], PromClient | None] | None = None, now: float | None = None
) -> CanaryAnalysis:
    """The job: start (or resume) the analysis, gather its checks, record the verdict. Rerunning a
    running analysis starts its checks over; a finished one is left as it is."""
    started = _start(analysis_id)
    if started is None:
        return CanaryAnalysis.objects.get(pk=analysis_id)
    checks, measured = _live_regression(started)
    client = (prometheus or _default_prometheus)()
    metric_checks, metric_timing, samples = _metrics(started, client, time.time() if now is None else now)
    checks += metric_checks
    measured.update(metric_timing)
    figures = plan_vs_measured(
        _plan_result(started.deployment), samples, measured, tolerance=PLAN_TOLERANCE, kv_saturated=KV_SATURATED
    )
    measured["plan"] = [figure.as_dict() for figure in figures]  # the request page shows them
    return _finish(analysis_id, checks, measured, figures=figures)


def _default_prometheus() -> PromClient | None:
    url = settings.CANARY_PROMETHEUS_URL
    return PromClient(url, timeout_s=float(settings.CANARY_HTTP_TIMEOUT_S)) if url else None


@write_service
def _finish(
    analysis_id: int,
    checks: list[Check],
    measured: dict[str, Any],
    error: str = "",
    figures: list[PlanFigure] | None = None,
) -> CanaryAnalysis:
    verdict = overall(checks)
    with transaction.atomic():
        analysis = CanaryAnalysis.objects.select_for_update().select_related("deployment").get(pk=analysis_id)
        if analysis.status != CanaryStatus.RUNNING:
            return analysis
        analysis.status = verdict
        analysis.checks = [check.as_dict() for check in checks]
        analysis.measurements = measured
        analysis.reference_eval = str(measured.get("reference_eval") or "")
        analysis.error = error
        analysis.finished_at = timezone.now()
        analysis.save()
        audit_record(
            actor="system:canary",
            action=AuditAction.CANARY_FINISHED,
            obj=analysis.deployment,
            data={
                "analysis": str(analysis.code),
                "verdict": verdict,
                "failed": [c.metric for c in checks if c.verdict == FAILED],
                "inconclusive": [c.metric for c in checks if c.verdict == "inconclusive"],
            },
        )
        if figures:
            _record_plan_figures(analysis, figures, MeasurementSource.CANARY)
            _plan_exceeded(analysis, figures)
            _flag_outside_interval(analysis, figures, MeasurementSource.CANARY)
    return analysis


def _record_plan_figures(analysis: CanaryAnalysis, figures: list[PlanFigure], source: str) -> None:
    """Figures against the plan as calibration rows (the canary's, or the fleet's after promotion)."""
    envelope = analysis.envelope or {}
    PlanMeasurement.objects.bulk_create(
        PlanMeasurement(
            deployment=analysis.deployment,
            analysis=analysis,
            source=source,
            cluster=analysis.cluster,
            engine=str(envelope.get("engine", ""))[:40],
            engine_version=str(envelope.get("engine_version") or "")[:40],
            gpu=str(envelope.get("gpu") or "")[:40],
            precision=str(envelope.get("precision") or "")[:20],
            layout={name: envelope.get(name) for name in ("tp", "pp", "ep") if envelope.get(name) is not None},
            figure=f.figure,
            planned=f.planned,
            low=f.low,
            high=f.high,
            measured=f.measured,
            client=f.client,
            limit=f.limit,
            ratio=f.ratio,
            catalog_ratio=f.catalog_ratio,
            position=f.position,
            verdict=f.verdict,
            detail=f.detail,
        )
        for f in figures
    )


def _plan_exceeded(analysis: CanaryAnalysis, figures: list[PlanFigure]) -> None:
    """Worse than planned by more than the tolerance: a finding for engineering (audited)."""
    worse = worse_than_planned(figures)
    if worse:
        audit_record(
            actor="system:canary",
            action=AuditAction.CANARY_PLAN_EXCEEDED,
            obj=analysis.deployment,
            data={
                "analysis": str(analysis.code),
                "cluster": analysis.cluster,
                "figures": {f.figure: {"planned": f.planned, "measured": f.measured, "limit": f.limit} for f in worse},
            },
        )


def _flag_outside_interval(
    analysis: CanaryAnalysis, figures: list[PlanFigure], source: str, already: frozenset[str] = frozenset()
) -> None:
    """A latency measured outside the plan's interval, either way: flagged to engineering (audited
    `canary.outside_interval`, a message to the engineering reviewers after commit; the request page shows
    it). `already`: the figures the fleet's previous check found outside, not flagged again while they stay."""
    outside = outside_interval(figures)
    if not outside or {f.figure for f in outside} == already:
        return
    audit_record(
        actor=f"system:{source}",
        action=AuditAction.CANARY_OUTSIDE_INTERVAL,
        obj=analysis.deployment,
        data={
            "analysis": str(analysis.code),
            "source": source,
            "cluster": analysis.cluster,
            "figures": {
                f.figure: {
                    "planned": f.planned,
                    "low": f.low,
                    "high": f.high,
                    "measured": f.measured,
                    "position": f.position,
                }
                for f in outside
            },
        },
    )
    where = f" on cluster {analysis.cluster}" if analysis.cluster else ""
    message = (
        f"The {'canary' if source == MeasurementSource.CANARY else 'fleet'} of this request measured outside its "
        f"capacity plan's 80% interval{where}: {outside_text(outside)}. The plan, or the calibration it took, is off "
        "for this cluster and engine; the team's next plans there are calibrated from these measurements once "
        "there are three."
    )
    deployment = analysis.deployment
    transaction.on_commit(lambda: notify_outside_interval(deployment, message))


def canary_analysis_timed_out(*, analysis_id: int, seconds: int) -> CanaryAnalysis:
    check = Check("regression", "analysis", None, None, None, None, FAILED, f"the analysis ran past {seconds} s")
    return _finish(analysis_id, [check], {}, error=check.detail)


@write_service
def canary_analysis_decide(*, analysis: CanaryAnalysis, decision: str, reason: str, actor: User) -> CanaryAnalysis:
    """An engineering reviewer promotes or rolls back an inconclusive analysis, with a reason."""
    if not has_role(actor, Role.ENGINEERING_REVIEWER):
        raise PermissionDeniedError("only an engineering reviewer promotes or rolls back a canary")
    if decision not in DECISIONS:
        raise invalid_input("decision", f"one of {', '.join(DECISIONS)}")
    reason = reason.strip()
    if not reason:
        raise invalid_input("reason", "say why: it is recorded with the decision")
    analysis = CanaryAnalysis.objects.select_for_update().select_related("deployment").get(pk=analysis.pk)
    if analysis.status != CanaryStatus.INCONCLUSIVE:
        raise ConflictError(f"the analysis is {analysis.status}: only an inconclusive one is decided by a reviewer")
    analysis.status = DECISIONS[decision]
    analysis.decided_by, analysis.decision_reason = actor, reason[:4000]
    analysis.save(update_fields=["status", "decided_by", "decision_reason", "updated_at"])
    audit_record(
        actor=actor,
        action=AuditAction.CANARY_DECIDED,
        obj=analysis.deployment,
        data={"analysis": str(analysis.code), "decision": decision, "reason": analysis.decision_reason},
    )
    return analysis


def canary_analyses_resume(*, older_than_s: int = 60) -> list[int]:
    """Beat: resend analyses never started, and restart those whose worker died mid-run."""
    now = timezone.now()
    pending = CanaryAnalysis.objects.filter(
        status=CanaryStatus.PENDING, created_at__lt=now - timedelta(seconds=older_than_s)
    )
    stale = CanaryAnalysis.objects.filter(
        status=CanaryStatus.RUNNING,
        started_at__lt=now - timedelta(seconds=settings.CANARY_ANALYSIS_SOFT_TIME_LIMIT_S + 60),
    )
    ids = sorted({*pending.values_list("pk", flat=True), *stale.values_list("pk", flat=True)})
    for analysis_id in ids:
        canary_analysis_send(analysis_id)
    return ids


# --- the fleet after promotion ------------------------------------------------------------------------


def promoted_deployments() -> list[CanaryAnalysis]:
    """Per approved request, its newest passed or promoted canary analysis that names the series of
    the deployment it became (`stable_selector`: after promotion the stable deployment runs the
    canary's weights, as Argo Rollouts and Flagger promote)."""
    analyses = (
        CanaryAnalysis.objects.filter(status__in=CANARY_OK, deployment__status=Status.APPROVED)
        .exclude(stable_selector={})
        .select_related("deployment")
        .order_by("deployment_id", "-created_at")
    )
    newest: dict[int, CanaryAnalysis] = {}
    for analysis in analyses:
        newest.setdefault(analysis.deployment_id, analysis)
    return list(newest.values())


def _fleet_samples(analysis: CanaryAnalysis, client: PromClient, now: float) -> Samples:
    queries = engine_queries(str(analysis.envelope.get("engine")), analysis.stable_selector)
    start = now - settings.FLEET_WINDOW_S
    # the alerting figures, and the latencies the calibration rows hold against the plan
    wanted = (*FLEET_METRICS, "ttft_seconds", "inter_token_latency_seconds")
    return {
        metric: client.samples(queries[metric], start=start, end=now, step=float(settings.FLEET_STEP_S))
        for metric in wanted
    }


def fleet_check_one(analysis: CanaryAnalysis, client: PromClient | None, now: float) -> FleetCheck:
    """Re-check one promoted deployment: its series over the window against the plan. Sustained
    beyond it: an alert (audited `fleet.alert`, a notification when newly alerting, /metrics) and,
    where FLEET_SEND_BACK_TO_REVIEW is set, the request back to review (audited as the transition)."""
    deployment = analysis.deployment
    plan = _plan_result(deployment)
    try:
        if client is None:
            raise PrometheusError("no Prometheus configured (CANARY_PROMETHEUS_URL)")
        samples = _fleet_samples(analysis, client, now)
    except (PrometheusError, ValueError) as exc:
        return FleetCheck.objects.create(deployment=deployment, analysis=analysis, status="no_data", error=str(exc))
    figures = judge_fleet(plan, samples, kv_saturated=KV_SATURATED, fraction=settings.FLEET_SUSTAINED_FRACTION)
    measured = plan_vs_measured(plan, samples, {}, tolerance=PLAN_TOLERANCE, kv_saturated=KV_SATURATED)
    return _fleet_record(analysis, figures, measured)


@write_service
def _fleet_record(analysis: CanaryAnalysis, figures: list[FleetFigure], measured: list[PlanFigure]) -> FleetCheck:
    """The check's writes, in one transaction once Prometheus has answered."""
    deployment = analysis.deployment
    alerts = [f for f in figures if f.alert]
    _record_plan_figures(analysis, measured, MeasurementSource.FLEET)
    previous = FleetCheck.objects.filter(deployment=deployment).order_by("-created_at").first()
    check = FleetCheck.objects.create(
        deployment=deployment,
        analysis=analysis,
        status="alert" if alerts else "ok",
        figures=[f.as_dict() for f in figures],
        alerts=[f.metric for f in alerts],
        plan=[f.as_dict() for f in measured],
    )
    # outside the plan's interval: flagged when the figures outside change, not at every re-check
    before = frozenset(
        str(f.get("figure")) for f in (previous.plan if previous is not None else []) if f.get("position") in OUTSIDE
    )
    _flag_outside_interval(analysis, measured, MeasurementSource.FLEET, already=before)
    if not alerts:
        return check
    newly = previous is None or set(previous.alerts) != set(check.alerts)
    message = "; ".join(f.detail for f in alerts)
    locked = deployment_lock(deployment)
    send_back = bool(settings.FLEET_SEND_BACK_TO_REVIEW) and locked.status == Status.APPROVED
    audit_record(
        actor="system:fleet",
        action=AuditAction.FLEET_ALERT,
        obj=locked,
        data={
            "check": str(check.code),
            "analysis": str(analysis.code),
            "alerts": {f.metric: {"value": f.value, "limit": f.limit, "breaching": f.breaching} for f in alerts},
            "sent_back": send_back,
        },
    )
    if send_back:
        reason = f"the fleet serves beyond its capacity plan: {message}"
        locked.flagged, locked.flag_reason = True, reason[:2000]
        locked.save(update_fields=["flagged", "flag_reason", "updated_at"])
        locked.notified_by_caller = True  # type: ignore[attr-defined]  # one message: the alert's
        deployment_transition(locked, Status.IN_REVIEW, "system:fleet", reason[:2000])
        check.sent_back = True
        check.save(update_fields=["sent_back", "updated_at"])
    if newly or send_back:
        transaction.on_commit(lambda: notify_serving_alert(locked, message))
    return check


def fleet_check_run(
    *, prometheus: Callable[[], PromClient | None] | None = None, now: float | None = None
) -> list[FleetCheck]:
    """Beat: re-check every promoted deployment."""
    client = (prometheus or _default_prometheus)()
    moment = time.time() if now is None else now
    return [fleet_check_one(analysis, client, moment) for analysis in promoted_deployments()]
