"""Reads of quantize runs, scoped in the query like their parent artifacts: what a user may not see
is not found."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet

from governance.artifacts.selectors import artifacts_visible_to
from governance.core.errors import NotFoundError
from governance.quantization.models import QuantizeRun


def quantize_runs_visible_to(user: Any) -> QuerySet[QuantizeRun]:
    return QuantizeRun.objects.filter(parent__in=artifacts_visible_to(user)).select_related(
        "parent", "cluster", "job", "derivative"
    )


def quantize_run_get(user: Any, code: Any) -> QuantizeRun:
    found = quantize_runs_visible_to(user).filter(code=code).first()
    if found is None:
        raise NotFoundError("no such quantize run")
    return found


def quantize_runs_unfinished_with_final_jobs() -> list[int]:
    """Runs still `running` whose job has ended: their completion was missed (a worker died between
    the job's end and the registration) and is driven again by the reconcile task."""
    from governance.evaluations.models import ACTIVE_STATES

    return list(
        QuantizeRun.objects.filter(status="running", job__isnull=False)
        .exclude(job__state__in=ACTIVE_STATES)
        .values_list("pk", flat=True)
    )
