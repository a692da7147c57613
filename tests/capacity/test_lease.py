"""A capacity plan is claimed with a lease (issue 18): a worker killed mid-plan leaves the claim to
expire, and the redelivered task (or beat's re-queue) computes it; a finished plan never again."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.conf import settings
from django.utils import timezone

from governance.audit.actions import AuditAction
from governance.audit.models import AuditEvent
from governance.capacity.models import CapacityPlan, CapacityPlanStatus
from governance.capacity.services import capacity_plan_claim, capacity_plan_compute, capacity_plans_resume
from governance.capacity.tasks import capacity_plan_compute_task

INPUTS = {"model": "qwen3-30b-a3b", "precision": "fp8", "gpu": "h200", "max_model_len": 32768}


def _computed_events() -> int:
    return AuditEvent.objects.filter(action=AuditAction.CAPACITY_PLAN_COMPUTED).count()


@pytest.mark.django_db
def test_a_plan_whose_worker_died_is_computed_by_the_redelivery_after_the_lease() -> None:
    stored = CapacityPlan.objects.create(inputs=INPUTS)
    # The first delivery claims the plan, then its worker is SIGKILLed before it writes anything.
    assert capacity_plan_claim(stored.pk) is not None
    # Redelivered within the lease: another worker may still be computing it, so it waits.
    assert capacity_plan_compute_task(stored.pk) == CapacityPlanStatus.PENDING
    assert CapacityPlan.objects.get(pk=stored.pk).status == CapacityPlanStatus.PENDING
    # Redelivered after the lease: computed.
    expired = timezone.now() - timedelta(seconds=settings.CAPACITY_PLAN_LEASE_S + 1)
    CapacityPlan.objects.filter(pk=stored.pk).update(claimed_at=expired)
    assert capacity_plan_compute_task(stored.pk) == CapacityPlanStatus.DONE
    done = CapacityPlan.objects.get(pk=stored.pk)
    assert done.fits is True
    assert done.computed_at is not None
    assert _computed_events() == 1


@pytest.mark.django_db
def test_a_finished_plan_is_never_recomputed_even_after_its_lease() -> None:
    stored = CapacityPlan.objects.create(inputs=INPUTS)
    done = capacity_plan_compute(plan_id=stored.pk)
    CapacityPlan.objects.filter(pk=stored.pk).update(claimed_at=timezone.now() - timedelta(days=1))
    assert capacity_plan_compute(plan_id=stored.pk).computed_at == done.computed_at
    assert _computed_events() == 1


@pytest.mark.django_db
def test_a_stale_worker_cannot_finish_a_plan_another_worker_reclaimed() -> None:
    stored = CapacityPlan.objects.create(inputs=INPUTS)
    stale = capacity_plan_claim(stored.pk)
    assert stale is not None
    expired = timezone.now() - timedelta(seconds=settings.CAPACITY_PLAN_LEASE_S + 1)
    CapacityPlan.objects.filter(pk=stored.pk).update(claimed_at=expired)
    assert capacity_plan_compute(plan_id=stored.pk).status == CapacityPlanStatus.DONE
    # The first worker comes back from a long pause: its claim is gone, nothing is written twice.
    from governance.capacity.services import capacity_plan_finish

    assert capacity_plan_finish(plan_id=stored.pk, claimed_at=stale, result=None, error="late") is False
    assert CapacityPlan.objects.get(pk=stored.pk).status == CapacityPlanStatus.DONE
    assert _computed_events() == 1


@pytest.mark.django_db
def test_beat_requeues_plans_never_sent_or_whose_lease_expired() -> None:
    now = timezone.now()
    lease = timedelta(seconds=settings.CAPACITY_PLAN_LEASE_S + 1)
    never_sent = CapacityPlan.objects.create(inputs=INPUTS)
    CapacityPlan.objects.filter(pk=never_sent.pk).update(created_at=now - timedelta(minutes=5))
    just_created = CapacityPlan.objects.create(inputs=INPUTS)  # its on_commit send is still due
    lease_expired = CapacityPlan.objects.create(inputs=INPUTS, sent_at=now - lease, claimed_at=now - lease)
    being_computed = CapacityPlan.objects.create(inputs=INPUTS, sent_at=now, claimed_at=now)
    done = CapacityPlan.objects.create(inputs=INPUTS, sent_at=now - lease, status=CapacityPlanStatus.DONE)
    sent = capacity_plans_resume(now=now)
    assert sorted(sent) == sorted([never_sent.pk, lease_expired.pk])
    assert CapacityPlan.objects.get(pk=never_sent.pk).sent_at is not None
    assert {just_created.pk, being_computed.pk, done.pk}.isdisjoint(sent)
    # Sent again just now: the next beat leaves them alone until another lease has passed.
    assert capacity_plans_resume(now=now) == []
    assert "capacity-resume" in settings.CELERY_BEAT_SCHEDULE
