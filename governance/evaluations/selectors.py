"""Reads of clusters, job runs and eval runs, with object scoping in the query: what a user may not
see is not found. Eval runs belong to a deployment request and are scoped like it."""

from __future__ import annotations

from typing import Any

from django.db.models import Q, QuerySet

from governance.core.errors import NotFoundError
from governance.core.roles import Role, has_role
from governance.evaluations.models import Cluster, EvalRun, JobRun

# Roles that see every job and eval run.
SEE_ALL = (Role.AUDITOR, Role.ADMIN)
# The status of a request not submitted yet (deployments' Status.DRAFT; not imported: a lower layer).
_DRAFT = "draft"


def clusters_visible_to(user: Any) -> QuerySet[Cluster]:
    """Clusters are shared configuration: everyone with a role sees them (the API checks the role)."""
    return Cluster.objects.all()


def _found(queryset: QuerySet[Any], code: Any, what: str) -> Any:
    found = queryset.filter(code=code).first()
    if found is None:
        raise NotFoundError(f"no such {what}")
    return found


def cluster_get(user: Any, code: Any) -> Cluster:
    found: Cluster = _found(clusters_visible_to(user), code, "cluster")
    return found


def cluster_by_name(name: str) -> Cluster | None:
    return Cluster.objects.filter(name=name).first()


def jobruns_visible_to(user: Any) -> QuerySet[JobRun]:
    """An eval's job is scoped like its request (its team; reviewers once submitted); cluster
    operations (discovery, commands) are for engineering reviewers."""
    runs = JobRun.objects.select_related("cluster")
    if has_role(user, *SEE_ALL):
        return runs
    condition = Q(pk__in=[])
    if has_role(user, Role.REQUESTER):
        condition |= Q(eval_run__request__team__members=user)
    if has_role(user, Role.LEGAL_REVIEWER, Role.ENGINEERING_REVIEWER):
        condition |= Q(eval_run__request__isnull=False) & ~Q(eval_run__request__status=_DRAFT)
    if has_role(user, Role.ENGINEERING_REVIEWER):
        condition |= Q(eval_run__isnull=True)
    return runs.filter(condition).distinct()


def jobrun_get(user: Any, code: Any) -> JobRun:
    found: JobRun = _found(jobruns_visible_to(user), code, "job run")
    return found


def evalruns_visible_to(user: Any) -> QuerySet[EvalRun]:
    """Scoped like the request: its team sees them; reviewers once it is submitted, never a draft's."""
    runs = EvalRun.objects.select_related("job", "job__cluster")
    if has_role(user, *SEE_ALL):
        return runs
    condition = Q(pk__in=[])
    if has_role(user, Role.REQUESTER):
        condition |= Q(request__team__members=user)
    if has_role(user, Role.LEGAL_REVIEWER, Role.ENGINEERING_REVIEWER):
        condition |= Q(request__isnull=False) & ~Q(request__status=_DRAFT)
    return runs.filter(condition).distinct()


def evalrun_get(user: Any, code: Any) -> EvalRun:
    found: EvalRun = _found(evalruns_visible_to(user), code, "eval run")
    return found
