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


def cluster_get(user: Any, code: Any) -> Cluster:
    found = clusters_visible_to(user).filter(code=code).first()
    if found is None:
        raise NotFoundError("no such cluster")
    return found


def cluster_by_name(name: str) -> Cluster | None:
    return Cluster.objects.filter(name=name).first()


def jobruns_visible_to(user: Any) -> QuerySet[JobRun]:
    runs = JobRun.objects.select_related("cluster")
    if has_role(user, *SEE_ALL):
        return runs
    if has_role(user, Role.REQUESTER):
        return runs.filter(eval_run__request__team__members=user).distinct()
    return runs.none()


def jobrun_get(user: Any, code: Any) -> JobRun:
    found = jobruns_visible_to(user).filter(code=code).first()
    if found is None:
        raise NotFoundError("no such job run")
    return found


def evalruns_visible_to(user: Any) -> QuerySet[EvalRun]:
    runs = EvalRun.objects.select_related("job", "job__cluster")
    if has_role(user, *SEE_ALL):
        return runs
    if has_role(user, Role.REQUESTER):
        return runs.filter(request__team__members=user).distinct()
    return runs.none()


def evalrun_get(user: Any, code: Any) -> EvalRun:
    found = evalruns_visible_to(user).filter(code=code).first()
    if found is None:
        raise NotFoundError("no such eval run")
    return found
