"""Capacity plans: request one (queued after commit), compute it (Celery), and turn it into findings."""

from __future__ import annotations

from typing import Any, cast

from django.contrib.auth.models import AnonymousUser, User
from django.db import models, transaction
from django.utils import timezone

from governance.audit.actions import AuditAction
from governance.audit.services import audit_record
from governance.capacity.models import CapacityPlan, CapacityPlanStatus
from governance.capacity.serializers import plan_request_from
from governance.capacity.signals import calibration_wanted, plan_computed
from governance.core.errors import ApplicationError, invalid_input
from planner import __version__ as planner_version
from planner.calibrate.profile import CalibrationProfile
from planner.plan import plan


def planner_error(exc: ValueError) -> ApplicationError:
    """Planner errors read 'field: message'; answer 400 naming that field."""
    text = str(exc)
    field, _, message = text.partition(": ")
    name = field.split()[0] if message and " " not in field.strip() else "non_field_errors"
    return ApplicationError(f"Invalid input. {text}", extra={"fields": {name: [message or text]}})


def capacity_plan_run(inputs: dict[str, Any]) -> dict[str, Any]:
    """Run the planner on validated inputs; returns the contract of docs/contracts.md. With a `cluster`, the
    throughput uses that cluster's latest calibration profile for the GPU (defaults when it has none)."""
    calibration: CalibrationProfile | None = None
    if inputs.get("cluster"):
        answers = calibration_wanted.send(sender=CapacityPlan, cluster=inputs["cluster"], gpu=inputs["gpu"])
        if not answers:
            raise invalid_input("cluster", "calibration profiles are not installed on this service")
        profiles = [cast(CalibrationProfile, profile) for _receiver, profile in answers if profile is not None]
        calibration = profiles[0] if profiles else None
    try:
        return plan(plan_request_from(inputs, calibration)).as_contract()
    except ValueError as exc:
        raise planner_error(exc) from None


def capacity_plan_request(
    *, inputs: dict[str, Any], actor: User | AnonymousUser | None, subject: models.Model | None = None
) -> CapacityPlan:
    """Store a pending plan and queue its computation once the transaction commits."""
    from governance.capacity.tasks import capacity_plan_compute_task

    with transaction.atomic():
        stored = CapacityPlan.objects.create(
            inputs=inputs,
            subject_type=subject._meta.label_lower if subject is not None else "",
            subject_id=str(getattr(subject, "code", "")) if subject is not None else "",
            requested_by=actor if isinstance(actor, User) else None,
        )
        transaction.on_commit(lambda: capacity_plan_compute_task.delay(stored.pk))
    return stored


def capacity_plan_compute(*, plan_id: int) -> CapacityPlan:
    """Compute a pending plan. Claimed with a conditional UPDATE so a redelivered task does no double work."""
    claimed = CapacityPlan.objects.filter(pk=plan_id, status=CapacityPlanStatus.PENDING, computed_at__isnull=True)
    if not claimed.update(computed_at=timezone.now()):
        return CapacityPlan.objects.get(pk=plan_id)
    stored = CapacityPlan.objects.get(pk=plan_id)
    try:
        result: dict[str, Any] | None = capacity_plan_run(stored.inputs)
        error = ""
    except ApplicationError as exc:
        result, error = None, exc.message
    with transaction.atomic():
        stored.result = result
        stored.fits = None if result is None else bool(result["fits"])
        stored.status = CapacityPlanStatus.FAILED if result is None else CapacityPlanStatus.DONE
        stored.error = error
        stored.planner_version = planner_version
        stored.save(update_fields=["result", "fits", "status", "error", "planner_version", "updated_at"])
        audit_record(
            actor="system:capacity",
            action=AuditAction.CAPACITY_PLAN_COMPUTED,
            obj=(stored.subject_type, stored.subject_id) if stored.subject_type else stored,
            data={
                "plan": str(stored.code),
                "status": stored.status,
                "fits": stored.fits,
                "error": error,
                "parallel": (result or {}).get("parallel"),
            },
        )
        transaction.on_commit(lambda: plan_computed.send(sender=CapacityPlan, plan=stored))
    return stored
