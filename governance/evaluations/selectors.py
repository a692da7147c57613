"""Reads of clusters, job runs and eval runs, with object scoping in the query: what a user may not
see is not found. Eval runs belong to a deployment request; its team sees them, and so do reviewers."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet

from governance.core.errors import NotFoundError
from governance.core.roles import Role, has_role
from governance.evaluations.models import Cluster, EvalRun, JobRun

# Roles that see every cluster, job and eval run (the people who run and judge them).
SEE_ALL = (Role.ENGINEERING_REVIEWER, Role.LEGAL_REVIEWER, Role.AUDITOR, Role.ADMIN)


def clusters_visible_to(user: Any) -> QuerySet[Cluster]:
    """Clusters are shared configuration: everyone with a role sees them (the API checks the role)."""
    return Cluster.objects.all()


def _found(queryset: QuerySet[Any], code: Any, what: str) -> Any:
    found = queryset.filter(code=code).first()
    if found is None:
        raise NotFoundError(f"no such {what}")
    return found


def _scoped(user: Any, queryset: QuerySet[Any], team_members: str) -> QuerySet[Any]:
    """Everything for SEE_ALL roles; for a requester, what hangs off their teams' deployment requests."""
    if has_role(user, *SEE_ALL):
        return queryset
    if has_role(user, Role.REQUESTER):
        return queryset.filter(**{team_members: user}).distinct()
    return queryset.none()


def cluster_get(user: Any, code: Any) -> Cluster:
    found: Cluster = _found(clusters_visible_to(user), code, "cluster")
    return found


def cluster_by_name(name: str) -> Cluster | None:
    return Cluster.objects.filter(name=name).first()


def jobruns_visible_to(user: Any) -> QuerySet[JobRun]:
    return _scoped(user, JobRun.objects.select_related("cluster"), "eval_run__request__team__members")


def jobrun_get(user: Any, code: Any) -> JobRun:
    found: JobRun = _found(jobruns_visible_to(user), code, "job run")
    return found


def evalruns_visible_to(user: Any) -> QuerySet[EvalRun]:
    return _scoped(user, EvalRun.objects.select_related("job", "job__cluster"), "request__team__members")


def evalrun_get(user: Any, code: Any) -> EvalRun:
    found: EvalRun = _found(evalruns_visible_to(user), code, "eval run")
    return found
