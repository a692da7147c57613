"""Reads of capacity plans, with object scoping in the query, and the findings a plan yields."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db.models import Q, QuerySet
from django.utils.translation import gettext_lazy as _

from governance.capacity.models import CapacityPlan
from governance.core.errors import NotFoundError
from governance.core.roles import Role, has_role

DEPLOYMENT_SUBJECT = "deployments.deploymentrequest"
GIB = 1 << 30


# The status of a subject that is not submitted yet (deployments' Status.DRAFT; not imported: a lower layer).
_DRAFT = "draft"


def capacity_plans_visible_to(user: Any) -> QuerySet[CapacityPlan]:
    """Scoped like the subject: auditors and admins see every plan; requesters the plans they or a
    teammate requested; reviewers the plans of submitted requests (never a draft's)."""
    plans = CapacityPlan.objects.all()
    if has_role(user, Role.AUDITOR, Role.ADMIN):
        return plans
    if not getattr(user, "is_authenticated", False):
        return plans.none()
    condition = Q(requested_by=user)
    if has_role(user, Role.REQUESTER):
        condition |= Q(requested_by__teams__members=user)
    if has_role(user, Role.LEGAL_REVIEWER, Role.ENGINEERING_REVIEWER):
        condition |= Q(deployment__isnull=False) & ~Q(deployment__status=_DRAFT)
    return plans.filter(condition).distinct()


def capacity_plan_get(user: Any, code: Any) -> CapacityPlan:
    found = capacity_plans_visible_to(user).filter(code=code).first()
    if found is None:
        raise NotFoundError("no such capacity plan")
    return found


# A plan's intervals as the request page and the packet show them (issue 47): one row per figure of the
# contract's `intervals`, in the unit the page shows the figure in.
@dataclass(frozen=True, slots=True)
class IntervalRow:
    path: str  # the figure's dotted path in the plan JSON
    label: str
    figure: float
    low: float
    high: float
    unit: str  # "GiB", "ms", "tokens/s" or "" (a count)
    places: int  # decimals shown
    coverage: float  # 0.8
    n: int  # held-out runs, the team's startup logs (team) or canary measurements (canary)
    team: bool  # from the cluster's own startup logs, not the catalog's held-out runs
    basis: str  # the planner's own words (English, as the packet's quoted texts)
    canary: bool = False  # from the team's canary and fleet measurements on the cluster (planner.measured)

    def _text(self, value: float, unit: bool = True) -> str:
        return f"{value:,.{self.places}f}" + (f" {self.unit}" if unit and self.unit else "")

    @property
    def figure_text(self) -> str:
        return self._text(self.figure)

    @property
    def range_text(self) -> str:
        """Both ends with one unit between them and an en dash: 8.6 to 19.5 ms."""
        return f"{self._text(self.low, unit=False)}\u2013{self._text(self.high)}"

    @property
    def coverage_percent(self) -> int:
        return round(self.coverage * 100)


_INTERVAL_FIGURES: tuple[tuple[str, Any, float, str, int], ...] = (
    ("memory_per_gpu.weights", _("Weights per GPU"), GIB, "GiB", 2),
    ("memory_per_gpu.kv_cache", _("KV cache per GPU"), GIB, "GiB", 2),
    ("kv_cache.capacity_tokens", _("KV cache capacity (tokens)"), 1, "", 0),
    ("max_concurrency", _("Maximum concurrency"), 1, "", 0),
    ("throughput.tpot_ms", _("TPOT"), 1, "ms", 1),
    ("throughput.ttft_ms", _("TTFT"), 1, "ms", 1),
    ("throughput.decode_tokens_per_s", _("Decode throughput"), 1, "tokens/s", 0),
)


def plan_interval_rows(result: dict[str, Any] | None) -> list[IntervalRow]:
    """The plan's figures with their intervals; none for a plan stored before intervals existed."""
    intervals = (result or {}).get("intervals") or {}
    rows = []
    for path, label, scale, unit, places in _INTERVAL_FIGURES:
        entry = intervals.get(path)
        node: Any = result
        for step in path.split("."):
            node = node.get(step) if isinstance(node, dict) else None
        if not isinstance(entry, dict) or not isinstance(node, int | float):
            continue
        basis = str(entry.get("basis") or "")
        rows.append(
            IntervalRow(
                path=path,
                label=str(label),
                figure=node / scale,
                low=float(entry["low"]) / scale,
                high=float(entry["high"]) / scale,
                unit=unit,
                places=places,
                coverage=float(entry.get("coverage") or 0.8),
                n=int(entry.get("n") or 0),
                team="of your startup logs" in basis,
                basis=basis,
                canary="of your canary measurements" in basis,
            )
        )
    return rows


@dataclass(frozen=True, slots=True)
class PlanVerdict:
    verdict: str  # fits | tight | does_not_fit
    margin_gib: float  # KV pool per GPU to spare (negative: lacking), at the central figure
    sequences: int  # full-length sequences to spare (negative: lacking)
    note: str  # the plan's "Tight: …" note, where it is tight


def plan_verdict(result: dict[str, Any] | None) -> PlanVerdict | None:
    """The plan's fit verdict with its margin; None for a plan stored before verdicts existed."""
    verdict = (result or {}).get("verdict")
    if verdict not in ("fits", "tight", "does_not_fit"):
        return None
    margin = (result or {}).get("fit_margin") or {}
    notes = [n for n in (result or {}).get("notes") or [] if isinstance(n, str) and n.startswith("Tight")]
    return PlanVerdict(
        verdict=str(verdict),
        margin_gib=float(margin.get("kv_bytes_per_gpu") or 0) / GIB,
        sequences=int(margin.get("sequences") or 0),
        note=notes[0] if notes else "",
    )
