"""The request page: findings, blockers, obligations, capacity chart, eval progress, sign-off."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from django.db.models import Exists, OuterRef, Prefetch
from django.utils import timezone

from governance.approvals.choices import PacketStatus, SignatureStatus
from governance.approvals.models import ApprovalPacket
from governance.approvals.packet_content import chart_caption, concurrency_text
from governance.approvals.selectors import ApprovalState, approval_state, live_packet, packet_url
from governance.audit.selectors import audit_events_filter
from governance.canary.models import CanaryAnalysis, FleetCheck
from governance.canary.plan_fit import OUTSIDE
from governance.capacity.models import CapacityPlan, CapacityPlanStatus
from governance.capacity.selectors import IntervalRow, PlanVerdict, plan_interval_rows, plan_verdict
from governance.core.errors import NotFoundError
from governance.core.models import Team
from governance.deployments.choices import ObligationStatus
from governance.deployments.models import DeploymentRequest, ObligationItem, SignOff, Waiver
from governance.deployments.moves import available_actions, lifecycle_phase
from governance.deployments.readiness import finding_waived
from governance.deployments.selectors import (
    deployment_attach_capacity_plan,
    deployment_blockers,
    deployment_get,
    deployments_visible_to,
    latest_capacity_plan,
)
from governance.evaluations.models import EVAL_IN_FLIGHT, EvalKind, EvalRun
from governance.gate.selectors import gate_decisions_visible_to
from governance.licenses.choices import BLOCKING_SEVERITIES
from governance.web import labels


@dataclass
class MemoryChart:
    """A stacked bar per GPU of one replica: weights, KV cache, activations, reserve, free (SVG
    coordinates), with an axis in GiB below the bars (`ticks`, `axis_y`) and the capacity marked
    (`capacity_x`); `caption` says what is drawn (one replica's GPUs, of how many in all)."""

    gpus: int
    caption: str
    bars: list[dict[str, Any]]
    legend: list[dict[str, Any]]
    capacity_gib: float
    width: int
    height: int
    ticks: list[dict[str, str]]
    axis_y: int  # the axis line, below the bars (the bars start at CHART_TOP)
    capacity_x: str
    plot_left: int
    plot_right: str


# Each part's colour is a class in static/css/app.css (.part-weights, …), for the bars and the
# legend alike: the page's CSP (style-src 'self') refuses inline styles.
CHART_PARTS = ("weights", "kv_cache", "activations", "overhead")
CHART_TOP = 18  # room for the y axis' title above the GPU labels
CHART_AXIS = 40  # room below the bars for the tick labels and the x axis' title
GIB = 1024**3
# The eval jobs' log lines the card reads while a run is in progress: `progress N/M` (screening),
# `progress <phase> N/M` and `<phase>: N cached, M to ask` / `<phase>: every answer cached` (a served
# run answers every case twice: the baseline, then the candidate) and `engine <name> <version>`.
PROGRESS = re.compile(r"^progress (?:(\w+) )?(\d+)/(\d+)", re.MULTILINE)
PHASE_START = re.compile(r"^(\w+): (\d+) cached, (\d+) to ask", re.MULTILINE)
PHASE_CACHED = re.compile(r"^(\w+): every answer cached", re.MULTILINE)
ENGINE_LINE = re.compile(r"^engine (\S+) (\S+)\s*$", re.MULTILINE)
SERVED_PHASES = ("baseline", "candidate")


MAX_CHART_BARS = 16


def plan_budget(serving_plan: dict[str, Any], plan: CapacityPlan | None) -> dict[str, Any]:
    """The serving plan's GPU budget beside the computed plan: `over_budget` when the plan fits, but
    only on more GPUs than the budget (the readiness rule's `capacity.over_budget`)."""
    stated = serving_plan.get("max_gpus")
    budget = int(stated) if stated else None
    result = (plan.result if plan is not None else None) or {}
    gpus = int((result.get("parallel") or {}).get("gpus") or 0)
    kind = str((result.get("gpu") or {}).get("key") or serving_plan.get("gpu") or "")
    over = budget is not None and plan is not None and bool(plan.fits) and gpus > budget
    return {"budget": budget, "budget_gpu": kind, "over_budget": over}


def memory_chart(result: dict[str, Any]) -> MemoryChart | None:
    memory = result.get("memory_per_gpu") or {}
    capacity = int(memory.get("capacity") or 0)
    if capacity <= 0:
        return None
    parallel = result.get("parallel") or {}
    gpus = int(parallel.get("gpus") or 1)
    # Every replica (dp) is a copy of the same GPUs: draw one replica's, and say so.
    replicas = max(int(parallel.get("dp") or 1), 1)
    replica_gpus = max(gpus // replicas, 1)
    shown = min(replica_gpus, MAX_CHART_BARS)
    bar_height, gap, label_width, plot_width = 22, 6, 56, 480
    scale = plot_width / max(capacity, int(memory.get("total") or 0))
    # every GPU holds the same parts (memory_per_gpu): one set of segments, named once, for each bar
    names = {name: labels.label("memory_part", name) for name in CHART_PARTS}
    parts = []
    x = float(label_width)
    for name in CHART_PARTS:
        size = int(memory.get(name) or 0)
        width = size * scale
        css = "part-" + name.replace("_", "-")
        parts.append({"x": f"{x:.1f}", "width": f"{width:.1f}", "css": css, "label": names[name], "gib": size / GIB})
        x += width
    bars = [
        {
            "y": index * (bar_height + gap),
            "text_y": index * (bar_height + gap) + bar_height - 6,
            "height": bar_height,
            "label": f"GPU {index}",
            "parts": parts,
        }
        for index in range(shown)
    ]
    legend = [
        {"label": names[name], "css": "part-" + name.replace("_", "-"), "gib": int(memory.get(name) or 0) / GIB}
        for name in CHART_PARTS
    ]
    top_bytes = plot_width / scale  # the axis ends at the larger of the capacity and the total
    ticks = [
        {"x": f"{label_width + plot_width * step / 4:.1f}", "label": f"{top_bytes * step / 4 / GIB:.0f}"}
        for step in range(5)
    ]
    bars_height = shown * (bar_height + gap)
    return MemoryChart(
        gpus=gpus,
        caption=chart_caption(gpus, replicas, shown, capacity / GIB),
        bars=bars,
        legend=legend,
        capacity_gib=capacity / GIB,
        width=label_width + plot_width + 24,
        height=CHART_TOP + bars_height + CHART_AXIS,
        ticks=ticks,
        axis_y=CHART_TOP + bars_height,
        capacity_x=f"{label_width + capacity * scale:.1f}",
        plot_left=label_width,
        plot_right=f"{label_width + plot_width:.1f}",
    )


# The failure-rate threshold an eval run gets unless someone chose another (the model's default).
DEFAULT_EVAL_THRESHOLD = float(EvalRun._meta.get_field("threshold").default)


def answer_phases(log: str, served: bool) -> list[dict[str, Any]]:
    """Answers done per phase, from the log's tail (4 kB: earlier lines may have scrolled out). A
    served run asks the baseline, then the candidate, every case: once the candidate's phase shows,
    the baseline's is complete; a phase whose answers were all cached is complete."""
    phases: dict[str, list[int]] = {}  # label -> [done, total]
    for label, count, todo in PHASE_START.findall(log):
        phases[label] = [int(count), int(count) + int(todo)]
    for label, done, total in PROGRESS.findall(log):
        phases[label] = [int(done), int(total)]
    cached = set(PHASE_CACHED.findall(log))
    if not served:
        return [{"label": label, "done": d, "total": t} for label, (d, t) in phases.items()]
    cases = max((t for _, t in phases.values()), default=0)
    shown = []
    for index, label in enumerate(SERVED_PHASES):
        later = any(name in phases or name in cached for name in SERVED_PHASES[index + 1 :])
        done, total = phases.get(label, [0, cases])
        if label in cached or (later and label not in phases):
            done = total = cases
        shown.append({"label": label, "done": done, "total": total or cases})
    return shown


def eval_progress(run: EvalRun) -> dict[str, Any]:
    """State, answers done (from the payload's progress lines), the engine version (from its
    `engine` line until the result records it) and the last log lines."""
    job = run.job
    log = job.log_tail if job else ""
    phases = answer_phases(log, run.kind == EvalKind.SERVED)
    done, total = sum(p["done"] for p in phases), sum(p["total"] for p in phases)
    engines = ENGINE_LINE.findall(log)
    engine_version = run.engine_version or (engines[-1][1] if engines else "")
    if run.summary and run.summary.get("overall"):
        cases = int(run.summary["overall"].get("n") or 0)
        done = total = cases * (len(SERVED_PHASES) if run.kind == EvalKind.SERVED else 1)
        phases = []
    categories = [
        {"name": name, **block} for name, block in sorted(((run.summary or {}).get("categories") or {}).items())
    ]
    return {
        "run": run,
        "served": run.kind == EvalKind.SERVED,
        "phases": phases,
        "engine_version": engine_version,
        "accuracy": any(c.get("quantized_accuracy") is not None for c in categories),
        "state": job.state if job else run.status,
        "state_label": labels.label("job_state", job.state) if job else labels.label("eval_status", run.status),
        "active": run.in_flight,
        "done": done,
        "total": total,
        "log_tail": "\n".join(log.splitlines()[-12:]),
        "overall": (run.summary or {}).get("overall"),
        "categories": categories,
        "error": (run.summary or {}).get("error", ""),
        "default_threshold": DEFAULT_EVAL_THRESHOLD,
        "loose_threshold": run.threshold > DEFAULT_EVAL_THRESHOLD,
    }


@dataclass
class DeploymentPage:
    request: DeploymentRequest
    licenses: list[dict[str, Any]]
    blockers: list[dict[str, Any]]
    obligations: list[Any]
    waivers: list[Any]
    decisions: list[Any]
    plan: CapacityPlan | None
    chart: MemoryChart | None
    evals: list[dict[str, Any]]
    timeline: list[dict[str, Any]]
    usage_reports: list[Any]
    actions: dict[str, Any]
    packet: Any = None
    packet_url: str = ""
    findings_waivable: list[dict[str, Any]] = field(default_factory=list)
    approval: ApprovalState | None = None
    approval_current: bool = False
    gate_decisions: list[dict[str, Any]] = field(default_factory=list)
    budget: int | None = None  # the serving plan's max_gpus
    budget_gpu: str = ""
    over_budget: bool = False
    plan_concurrency: str = ""
    blockers_shown: bool = True
    blockers_pending: bool = False
    # The plan's intervals and fit verdict (issue 47): none for a plan stored before they existed.
    intervals: list[IntervalRow] = field(default_factory=list)
    verdict: PlanVerdict | None = None
    drafting: bool = False
    canary: list[dict[str, Any]] = field(default_factory=list)
    fleet: FleetCheck | None = None
    fleet_outside: list[dict[str, Any]] = field(default_factory=list)


def blockers_state(request: DeploymentRequest, plan: CapacityPlan | None, evals_active: bool) -> dict[str, bool]:
    """Whether the blocker list is shown, and whether it is waiting on something that will change
    it by itself (the capacity plan computing, an eval running, the heavy worker rendering or
    signing the packet): htmx polls it only then. Gone once approved (what stood between is behind
    it) unless a usage report flagged it again, and once the request ended."""
    phase = lifecycle_phase(request)
    if not phase.blockers_shown:
        return {"blockers_shown": False, "blockers_pending": False}
    pending = (plan is not None and plan.status == CapacityPlanStatus.PENDING) or evals_active
    if not pending and phase.in_review:  # a sign-off the worker has still to sign
        pending = (
            SignOff.objects.filter(
                deployment=request, voided_at__isnull=True, signature__status=SignatureStatus.PENDING
            ).exists()
            or ApprovalPacket.objects.filter(
                deployment=request, voided_at__isnull=True, status=PacketStatus.RENDERING
            ).exists()
        )
    return {"blockers_shown": True, "blockers_pending": pending}


def deployment_blockers_part(user: Any, code: Any) -> dict[str, Any]:
    """The blocker list alone (polled while something it depends on is pending)."""
    request = deployment_get(user, code)
    deployment_attach_capacity_plan(request)
    drafting = lifecycle_phase(request).drafting
    active = EvalRun.objects.filter(EVAL_IN_FLIGHT, request=request).exists()
    state = blockers_state(request, latest_capacity_plan(request), active)
    blockers = [] if drafting or not state["blockers_shown"] else deployment_blockers(request)
    return {
        "d": request,
        "drafting": drafting,
        "blockers": [labels.blocker_guidance(b, request) for b in blockers],
        **state,
    }


def _deployment(user: Any, code: Any) -> DeploymentRequest:
    """The request (as deployment_get finds it) with the collections the page shows prefetched,
    in the order it shows them; the readiness rule reads the same prefetched
    rows instead of querying each again. It also says whether the viewer is in the request's team
    (deployment_actions)."""
    found = (
        deployments_visible_to(user)
        .annotate(
            viewer_is_member=Exists(Team.members.through.objects.filter(team_id=OuterRef("team_id"), user_id=user.pk))
        )
        .prefetch_related(
            # only the related rows the page shows (who granted a waiver, who decided, the run's
            # job and cluster): each joined model adds its every column to compile and read
            Prefetch("waivers", queryset=Waiver.objects.select_related("granted_by").order_by("expires_at")),
            Prefetch("obligations", queryset=ObligationItem.objects.all()),
            Prefetch("signoffs", queryset=SignOff.objects.select_related("signer").order_by("-created_at")),
            Prefetch("eval_runs", queryset=EvalRun.objects.select_related("job", "cluster").order_by("-created_at")),
            # the newest canary analyses, with their figures against the plan (one query)
            Prefetch("canary_analyses", queryset=CanaryAnalysis.objects.order_by("-created_at")),
        )
    )
    try:
        return found.get(code=code)  # the code is unique: no ordering to compile and sort, as first() has
    except DeploymentRequest.DoesNotExist:
        raise NotFoundError("no such deployment request") from None


def _findings(request: DeploymentRequest) -> dict[str, Any]:
    """The license findings per license, each marked waived or not, and those a waiver may cover."""
    now = timezone.now()
    waivers = (request.evidence or {}).get("waivers", [])  # as the readiness rule reads them
    licenses, waivable = [], []
    for evaluation in (request.evidence or {}).get("licenses", []):
        findings = []
        for finding in evaluation["findings"]:
            waived = finding_waived(waivers, evaluation["license"], finding, now)
            findings.append(
                {
                    **finding,
                    **labels.finding_words(finding),
                    "waived": waived,
                    "severity_label": labels.label("severity", finding["severity"]),
                    "confidence_label": labels.label("confidence", finding.get("confidence", "")),
                }
            )
            if finding["severity"] in BLOCKING_SEVERITIES and not waived:
                waivable.append({"license": evaluation["license"], **finding})
        decision = labels.label("decision", evaluation["decision"])
        licenses.append({**evaluation, "findings": findings, "decision_label": decision})
    return {"licenses": licenses, "findings_waivable": waivable}


def _review(user: Any, request: DeploymentRequest) -> dict[str, Any]:
    """Blockers with who acts, the obligations checklist, waivers, decisions and the sign-off state."""
    packet = live_packet(request)
    # The stored verification exists only for a completely signed packet: no query otherwise.
    approval = approval_state(request) if packet is not None and packet.status == PacketStatus.COMPLETE else None
    drafting = lifecycle_phase(request).drafting
    return {
        "drafting": drafting,
        "blockers": [] if drafting else [labels.blocker_guidance(b, request) for b in deployment_blockers(request)],
        "obligations": [item for item in request.obligations.all() if item.status != ObligationStatus.SUPERSEDED],
        "waivers": list(request.waivers.all()),
        "decisions": list(request.signoffs.all()),
        "actions": deployment_actions(user, request),
        "packet": packet,
        "packet_url": packet_url(request),
        "approval": approval,
        "approval_current": approval is not None and approval.evidence_digest == request.evidence_digest,
    }


def _operations(user: Any, request: DeploymentRequest) -> dict[str, Any]:
    """The capacity plan and its chart, eval runs, usage reports, gate decisions and the audit timeline."""
    plan = latest_capacity_plan(request)
    timeline = audit_events_filter(object_type=DeploymentRequest._meta.label_lower, object_id=str(request.code))
    canary = [canary_view(analysis) for analysis in request.canary_analyses.all()[:CANARY_SHOWN]]
    # the newest fleet re-check (beat canary.fleet_check); no query for a request with no canary
    fleet = FleetCheck.objects.filter(deployment=request).order_by("-created_at").first() if canary else None
    return {
        "plan": plan,
        "chart": memory_chart(plan.result) if plan is not None and plan.result else None,
        "intervals": plan_interval_rows(plan.result) if plan is not None else [],
        "verdict": plan_verdict(plan.result) if plan is not None else None,
        **plan_budget(request.serving_plan or {}, plan),
        # the sequences the launch commands run at once and where their batch comes from (as the packet says)
        "plan_concurrency": concurrency_text(plan.result, request.serving_plan or {})
        if plan is not None and plan.result
        else "",
        "evals": [eval_progress(run) for run in request.eval_runs.all()],
        "canary": canary,
        "fleet": fleet,
        "fleet_outside": fleet_outside(fleet),
        "usage_reports": list(request.usage_reports.order_by("-month", "-created_at")[:12]),
        "gate_decisions": gate_decisions(user, request),
        "timeline": _timeline(timeline.order_by("-seq").values("seq", "occurred_at", "actor_name", "action")[:50]),
    }


CANARY_SHOWN = 5


def canary_view(analysis: CanaryAnalysis) -> dict[str, Any]:
    """One canary analysis as the page shows it: its checks, its figures against the capacity plan
    (governance/canary/plan_fit.py) and the finding for engineering where it measured worse."""
    plan = [
        {
            **figure,
            "label": labels.label("plan_figure", figure["figure"]),
            "verdict_label": labels.label("plan_verdict", figure["verdict"]),
            "position_label": labels.label("plan_position", figure["position"]) if figure["position"] else "",
        }
        for figure in (analysis.measurements or {}).get("plan") or []
    ]
    return {
        "analysis": analysis,
        "status_label": labels.label("canary_status", analysis.status),
        "checks": [
            {**check, "verdict_label": labels.label("canary_verdict", check["verdict"])} for check in analysis.checks
        ],
        "plan": plan,
        "worse": [figure for figure in plan if figure["verdict"] == "worse"],
        # measured outside the plan's interval, either way: flagged to engineering (canary.outside_interval)
        "outside": [figure for figure in plan if figure["position"] in OUTSIDE],
    }


def fleet_outside(check: FleetCheck | None) -> list[dict[str, Any]]:
    """The newest fleet re-check's latencies outside the plan's interval, labelled as the canary's are."""
    return [
        {
            **figure,
            "label": labels.label("plan_figure", figure["figure"]),
            "position_label": labels.label("plan_position", figure["position"]),
        }
        for figure in (check.plan if check is not None else [])
        if figure.get("position") in OUTSIDE
    ]


def _timeline(events: Any) -> list[dict[str, Any]]:
    """The request's audit events as the timeline shows them, each action by its name."""
    names = labels.audit_action_names()
    return [{**event, "action_label": names.get(event["action"], event["action"])} for event in events]


def deployment_page(user: Any, code: Any) -> DeploymentPage:
    request = _deployment(user, code)
    deployment_attach_capacity_plan(request)  # the blockers and the capacity section read it
    operations = _operations(user, request)
    state = blockers_state(request, operations["plan"], any(e["active"] for e in operations["evals"]))
    return DeploymentPage(
        request=request,
        **_findings(request),
        **_review(user, request),
        **operations,
        blockers_shown=state["blockers_shown"],
        blockers_pending=state["blockers_pending"],
    )


GATE_DECISIONS_SHOWN = 20


def gate_decisions(user: Any, request: DeploymentRequest) -> list[dict[str, Any]]:
    """The newest gate decisions on one request, as the user may see them (one query)."""
    rows = (
        gate_decisions_visible_to(user)
        .filter(deployment=request)
        .select_related(None)
        .only("code", "created_at", "environment", "decision", "reasons", "token_name", "token_prefix")
        .order_by("-created_at")[:GATE_DECISIONS_SHOWN]
    )
    return [
        {
            "decision": row,
            "label": labels.label("gate_decision", row.decision),
            "reason_codes": [str(reason.get("code", "")) for reason in row.reasons or []],
        }
        for row in rows
    ]


def deployment_evals(user: Any, code: Any) -> list[dict[str, Any]]:
    """The eval-run panel alone (polled while a run is active)."""
    request = deployment_get(user, code)
    runs = EvalRun.objects.filter(request=request).select_related("job", "cluster").order_by("-created_at")
    return [eval_progress(run) for run in runs]


def deployment_actions(user: Any, request: DeploymentRequest) -> dict[str, Any]:
    """Which forms to show (deployments.moves.available_actions), the review roles labelled."""
    member = getattr(request, "viewer_is_member", None)  # annotated by the request page's query
    if member is None:
        member = any(team.pk == request.team_id for team in user.teams.all())
    actions = available_actions(request, user, member=member)
    actions["review_roles"] = [
        {"value": role, "label": labels.label("review_role", role)} for role in actions["review_roles"]
    ]
    return actions
