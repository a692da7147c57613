"""Capacity plans: request one (queued after commit), compute it (Celery), and turn it into findings."""

from __future__ import annotations

import dataclasses
import logging
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AnonymousUser, User
from django.db import models, transaction
from django.utils import timezone

from governance.audit.actions import AuditAction
from governance.audit.services import audit_record
from governance.calibration.selectors import calibration_profile_for, cluster_get, team_evidence_for
from governance.capacity.evidence import measured_for
from governance.capacity.models import CapacityPlan, CapacityPlanStatus
from governance.capacity.selectors import DEPLOYMENT_SUBJECT
from governance.capacity.serializers import plan_request_from
from governance.capacity.signals import plan_computed
from governance.core.errors import ApplicationError, invalid_input
from governance.core.services import write_service
from planner import __version__ as planner_version
from planner.calibrate.profile import CalibrationProfile
from planner.engines import engine_profile
from planner.intervals import TeamEvidence
from planner.measured import MeasuredEvidence
from planner.plan import plan

logger = logging.getLogger(__name__)


def planner_error(exc: ValueError) -> ApplicationError:
    """Planner errors read 'field: message'; answer 400 naming that field."""
    text = str(exc)
    field, _, message = text.partition(": ")
    name = field.split()[0] if message and " " not in field.strip() else "non_field_errors"
    return ApplicationError(f"Invalid input. {text}", extra={"fields": {name: [message or text]}})


def capacity_plan_run(inputs: dict[str, Any], *, team_id: int | None = None) -> dict[str, Any]:
    """Run the planner on validated inputs; returns the contract of docs/contracts.md. With a `cluster`, the
    throughput uses that cluster's latest calibration profile for the GPU (defaults when it has none), the
    memory figures its startup logs of this GPU, engine and release line (planner.intervals.TeamEvidence), and,
    for a team's plan (`team_id`: a request's), TPOT and TTFT the team's own canary and fleet measurements there
    (planner.measured.MeasuredEvidence, answered by the canary app: capacity.evidence)."""
    calibration: CalibrationProfile | None = None
    evidence: TeamEvidence | None = None
    measured: MeasuredEvidence | None = None
    if inputs.get("cluster"):
        # A direct call, not a signal: the plan's numbers depend on the answer (the calibration
        # app sits below this one for that reason: tests/test_layers.py).
        cluster = cluster_get(code=inputs["cluster"])
        if cluster is None:
            raise invalid_input("cluster", "no such cluster")
        calibration = calibration_profile_for(cluster=cluster, gpu=inputs["gpu"])
        try:
            release = engine_profile(inputs.get("engine", "vllm"), inputs.get("engine_version")).release
        except ValueError as exc:
            raise planner_error(exc) from None
        evidence = team_evidence_for(
            cluster=cluster,
            gpu=inputs["gpu"],
            engine=inputs.get("engine", "vllm"),
            release_line=f"{release[0]}.{release[1]}",
        )
        if team_id is not None:  # a plan that is no team's (a what-if) takes no team's measurements
            measured = measured_for(
                team_id=team_id,
                cluster=cluster.name,
                gpu=inputs["gpu"],
                engine=inputs.get("engine", "vllm"),
                release_line=f"{release[0]}.{release[1]}",
            )
    try:
        request = dataclasses.replace(plan_request_from(inputs, calibration), evidence=evidence, measured=measured)
        return plan(request).as_contract()
    except ValueError as exc:
        raise planner_error(exc) from None


@write_service
def capacity_plan_request(
    *, inputs: dict[str, Any], actor: User | AnonymousUser | None, subject: models.Model | None = None
) -> CapacityPlan:
    """Store a pending plan and queue its computation once the transaction commits."""
    with transaction.atomic():
        if subject is not None and subject._meta.label_lower != DEPLOYMENT_SUBJECT:
            raise ValueError(
                f"subject: a capacity plan is evidence of a deployment request, not a {subject._meta.label}"
            )
        stored = CapacityPlan.objects.create(
            inputs=inputs,
            deployment_id=subject.pk if subject is not None else None,
            requested_by=actor if isinstance(actor, User) else None,
        )
        transaction.on_commit(lambda: capacity_plan_send(stored.pk))
    return stored


def capacity_plan_send(plan_id: int) -> bool:
    """Queue the computation; on a broker outage the plan stays unsent and beat sends it later."""
    from governance.capacity.tasks import capacity_plan_compute_task

    try:
        capacity_plan_compute_task.delay(plan_id)
    except Exception:  # kombu's OperationalError, redis' ConnectionError, …: the plan is saved
        logger.warning("capacity plan not sent; beat re-sends it", extra={"plan": plan_id}, exc_info=True)
        return False
    CapacityPlan.objects.filter(pk=plan_id).update(sent_at=timezone.now())
    return True


def capacity_plans_resume(*, now: datetime | None = None) -> list[int]:
    """Beat: send again the pending plans that were never sent (the broker was down at commit)
    or whose last send is a lease old with no live claim (a worker killed mid-plan, a lost message)."""
    now = now or timezone.now()
    lease = timedelta(seconds=settings.CAPACITY_PLAN_LEASE_S)
    due = CapacityPlan.objects.filter(status=CapacityPlanStatus.PENDING).filter(
        models.Q(sent_at__isnull=True, created_at__lte=now - timedelta(seconds=settings.CAPACITY_PLAN_SEND_GRACE_S))
        | models.Q(sent_at__lte=now - lease, claimed_at__isnull=True)
        | models.Q(sent_at__lte=now - lease, claimed_at__lte=now - lease)
    )
    return [
        plan_id for plan_id in due.order_by("created_at").values_list("pk", flat=True) if capacity_plan_send(plan_id)
    ]


def capacity_plan_claim(plan_id: int) -> datetime | None:
    """Claim a pending plan for this worker: the claim's time, or None when it is finished or
    another worker's lease is still running."""
    now = timezone.now()
    lease_expired = models.Q(claimed_at__isnull=True) | models.Q(
        claimed_at__lte=now - timedelta(seconds=settings.CAPACITY_PLAN_LEASE_S)
    )
    claimed = CapacityPlan.objects.filter(lease_expired, pk=plan_id, status=CapacityPlanStatus.PENDING)
    return now if claimed.update(claimed_at=now) else None


@write_service
def capacity_plan_finish(*, plan_id: int, claimed_at: datetime, result: dict[str, Any] | None, error: str) -> bool:
    """Store the outcome of this worker's claim (`claimed_at`). False, and nothing written, when
    the plan was finished or re-claimed meanwhile (this worker's lease lapsed)."""
    with transaction.atomic():
        stored = CapacityPlan.objects.select_for_update(of=("self",)).select_related("deployment").get(pk=plan_id)
        if stored.status != CapacityPlanStatus.PENDING or stored.claimed_at != claimed_at:
            return False
        stored.result = result
        stored.fits = None if result is None else bool(result["fits"])
        stored.status = CapacityPlanStatus.FAILED if result is None else CapacityPlanStatus.DONE
        stored.error = error
        stored.planner_version = planner_version
        stored.computed_at = timezone.now()
        stored.save(update_fields=["result", "fits", "status", "error", "planner_version", "computed_at", "updated_at"])
        audit_record(
            actor="system:capacity",
            action=AuditAction.CAPACITY_PLAN_COMPUTED,
            obj=stored.deployment if stored.deployment is not None else stored,
            data={
                "plan": str(stored.code),
                "status": stored.status,
                "fits": stored.fits,
                "error": error,
                "parallel": (result or {}).get("parallel"),
            },
        )
        transaction.on_commit(lambda: plan_computed.send(sender=CapacityPlan, plan=stored))
    return True


def capacity_plan_timed_out(*, plan_id: int, seconds: int) -> CapacityPlan:
    """The computing worker ran past its time limit: the plan fails (a redelivery would only
    run past it again)."""
    stored = CapacityPlan.objects.get(pk=plan_id)
    if stored.status == CapacityPlanStatus.PENDING and stored.claimed_at is not None:
        error = f"the planner ran longer than {seconds} s"
        capacity_plan_finish(plan_id=plan_id, claimed_at=stored.claimed_at, result=None, error=error)
    return CapacityPlan.objects.get(pk=plan_id)


def capacity_plan_compute(*, plan_id: int) -> CapacityPlan:
    """Compute a pending plan under a lease: a redelivered task returns early while another
    worker's claim is live, computes again once it lapsed, and never touches a finished plan."""
    claimed_at = capacity_plan_claim(plan_id)
    stored = CapacityPlan.objects.get(pk=plan_id)
    if claimed_at is None:
        return stored
    # The request's team (none for a what-if plan): its canary measurements are the plan's to take.
    team_id = CapacityPlan.objects.filter(pk=plan_id).values_list("deployment__team_id", flat=True).first()
    try:
        result: dict[str, Any] | None = capacity_plan_run(stored.inputs, team_id=team_id)
        error = ""
    except ApplicationError as exc:
        result, error = None, exc.message
    capacity_plan_finish(plan_id=plan_id, claimed_at=claimed_at, result=result, error=error)
    return CapacityPlan.objects.get(pk=plan_id)
