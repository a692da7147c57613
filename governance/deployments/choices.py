from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from django.db import models

from planner.engines.registry import DEFAULT_ENGINE
from planner.engines.registry import ENGINE_CHOICES as REGISTERED_ENGINES
from planner.specs import precisions

__all__ = ["DEFAULT_ENGINE", "ENGINE_CHOICES", "SERVING_DEFAULTS"]

# The precisions a serving plan (and the gate's serving config) names: the planner's catalog.
SERVING_PRECISIONS: list[str] = sorted(precisions())


class Status(models.TextChoices):
    DRAFT = "draft"
    SUBMITTED = "submitted"
    IN_REVIEW = "in_review"
    APPROVED = "approved"
    REJECTED = "rejected"
    REVOKED = "revoked"
    EXPIRED = "expired"
    WITHDRAWN = "withdrawn"  # by its requester or a team lead, before any review began


# The only allowed status changes (django-oscar style); deployment_transition() enforces them.
TRANSITIONS: dict[str, tuple[str, ...]] = {
    Status.DRAFT: (Status.SUBMITTED, Status.WITHDRAWN),
    Status.SUBMITTED: (Status.IN_REVIEW, Status.WITHDRAWN),
    Status.IN_REVIEW: (Status.APPROVED, Status.REJECTED),
    Status.APPROVED: (Status.REVOKED, Status.EXPIRED, Status.IN_REVIEW),  # in_review: evidence changed
    Status.REJECTED: (),
    Status.REVOKED: (),
    Status.EXPIRED: (),
    Status.WITHDRAWN: (),
}
# Closed: a status no transition leaves. No new evidence, action or reminder concerns such a request
# (the evidence hooks, the web's actions and queues ask this; derived, so a new status cannot be missed).
TERMINAL: tuple[str, ...] = tuple(status for status, onward in TRANSITIONS.items() if not onward)
EDITABLE = (Status.DRAFT, Status.SUBMITTED, Status.IN_REVIEW, Status.APPROVED)


class ReviewRole(models.TextChoices):
    """The role a reviewer signs off as (the approvals app signs the packet field of that role)."""

    LEGAL = "legal"
    ENGINEERING = "engineering"


class SignOffDecision(models.TextChoices):
    """What a reviewer decided on one evidence digest. Not the license engine's decision
    (licenses.choices.LicenseDecision) nor the gate's answer (gate.choices.GateOutcome)."""

    APPROVE = "approve"
    REJECT = "reject"


class AuthMethod(models.TextChoices):
    """How the signer re-authenticated for a sign-off (recorded on it and its audit event)."""

    PASSWORD = "password", "local password re-entered"
    OIDC_STEP_UP = "oidc_step_up", "fresh sign-in at the identity provider (step-up)"


class ObligationStatus(models.TextChoices):
    OPEN = "open"
    ACKNOWLEDGED = "acknowledged"  # the requester said how it is met
    ACCEPTED = "accepted"  # legal accepted that answer
    REJECTED = "rejected"  # legal did not; the requester answers again
    SUPERSEDED = "superseded"  # the finding went away on re-evaluation


# The serving engines a request, the gate and an eval may name, with their display names: one module
# each in planner/engines (registry.py lists them; `transformers serve` is the embedded default's and
# CI's CPU engine). Stored as the name.
ENGINE_CHOICES: list[tuple[str, str]] = list(REGISTERED_ENGINES)
# What a serving plan means where it leaves a field out: the request's serializer fills these in, the
# planner's inputs and the approved envelope (deployments.envelope, which the gate compares) read them.
SERVING_DEFAULTS: Mapping[str, Any] = MappingProxyType(
    {"engine": DEFAULT_ENGINE, "kv_dtype": "bf16", "gpu_memory_utilization": 0.9, "concurrency": 1}
)
