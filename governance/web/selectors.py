"""What the UI pages read, composed from the apps' selectors with a fixed number of queries per page.

Every function takes the user and returns plain data the templates only display; what a user may
see is decided by the apps' selectors (an unauthorised request is not found)."""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from django.db.models import Count, Prefetch, Q, QuerySet
from django.urls import reverse
from django.utils import timezone

from governance.approvals.choices import PacketStatus
from governance.approvals.selectors import ApprovalState, approval_state, live_packet, packet_url
from governance.artifacts.selectors import artifacts_visible_to
from governance.audit.models import AuditEvent
from governance.audit.selectors import audit_events_filter
from governance.capacity.models import CapacityPlan
from governance.core.models import ApiToken, Team
from governance.core.roles import Role, has_role
from governance.deployments.choices import ObligationStatus, ReviewRole, Status
from governance.deployments.models import DeploymentRequest
from governance.deployments.selectors import (
    deployment_blockers,
    deployment_get,
    deployments_visible_to,
    latest_capacity_plan,
)
from governance.evaluations.models import ACTIVE_STATES, Cluster, EvalRun, EvalStatus
from governance.gate.selectors import ci_tokens_visible_to, gate_decisions_visible_to
from governance.licenses.models import License, LicenseTerm, LicenseVersion
from governance.web import labels

QUEUE_SIZE = 20
STUCK_AFTER = timedelta(minutes=30)
PROGRESS = re.compile(r"progress (\d+)/(\d+)")


# --- dashboard --------------------------------------------------------------------------------


@dataclass
class Dashboard:
    roles: list[str]
    by_status: list[dict[str, Any]]
    to_review: list[DeploymentRequest] | None  # None: the user reviews nothing
    waiting_on_me: list[DeploymentRequest]
    recently_decided: list[DeploymentRequest]
    alerts: list[DeploymentRequest]
    eval_problems: list[EvalRun]


# What a row of a request list shows; the evidence document (tens of kB each) is not read.
ROW_FIELDS = ("code", "product_name", "status", "updated_at", "submitted_at", "flagged", "flag_reason",
              "requester_id", "team__name", "artifact__name")  # fmt: skip


def _visible_ids(user: Any) -> QuerySet[DeploymentRequest]:
    """The visible requests as a subquery (the visibility filter joins teams and is DISTINCT)."""
    return DeploymentRequest.objects.filter(pk__in=deployments_visible_to(user).values("pk"))


def _rows(user: Any) -> QuerySet[DeploymentRequest]:
    return _visible_ids(user).select_related("team", "artifact").only(*ROW_FIELDS)


def dashboard(user: Any) -> Dashboard:
    visible = _rows(user)
    counts = dict(_visible_ids(user).order_by().values_list("status").annotate(n=Count("pk")))
    by_status = [
        {
            "status": s,
            "label": labels.status(s),
            "count": counts.get(s, 0),
            "url": reverse("web:requests") + f"?status={s}",
        }
        for s in Status.values
    ]
    review_roles = [role for role, group in ((ReviewRole.LEGAL, Role.LEGAL_REVIEWER),
                                             (ReviewRole.ENGINEERING, Role.ENGINEERING_REVIEWER))
                    if has_role(user, group)]  # fmt: skip
    to_review: list[DeploymentRequest] | None = None
    if review_roles:
        # waiting for a decision of one of my review roles on the current evidence
        decided = Q(decisions__voided_at__isnull=True, decisions__role__in=review_roles)
        to_review = list(
            visible.filter(status__in=[Status.SUBMITTED, Status.IN_REVIEW])
            .exclude(requester=user)
            .exclude(decided)
            .order_by("submitted_at")[:QUEUE_SIZE]
        )
    waiting_on_me: list[DeploymentRequest] = []
    if has_role(user, Role.REQUESTER):
        open_items = Q(obligations__status__in=[ObligationStatus.OPEN, ObligationStatus.REJECTED])
        waiting_on_me = list(
            visible.filter(team__members=user)
            .filter(Q(status=Status.DRAFT) | (open_items & ~Q(status__in=[Status.REJECTED, Status.REVOKED])))
            .distinct()
            .order_by("-updated_at")[:QUEUE_SIZE]
        )
    recently_decided = list(
        visible.filter(status__in=[Status.APPROVED, Status.REJECTED, Status.REVOKED, Status.EXPIRED]).order_by(
            "-updated_at"
        )[:10]
    )
    alerts = list(visible.filter(flagged=True).order_by("-updated_at")[:QUEUE_SIZE])
    stuck_before = timezone.now() - STUCK_AFTER
    eval_problems = list(
        EvalRun.objects.filter(request__in=_visible_ids(user).values("pk"))
        .filter(
            Q(status__in=[EvalStatus.FAILED, EvalStatus.ERROR])
            | Q(status=EvalStatus.RUNNING, job__state__in=ACTIVE_STATES, job__updated_at__lt=stuck_before)
        )
        .select_related("request", "job")
        .only("code", "scheme", "status", "request__code", "request__product_name", "job__state")
        .order_by("-created_at")[:10]
    )
    return Dashboard(
        roles=[labels.role(r) for r in sorted(_roles(user))],
        by_status=by_status,
        to_review=to_review,
        waiting_on_me=waiting_on_me,
        recently_decided=recently_decided,
        alerts=alerts,
        eval_problems=eval_problems,
    )


def _roles(user: Any) -> set[str]:
    from governance.core.roles import user_roles

    return user_roles(user)


def deployments_page(user: Any, status: str | None) -> QuerySet[DeploymentRequest]:
    requests = _rows(user)
    if status in Status.values:
        requests = requests.filter(status=status)
    return requests.order_by("-created_at")


# --- request page -----------------------------------------------------------------------------


@dataclass
class MemoryChart:
    """A stacked bar per GPU: weights, KV cache, activations, reserve, free (SVG coordinates)."""

    gpus: int
    bars: list[dict[str, Any]]
    legend: list[dict[str, Any]]
    capacity_gib: float
    width: int
    height: int


CHART_PARTS = (
    ("weights", "#1f5fa8"),
    ("kv_cache", "#2e7d32"),
    ("activations", "#b25e00"),
    ("overhead", "#6a3d9a"),
)
GIB = 1024**3


def memory_chart(result: dict[str, Any]) -> MemoryChart | None:
    memory = result.get("memory_per_gpu") or {}
    capacity = int(memory.get("capacity") or 0)
    if capacity <= 0:
        return None
    gpus = int((result.get("parallel") or {}).get("gpus") or 1)
    shown = min(gpus, 16)
    bar_height, gap, label_width, plot_width = 22, 6, 56, 480
    scale = plot_width / max(capacity, int(memory.get("total") or 0))
    bars = []
    for index in range(shown):
        y = index * (bar_height + gap)
        x = float(label_width)
        parts = []
        for name, colour in CHART_PARTS:
            size = int(memory.get(name) or 0)
            width = size * scale
            parts.append({"x": f"{x:.1f}", "width": f"{width:.1f}", "colour": colour, "label": labels.memory_part(name),
                          "gib": size / GIB})  # fmt: skip
            x += width
        bars.append({"y": y, "text_y": y + bar_height - 6, "height": bar_height, "label": f"GPU {index}",
                     "parts": parts})  # fmt: skip
    legend = [
        {"label": labels.memory_part(name), "colour": colour, "gib": int(memory.get(name) or 0) / GIB}
        for name, colour in CHART_PARTS
    ]
    return MemoryChart(
        gpus=gpus,
        bars=bars,
        legend=legend,
        capacity_gib=capacity / GIB,
        width=label_width + plot_width + 10,
        height=shown * (bar_height + gap),
    )


def eval_progress(run: EvalRun) -> dict[str, Any]:
    """State, cases done (from the payload's `progress N/M` lines) and the last log lines."""
    job = run.job
    log = job.log_tail if job else ""
    found = PROGRESS.findall(log)
    done, total = (int(found[-1][0]), int(found[-1][1])) if found else (0, 0)
    if run.summary and run.summary.get("overall"):
        done = total = int(run.summary["overall"].get("n") or total)
    categories = [
        {"name": name, **block} for name, block in sorted(((run.summary or {}).get("categories") or {}).items())
    ]
    return {
        "run": run,
        "state": job.state if job else run.status,
        "state_label": labels.job_state(job.state) if job else labels.eval_status(run.status),
        "active": bool(job and job.state in ACTIVE_STATES),
        "done": done,
        "total": total,
        "log_tail": "\n".join(log.splitlines()[-12:]),
        "overall": (run.summary or {}).get("overall"),
        "categories": categories,
        "error": (run.summary or {}).get("error", ""),
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
    timeline: list[AuditEvent]
    usage_reports: list[Any]
    actions: dict[str, Any]
    packet: Any = None
    packet_url: str = ""
    findings_waivable: list[dict[str, Any]] = field(default_factory=list)
    approval: ApprovalState | None = None
    approval_current: bool = False
    gate_decisions: list[dict[str, Any]] = field(default_factory=list)


def deployment_page(user: Any, code: Any) -> DeploymentPage:
    request = deployment_get(user, code)
    now = timezone.now()
    waivers = list(request.waivers.select_related("granted_by").order_by("expires_at"))
    active = [w for w in waivers if w.expires_at > now]
    licenses, waivable = [], []
    for evaluation in (request.evidence or {}).get("licenses", []):
        findings = []
        for finding in evaluation["findings"]:
            waived = any(w.license_key == evaluation["license"] and w.finding_code == finding["code"]
                         and w.clause in ("", finding["clause"]) for w in active)  # fmt: skip
            findings.append({**finding, "waived": waived, "severity_label": labels.severity(finding["severity"]),
                             "confidence_label": labels.confidence(finding.get("confidence", ""))})  # fmt: skip
            if finding["severity"] in ("blocker", "approval") and not waived:
                waivable.append({"license": evaluation["license"], **finding})
        licenses.append({**evaluation, "findings": findings, "decision_label": labels.decision(evaluation["decision"])})
    blockers = (
        [labels.blocker_guidance(b, request) for b in deployment_blockers(request)]
        if request.status != Status.DRAFT
        else []
    )
    obligations = list(
        request.obligations.exclude(status=ObligationStatus.SUPERSEDED).select_related("acknowledged_by", "reviewed_by")
    )
    decisions = list(request.decisions.select_related("reviewer").order_by("-created_at"))
    plan = latest_capacity_plan(request)
    chart = memory_chart(plan.result) if plan is not None and plan.result else None
    runs = list(
        EvalRun.objects.filter(request=request).select_related("job", "cluster", "requested_by").order_by("-created_at")
    )
    timeline = list(
        audit_events_filter(object_type=DeploymentRequest._meta.label_lower, object_id=str(request.code))
        .order_by("-seq")
        .only("seq", "occurred_at", "actor_name", "action")[:50]
    )
    packet = live_packet(request)
    # The stored verification exists only for a completely signed packet: no query otherwise.
    approval = approval_state(request) if packet is not None and packet.status == PacketStatus.COMPLETE else None
    return DeploymentPage(
        request=request,
        licenses=licenses,
        blockers=blockers,
        obligations=obligations,
        waivers=waivers,
        decisions=decisions,
        plan=plan,
        chart=chart,
        evals=[eval_progress(run) for run in runs],
        timeline=timeline,
        usage_reports=list(request.usage_reports.order_by("-month", "-created_at")[:12]),
        actions=deployment_actions(user, request),
        packet=packet,
        packet_url=packet_url(request),
        findings_waivable=waivable,
        approval=approval,
        approval_current=approval is not None and approval.evidence_digest == request.evidence_digest,
        gate_decisions=gate_decisions(user, request),
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
            "label": labels.gate_decision(row.decision),
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
    """Which forms to show. The services check again; this only hides what would be refused."""
    member = any(team.pk == request.team_id for team in user.teams.all())
    requester = has_role(user, Role.REQUESTER) and member
    own = user.pk == request.requester_id
    review_roles = []
    if not own and request.status == Status.IN_REVIEW:
        if has_role(user, Role.LEGAL_REVIEWER):
            review_roles.append({"value": ReviewRole.LEGAL, "label": labels.review_role(ReviewRole.LEGAL)})
        if has_role(user, Role.ENGINEERING_REVIEWER):
            review_roles.append({"value": ReviewRole.ENGINEERING, "label": labels.review_role(ReviewRole.ENGINEERING)})
    return {
        "submit": requester and request.status == Status.DRAFT,
        "acknowledge": requester and request.status not in (Status.REJECTED, Status.REVOKED, Status.EXPIRED),
        "usage": requester and request.status not in (Status.DRAFT, Status.REJECTED, Status.REVOKED, Status.EXPIRED),
        "start_review": not own
        and request.status == Status.SUBMITTED
        and has_role(user, Role.LEGAL_REVIEWER, Role.ENGINEERING_REVIEWER),
        "accept_obligations": not own and has_role(user, Role.LEGAL_REVIEWER),
        "waive": not own and has_role(user, Role.LEGAL_REVIEWER),
        "review_roles": review_roles,
        "run_eval": has_role(user, Role.ENGINEERING_REVIEWER, Role.ADMIN),
        "revoke": not own and request.status == Status.APPROVED and has_role(user, Role.LEGAL_REVIEWER, Role.ADMIN),
    }


# --- wizard -----------------------------------------------------------------------------------


def wizard_choices(user: Any) -> dict[str, Any]:
    return {
        "artifacts": list(artifacts_visible_to(user).select_related("license").order_by("name")),
        "licenses": list(License.objects.order_by("key").values_list("key", "name")),
        "teams": list(user.teams.order_by("name")),
    }


# --- license catalog --------------------------------------------------------------------------


def license_catalog() -> list[License]:
    versions = LicenseVersion.objects.filter(published_at__isnull=False).order_by("-effective_date")
    return list(License.objects.prefetch_related(Prefetch("versions", queryset=versions)).order_by("key"))


def license_detail(key: str, version: str | None = None) -> dict[str, Any]:
    from governance.core.errors import NotFoundError

    found = License.objects.filter(key=key).first()
    if found is None:
        raise NotFoundError(f"unknown license {key!r}")
    versions = list(found.versions.order_by("-effective_date", "-created_at"))
    current = next((v for v in versions if v.version == version), None) if version else None
    current = current or next((v for v in versions if v.published_at is not None), versions[0] if versions else None)
    terms = list(current.terms.order_by("position")) if current else []
    return {
        "license": found,
        "versions": versions,
        "version": current,
        "terms": [_term_view(t) for t in terms],
    }


def _term_view(term: LicenseTerm) -> dict[str, Any]:
    return {
        "code": term.code,
        "severity": term.severity,
        "severity_label": labels.severity(term.severity),
        "clause": term.clause,
        "message": term.message,
        "how_to_comply": term.how_to_comply,
        "condition": term.condition,
        "confidence": term.confidence,
        "confidence_label": labels.confidence(term.confidence),
        "params": term.params,
    }


def license_version_diff(key: str, old: str, new: str) -> dict[str, Any]:
    """Terms added, removed or changed between two versions (matched by code and clause), and a
    unified diff of the full text when both have one."""
    from governance.core.errors import NotFoundError

    versions = {v.version: v for v in LicenseVersion.objects.filter(license__key=key, version__in=[old, new])}
    if old not in versions or new not in versions:
        raise NotFoundError("no such license version")
    before = {(t.code, t.clause): _term_view(t) for t in versions[old].terms.all()}
    after = {(t.code, t.clause): _term_view(t) for t in versions[new].terms.all()}
    compared = ("severity", "condition", "params", "message", "how_to_comply", "confidence")
    changed = []
    for ref in sorted(before.keys() & after.keys()):
        fields = [{"name": f, "old": before[ref][f], "new": after[ref][f]} for f in compared
                  if before[ref][f] != after[ref][f]]  # fmt: skip
        if fields:
            changed.append({"code": ref[0], "clause": ref[1], "fields": fields})
    text_diff = list(
        difflib.unified_diff(versions[old].text.splitlines(), versions[new].text.splitlines(), old, new, lineterm="")
    )
    return {
        "old": versions[old],
        "new": versions[new],
        "added": [after[ref] for ref in sorted(after.keys() - before.keys())],
        "removed": [before[ref] for ref in sorted(before.keys() - after.keys())],
        "changed": changed,
        "text_diff": text_diff,
    }


# --- clusters and audit -----------------------------------------------------------------------


def clusters() -> list[dict[str, Any]]:
    result = []
    for cluster in Cluster.objects.order_by("name"):
        inventory = cluster.inventory if isinstance(cluster.inventory, dict) else {}
        result.append({"cluster": cluster, "nodes": inventory.get("nodes", []), "gpus": inventory.get("gpus", []),
                       "executor_label": labels.executor(cluster.executor)})  # fmt: skip
    return result


def audit_page(filters: dict[str, Any]) -> QuerySet[AuditEvent]:
    return (
        audit_events_filter(**filters)
        .order_by("-seq")
        .only("seq", "occurred_at", "actor_name", "action", "object_type", "object_id", "data", "hash")
    )


def license_preview(artifact: Any, license_key: str, facts: dict[str, Any]) -> dict[str, Any]:
    """The license decision the request would get, before anything is stored (reads only)."""
    from governance.core.errors import ApplicationError
    from governance.licenses.facts import FactsError
    from governance.licenses.selectors import license_evaluate

    keys = sorted({v.license.key for v in artifact.license_versions()}) if artifact is not None else [license_key]
    keys = [key for key in keys if key]
    results = []
    try:
        for key in keys:
            version, evaluation = license_evaluate(key, facts)
            results.append(
                {
                    "license": key,
                    "name": version.license.name,
                    "version": version.version,
                    "decision": evaluation.decision,
                    "decision_label": labels.decision(evaluation.decision),
                    "findings": [
                        {**f.as_dict(), "severity_label": labels.severity(f.severity),
                         "confidence_label": labels.confidence(f.confidence)}
                        for f in evaluation.findings
                    ],
                }
            )  # fmt: skip
    except FactsError as exc:
        return {"results": [], "errors": dict(exc.fields.items())}
    except ApplicationError as exc:
        return {"results": [], "errors": {"license": exc.message}}
    return {"results": results, "errors": {}, "revenue": facts.get("monthly_revenue"),
            "monthly_active_users": facts.get("monthly_active_users")}  # fmt: skip


# --- CI tokens ----------------------------------------------------------------------------------


def token_teams(user: Any) -> list[Team]:
    """The teams whose CI tokens the user manages: all for an admin, else those they lead."""
    if has_role(user, Role.ADMIN):
        return list(Team.objects.order_by("name"))
    return list(Team.objects.filter(leads=user).order_by("name"))


def may_manage_tokens(user: Any) -> bool:
    if not getattr(user, "is_authenticated", False):
        return False
    return has_role(user, Role.ADMIN) or Team.objects.filter(leads=user).exists()


def ci_tokens(user: Any) -> list[dict[str, Any]]:
    """The team CI tokens the user may see (one query), newest first, with what a row shows."""
    now = timezone.now()
    tokens = ci_tokens_visible_to(user).select_related("team", "created_by").order_by("-created_at")
    return [
        {
            "token": token,
            "expired": token.expires_at is not None and token.expires_at <= now,
            "active": token.revoked_at is None and (token.expires_at is None or token.expires_at > now),
        }
        for token in tokens
    ]


def ci_token(user: Any, code: Any) -> ApiToken | None:
    return ci_tokens_visible_to(user).filter(code=code).first()


# --- packet verification ------------------------------------------------------------------------


def verification_report(report: Any, stored: Any) -> dict[str, Any]:
    """A packet's verification (governance.approvals) as the page shows it."""
    from django.utils.dateparse import parse_datetime

    signatures = []
    for signature in report.signatures:
        signed_at = parse_datetime(signature.signed_at) if signature.signed_at else None
        signatures.append(
            {
                "field": signature.field,
                "role": signature.role or "",
                "role_label": labels.review_role(signature.role) if signature.role else "—",
                "signer": signature.signer,
                "fingerprint": signature.signer_fingerprint,
                "signed_at": signed_at,
                "timestamp_trusted": signature.timestamp_trusted,
                "trusted": signature.trusted,
                "intact": signature.intact,
                "revoked": signature.revoked,
                "accepted": signature.accepted,
                "summary": signature.summary,
            }
        )
    return {
        "pdf_sha256": report.pdf_sha256,
        "deployment": report.deployment_code,
        "evidence_digest": report.evidence_digest,
        "evidence_current": stored.evidence_current,
        "signatures": signatures,
        "all_valid": report.all_valid,
        "legal_valid": stored.legal_valid,
        "engineering_valid": stored.engineering_valid,
        "problems": list(report.problems),
        "verified_at": stored.verified_at,
    }
