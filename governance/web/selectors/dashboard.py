"""The dashboard and the request list: rows of requests, counted and queued by role."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import timedelta
from itertools import chain
from typing import Any

from django.db import connection
from django.db.models import CharField, Count, Exists, OuterRef, Q, QuerySet, Value
from django.urls import reverse
from django.utils import timezone

from governance.core.models import Team
from governance.core.roles import Role, has_role, user_roles
from governance.deployments.choices import TERMINAL, ObligationStatus, ReviewRole, Status
from governance.deployments.models import DeploymentRequest, ObligationItem, SignOff
from governance.deployments.selectors import deployments_visible_condition
from governance.evaluations.models import ACTIVE_STATES, EvalRun, EvalStatus
from governance.web import labels

QUEUE_SIZE = 20
DECIDED_SHOWN = 10
STUCK_AFTER = timedelta(minutes=30)

# What a row of a request list shows, read as plain values (a model instance per row, with its
# team and artifact, costs more than rendering the row); never the evidence document.
ROW_VALUES = (
    "code",
    "product_name",
    "status",
    "updated_at",
    "submitted_at",
    "flag_reason",
    "team__name",
    "artifact__name",
)
Row = dict[str, Any]


@dataclass
class Dashboard:
    roles: list[str]
    by_status: list[dict[str, Any]]
    to_review: list[Row] | None  # None: the user reviews nothing
    waiting_on_me: list[Row]
    recently_decided: list[Row]
    alerts: list[Row]
    eval_problems: list[Row]


def _visible(user: Any) -> QuerySet[DeploymentRequest]:
    """The requests the user may see, by the deployments app's own rule (no join, no DISTINCT)."""
    return DeploymentRequest.objects.filter(deployments_visible_condition(user))


def _queues(user: Any, visible: QuerySet[DeploymentRequest]) -> dict[str, list[Row]]:
    """The dashboard's lists of requests, each newest (or longest waiting) first and capped, read
    in one UNION ALL query: a round trip each would cost more than the rows."""
    lists: dict[str, tuple[QuerySet[DeploymentRequest], str, int]] = {}
    review_roles = [
        role
        for role, group in (
            (ReviewRole.LEGAL, Role.LEGAL_REVIEWER),
            (ReviewRole.ENGINEERING, Role.ENGINEERING_REVIEWER),
        )
        if has_role(user, group)
    ]
    if review_roles:
        # waiting for a decision of one of my review roles on the current evidence: no live (not
        # voided) decision of those roles, both tests on the same decision (an exclude() over the
        # relation would test them on any two, and build a slower statement)
        decided = Exists(
            SignOff.objects.filter(deployment=OuterRef("pk"), voided_at__isnull=True, role__in=review_roles)
        )
        lists["to_review"] = (
            visible.filter(status__in=[Status.SUBMITTED, Status.IN_REVIEW]).exclude(requester=user).filter(~decided),
            "submitted_at",
            QUEUE_SIZE,
        )
    if has_role(user, Role.REQUESTER):
        # a subquery, not a join: a join repeats a request per open item and needs a DISTINCT sort
        open_items = Q(
            pk__in=ObligationItem.objects.filter(status__in=[ObligationStatus.OPEN, ObligationStatus.REJECTED]).values(
                "request_id"
            )
        )
        my_teams = Team.members.through.objects.filter(user_id=user.pk).values("team_id")
        lists["waiting_on_me"] = (
            visible.filter(team__in=my_teams).filter(  # a subquery, as the visibility rule: no join
                Q(status=Status.DRAFT) | (open_items & ~Q(status__in=TERMINAL))
            ),
            "-updated_at",
            QUEUE_SIZE,
        )
    decided_states = [Status.APPROVED, Status.REJECTED, Status.REVOKED, Status.EXPIRED]
    lists["recently_decided"] = (visible.filter(status__in=decided_states), "-updated_at", DECIDED_SHOWN)
    lists["alerts"] = (visible.filter(flagged=True), "-updated_at", QUEUE_SIZE)
    parts = [
        queryset.annotate(queue=Value(name, output_field=CharField()))
        .values(*ROW_VALUES, "queue")
        .order_by(order)[:limit]
        for name, (queryset, order, limit) in lists.items()
    ]
    result: dict[str, list[Row]] = {name: [] for name in lists}
    # SQLite takes no LIMIT inside a compound statement: a query per list there
    rows: Iterable[Row] = chain.from_iterable(parts)
    if connection.features.supports_slicing_ordering_in_compound:
        rows = parts[0].union(*parts[1:], all=True)
    for row in rows:
        result[row.pop("queue")].append(row)
    for name, (_queryset, order, _limit) in lists.items():  # a UNION keeps no order: each list again
        field = order.lstrip("-")
        result[name].sort(key=lambda row: (row[field] is None, row[field]), reverse=order.startswith("-"))
    return result


def dashboard(user: Any) -> Dashboard:
    visible = _visible(user)
    counts = dict(visible.order_by().values_list("status").annotate(n=Count("pk")))
    requests_url = reverse("web:requests")
    by_status = [
        {
            "status": s,
            "label": labels.label("status", s),
            "count": counts.get(s, 0),
            "url": f"{requests_url}?status={s}",
        }
        for s in Status.values
    ]
    queues = _queues(user, visible)
    stuck_before = timezone.now() - STUCK_AFTER
    eval_problems = [
        dict(row)
        for row in EvalRun.objects.filter(request__in=visible.values("pk"))
        .filter(
            Q(status__in=[EvalStatus.FAILED, EvalStatus.ERROR])
            | Q(status=EvalStatus.RUNNING, job__state__in=ACTIVE_STATES, job__updated_at__lt=stuck_before)
        )
        .values("code", "scheme", "status", "request__code", "request__product_name")  # what a line shows
        .order_by("-created_at")[:DECIDED_SHOWN]
    ]
    return Dashboard(
        roles=[labels.label("role", r) for r in sorted(user_roles(user))],
        by_status=by_status,
        to_review=queues.get("to_review"),
        waiting_on_me=queues.get("waiting_on_me", []),
        recently_decided=queues["recently_decided"],
        alerts=queues["alerts"],
        eval_problems=eval_problems,
    )


def deployments_page(
    user: Any, status: str | None
) -> tuple[QuerySet[DeploymentRequest, Row], QuerySet[DeploymentRequest]]:
    """The request list's rows (as values), newest first, and the same requests to count them by
    (the rows join the team and the model for their names; the count needs neither join). The
    view pages through them."""
    requests = _visible(user)
    if status in Status.values:
        requests = requests.filter(status=status)
    return requests.values(*ROW_VALUES).order_by("-created_at"), requests
