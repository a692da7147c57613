"""Reads, with object permissions applied in the query: what a user may not see is not found."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

import django_filters
from django.db.models import Prefetch, Q, QuerySet
from django.utils import timezone

from governance.capacity.models import CapacityPlan
from governance.core.errors import NotFoundError
from governance.core.models import ApiToken, Team
from governance.core.roles import Role, has_role
from governance.core.tokens import token_covers_deployment
from governance.core.visibility import UUIDText
from governance.deployments.choices import SignOffDecision, Status
from governance.deployments.models import DeploymentRequest, ObligationItem, SignOff, Waiver
from governance.deployments.readiness import ReadinessState, Reason, Signature, readiness
from governance.evaluations.evals import eval_running
from governance.evaluations.models import EvalRun


def deployments_visible_condition(user: Any) -> Q:
    """Which requests the user may see, as a filter. The team test is a subquery on the user's
    memberships, not a join: no duplicate rows, so no DISTINCT (which sorts every visible row,
    evidence documents included, before a list page can order and limit)."""
    if has_role(user, Role.AUDITOR, Role.ADMIN):
        return Q()
    condition = Q(pk__in=[])
    if has_role(user, Role.LEGAL_REVIEWER, Role.ENGINEERING_REVIEWER):
        condition |= ~Q(status=Status.DRAFT)  # reviewers see what was submitted, any team
    if has_role(user, Role.REQUESTER):
        condition |= Q(team__in=Team.members.through.objects.filter(user_id=user.pk).values("team_id"))
    return condition


def deployments_visible_to(user: Any) -> QuerySet[DeploymentRequest]:
    deployments = DeploymentRequest.objects.select_related("team", "artifact", "requester")
    return deployments.filter(deployments_visible_condition(user))


class DeploymentFilter(django_filters.FilterSet):
    status = django_filters.ChoiceFilter(choices=Status.choices)
    team = django_filters.CharFilter(field_name="team__name", help_text="the team's name")
    product = django_filters.CharFilter(field_name="product_name", lookup_expr="icontains", help_text="substring")
    flagged = django_filters.ChoiceFilter(
        choices=[("true", "true"), ("false", "false")], method="filter_flagged", help_text="true or false"
    )

    class Meta:
        model = DeploymentRequest
        fields = ["status", "team", "product", "flagged"]

    def filter_flagged(
        self, queryset: QuerySet[DeploymentRequest], name: str, value: str
    ) -> QuerySet[DeploymentRequest]:
        return queryset.filter(flagged=value == "true")


def deployments_list(user: Any) -> QuerySet[DeploymentRequest]:
    """The list API's rows (filtered by DeploymentFilter), newest first, with every collection the
    output reads prefetched: a page costs the same number of queries for 2 rows or 50. The latest
    capacity plans (no foreign key: a plan names its subject) come from
    deployments_attach_capacity_plans once the page is read."""
    return (
        deployments_visible_to(user)
        .prefetch_related(
            "obligations",
            Prefetch("waivers", queryset=Waiver.objects.select_related("granted_by", "confirmed_by")),
            Prefetch("signoffs", queryset=SignOff.objects.select_related("signer")),
            Prefetch("eval_runs", queryset=EvalRun.objects.order_by("created_at")),
        )
        .order_by("-created_at")
    )


_LATEST_PLAN = "_latest_capacity_plan"  # set on a request by deployments_attach_capacity_plans


def deployments_attach_capacity_plans(deployments: Iterable[DeploymentRequest]) -> None:
    """Load the latest capacity plan of each request in two queries; latest_capacity_plan reads it."""
    rows = list(deployments)
    latest: dict[int, int] = {}
    for pk, deployment_id in (
        CapacityPlan.objects.filter(deployment__in=[d.pk for d in rows])
        .order_by("deployment_id", "-created_at")
        .values_list("pk", "deployment_id")
    ):
        latest.setdefault(deployment_id, pk)
    plans = CapacityPlan.objects.in_bulk(list(latest.values()))
    for deployment in rows:
        plan_pk = latest.get(deployment.pk)
        setattr(deployment, _LATEST_PLAN, plans.get(plan_pk) if plan_pk is not None else None)


def _prefetched(deployment: DeploymentRequest, name: str) -> list[Any] | None:
    """The rows of a relation deployments_list prefetched, or None when they were not."""
    cache = getattr(deployment, "_prefetched_objects_cache", {})
    return list(cache[name]) if name in cache else None


def deployments_hidden_from(user: Any) -> QuerySet[DeploymentRequest, str]:
    """The codes, as text, of the requests this user would get 404 for (core.visibility, for the
    audit trail): a query the audit read runs as its subquery, not a list of every hidden code."""
    hidden = DeploymentRequest.objects.exclude(deployments_visible_condition(user))
    return hidden.annotate(code_text=UUIDText("code")).values_list("code_text", flat=True)


def deployment_visible(user: Any, code: str) -> bool:
    """Whether the request exists and the user may see it (core.visibility, for writes that name one)."""
    return deployments_visible_to(user).filter(code=code).exists()


def deployment_get(user: Any, code: Any) -> DeploymentRequest:
    found = deployments_visible_to(user).filter(code=code).first()
    if found is None:
        raise NotFoundError("no such deployment request")
    return found


def deployment_get_for_usage(user: Any, code: Any, *, token: ApiToken | None) -> DeploymentRequest:
    """Usage reports come from billing/CI with a scoped token (authentication let it reach the
    usage endpoint only with usage:write), for the team and requests it was issued for; or from
    a requester of the owning team."""
    if token is not None and token.scopes:
        found = DeploymentRequest.objects.filter(code=code).first()
        if found is not None and not token_covers_deployment(token, found):
            found = None
    else:
        found = deployments_visible_to(user).filter(code=code, team__members=user).first()
    if found is None:
        raise NotFoundError("no such deployment request")
    return found


def obligation_get(deployment: DeploymentRequest, code: Any) -> ObligationItem:
    """An obligation of a request the caller already may see (deployment_get)."""
    found = deployment.obligations.filter(code=code).first()
    if found is None:
        raise NotFoundError("no such obligation on this request")
    return found


def deployment_attach_capacity_plan(deployment: DeploymentRequest) -> CapacityPlan | None:
    """Read the request's latest capacity plan once (one query) and keep it on the request, so
    that latest_capacity_plan and deployment_blockers read it from there."""
    plan = latest_capacity_plan(deployment)
    setattr(deployment, _LATEST_PLAN, plan)
    return plan


def latest_capacity_plan(deployment: DeploymentRequest) -> CapacityPlan | None:
    if _LATEST_PLAN in vars(deployment):
        attached: CapacityPlan | None = vars(deployment)[_LATEST_PLAN]
        return attached
    return CapacityPlan.objects.filter(deployment=deployment).order_by("-created_at").first()


def active_waivers(deployment: DeploymentRequest, now: datetime | None = None) -> list[Waiver]:
    """Unexpired waivers in force: a proposed waiver of a blocker counts only once a second legal
    reviewer confirmed it."""
    now = now or timezone.now()
    prefetched = _prefetched(deployment, "waivers")
    if prefetched is not None:
        return sorted(
            (w for w in prefetched if w.in_force(now)),
            key=lambda w: w.created_at,
        )
    return list(
        deployment.waivers.filter(Waiver.in_force_q(now))
        .select_related("granted_by", "confirmed_by")
        .order_by("created_at")
    )


def deployment_obligations(deployment: DeploymentRequest) -> list[ObligationItem]:
    prefetched = _prefetched(deployment, "obligations")
    return prefetched if prefetched is not None else list(deployment.obligations.all())


def deployment_waivers(deployment: DeploymentRequest) -> list[Waiver]:
    """Every waiver, expired or not, with who granted and confirmed it."""
    prefetched = _prefetched(deployment, "waivers")
    if prefetched is not None:
        return prefetched
    return list(deployment.waivers.select_related("granted_by", "confirmed_by"))


def deployment_signoffs(deployment: DeploymentRequest) -> list[SignOff]:
    """Every sign-off of a request, voided ones included, oldest first."""
    prefetched = _prefetched(deployment, "signoffs")
    return prefetched if prefetched is not None else list(deployment.signoffs.select_related("signer"))


def deployment_live_signoffs(deployment: DeploymentRequest) -> QuerySet[SignOff]:
    """The sign-offs not voided (on any digest: the void-on-change path leaves none on an old one)."""
    return SignOff.objects.filter(deployment=deployment, voided_at__isnull=True).select_related("signer")


def waiver_get(deployment: DeploymentRequest, code: Any) -> Waiver:
    """A waiver of a request the caller already may see (deployment_get)."""
    found = deployment.waivers.filter(code=code).first()
    if found is None:
        raise NotFoundError("no such waiver on this request")
    return found


def deployment_readiness_state(deployment: DeploymentRequest) -> ReadinessState:
    """What the readiness rule reads, with the ORM: the stored evidence, each role's approving
    sign-off (the live one, else the latest voided one) and the usage flag. The gate reads
    the same in its own single statement (gate.selectors); a parity test runs both."""
    approvals = sorted(
        (s for s in deployment_signoffs(deployment) if s.decision == SignOffDecision.APPROVE),
        key=lambda s: (s.voided_at is None, s.created_at),  # live last, newest last
    )
    signatures: dict[str, Signature] = {}
    for signoff in approvals:
        signatures[signoff.role] = Signature(
            role=signoff.role, evidence_digest=signoff.evidence_digest, voided=signoff.voided_at is not None
        )
    return ReadinessState(
        evidence=deployment.evidence or {},
        evidence_digest=deployment.evidence_digest,
        signatures=signatures,
        flagged=deployment.flagged,
        flag_reason=deployment.flag_reason,
        running_evals=tuple(eval_running(deployment)),
    )


def deployment_readiness(deployment: DeploymentRequest, now: datetime | None = None) -> list[Reason]:
    """The readiness rule's reasons for this request (deployments.readiness)."""
    return readiness(deployment_readiness_state(deployment), now or timezone.now())


def deployment_blockers(deployment: DeploymentRequest) -> list[dict[str, Any]]:
    """What stands between this request and approval, as the page and the API show it: the
    readiness rule's reasons, each with who must act (the gate's reasons less its deploy-time ones)."""
    return [reason.as_blocker() for reason in deployment_readiness(deployment)]
