"""E-mail to the people a request concerns, through Django's mail settings (EMAIL_BACKEND).

Callers queue these with `transaction.on_commit`, so nobody hears of a change that rolled back.
Each recipient gets their own message (addresses are not shared); users without an address are
skipped; a mail server that fails is logged, never raised into the request that changed."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.core.mail import send_mass_mail

from governance.core.roles import Role
from governance.deployments.choices import Status
from governance.deployments.models import DeploymentRequest, Waiver

logger = logging.getLogger(__name__)

# A request in these states waits for reviewers; in these it has been decided for its requester.
WAITING_FOR_REVIEWERS = (Status.SUBMITTED, Status.IN_REVIEW)
DECIDED = (Status.APPROVED, Status.REJECTED, Status.REVOKED, Status.EXPIRED)
SUBJECT_PREFIX = "[governance]"


def _addresses(users: Iterable[User], *, exclude: Iterable[Any] = ()) -> list[str]:
    skip = {pk for pk in exclude if pk is not None}
    seen: list[str] = []
    for user in users:
        if user.pk in skip or not user.is_active or not user.email or user.email in seen:
            continue
        seen.append(user.email)
    return seen


def reviewers(*roles: str) -> list[User]:
    return list(
        User.objects.filter(groups__name__in=roles or (Role.LEGAL_REVIEWER, Role.ENGINEERING_REVIEWER))
        .distinct()
        .order_by("username")
    )


def concerned_requesters(deployment: DeploymentRequest) -> list[User]:
    """The requester, and the requesters of the owning team."""
    team = list(
        deployment.team.members.filter(groups__name=Role.REQUESTER).exclude(pk=deployment.requester_id).distinct()
    )
    return [deployment.requester, *sorted(team, key=lambda user: user.username)]


def _send(subject: str, body: str, recipients: list[str], deployment: DeploymentRequest) -> int:
    if not recipients:
        return 0
    messages = [(f"{SUBJECT_PREFIX} {subject}", body, settings.DEFAULT_FROM_EMAIL, [to]) for to in recipients]
    try:
        return send_mass_mail(messages, fail_silently=False)
    except OSError:
        logger.exception("could not send notifications", extra={"deployment": str(deployment.code)})
        return 0


def _about(deployment: DeploymentRequest) -> str:
    return (
        f"Deployment request: {deployment.product_name} ({deployment.code})\n"
        f"Team: {deployment.team.name}\nRequester: {deployment.requester.username}\n"
        f"Status: {deployment.status}\nEvidence digest: {deployment.evidence_digest}\n"
        f"API: /api/v1/deployments/{deployment.code}\n"
    )


def notify_status_changed(deployment: DeploymentRequest, previous: str, actor_pk: Any, reason: str) -> int:
    """Reviewers when a request waits for them; its requesters when it is decided."""
    deployment = DeploymentRequest.objects.select_related("team", "requester").get(pk=deployment.pk)
    if deployment.status in WAITING_FOR_REVIEWERS:
        recipients = _addresses(reviewers(), exclude=(actor_pk, deployment.requester_id))
        subject = f"{deployment.product_name} waits for review ({deployment.status})"
        body = f"A deployment request waits for your review ({previous} -> {deployment.status}: {reason}).\n\n"
        return _send(subject, body + _about(deployment), recipients, deployment)
    if deployment.status in DECIDED:
        recipients = _addresses(concerned_requesters(deployment), exclude=(actor_pk,))
        subject = f"{deployment.product_name} is {deployment.status}"
        body = f"Your deployment request is {deployment.status} ({reason}).\n\n"
        return _send(subject, body + _about(deployment), recipients, deployment)
    return 0


def notify_threshold_crossed(deployment: DeploymentRequest, message: str) -> int:
    """Everyone concerned: the reviewers who must look again and the team's requesters."""
    deployment = DeploymentRequest.objects.select_related("team", "requester").get(pk=deployment.pk)
    recipients = _addresses([*reviewers(), *concerned_requesters(deployment)])
    subject = f"{deployment.product_name} needs review: a license threshold was crossed"
    return _send(subject, f"{message}\n\n{_about(deployment)}", recipients, deployment)


def notify_serving_alert(deployment: DeploymentRequest, message: str) -> int:
    """A promoted deployment serving beyond its plan (the canary app's fleet check): the engineering
    reviewers, who re-plan or roll back, and the team's requesters."""
    deployment = DeploymentRequest.objects.select_related("team", "requester").get(pk=deployment.pk)
    recipients = _addresses([*reviewers(Role.ENGINEERING_REVIEWER), *concerned_requesters(deployment)])
    subject = f"{deployment.product_name} serves beyond its capacity plan"
    return _send(subject, f"{message}\n\n{_about(deployment)}", recipients, deployment)


def notify_outside_interval(deployment: DeploymentRequest, message: str) -> int:
    """A canary's or the fleet's latency measured outside the capacity plan's interval (the canary app): the
    engineering reviewers, whose call it is whether the plan or its calibration is off for the cluster."""
    deployment = DeploymentRequest.objects.select_related("team", "requester").get(pk=deployment.pk)
    recipients = _addresses(reviewers(Role.ENGINEERING_REVIEWER))
    subject = f"{deployment.product_name} measured outside its capacity plan's interval"
    return _send(subject, f"{message}\n\n{_about(deployment)}", recipients, deployment)


def notify_waiver_proposed(waiver: Waiver) -> int:
    """The other legal reviewers: a waiver of a blocker waits for their confirmation."""
    waiver = Waiver.objects.select_related("request__team", "request__requester", "granted_by").get(pk=waiver.pk)
    deployment = waiver.request
    recipients = _addresses(reviewers(Role.LEGAL_REVIEWER), exclude=(waiver.granted_by_id, deployment.requester_id))
    subject = f"{deployment.product_name}: a waiver of a blocker waits for a second legal reviewer"
    body = (
        f"{waiver.granted_by.username} proposes to waive {waiver.license_key} {waiver.finding_code} "
        f"({waiver.clause}) until {waiver.expires_at.isoformat()}: {waiver.reason}\n"
        f"Licensor's permission: {waiver.permission_name} (SHA-256 {waiver.permission_sha256})\n"
        f"Confirm: POST /api/v1/deployments/{deployment.code}/waivers/{waiver.code}/confirm\n\n"
    )
    return _send(subject, body + _about(deployment), recipients, deployment)
