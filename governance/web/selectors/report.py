"""The period report: every approval, revocation and waiver in a date range, with what an auditor
checks for each (request, model and artifact digest, license decision, obligations, signers,
evidence digest, packet hash, gate decisions). Each row names its audit event (seq and hash), so it
can be checked against the events of an audit bundle covering the same range."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, date, datetime, time, timedelta

from governance.approvals.packet_content import DECISIONS, summary
from governance.audit.actions import AuditAction
from governance.audit.models import AuditEvent
from governance.audit.selectors import audit_events_of_actions
from governance.deployments.choices import Status
from governance.deployments.models import DeploymentRequest, SignOff
from governance.gate.models import GateDecision

REPORT_COLUMNS = (
    "kind",
    "occurred_at",
    "request",
    "product",
    "team",
    "model",
    "artifact_digest",
    "license_decision",
    "obligations",
    "signers",
    "evidence_digest",
    "packet_sha256",
    "gate_decisions",
    "audit_seq",
    "audit_hash",
)
_KINDS = {
    AuditAction.WAIVER_GRANTED: "waiver granted",
    AuditAction.WAIVER_CONFIRMED: "waiver confirmed",
}
_TRANSITION_KINDS: dict[str, str] = {Status.APPROVED: "approval", Status.REVOKED: "revocation"}


def report_range(since: date, until: date) -> tuple[datetime, datetime]:
    """Whole UTC days, `until` included."""
    return datetime.combine(since, time.min, UTC), datetime.combine(until + timedelta(days=1), time.min, UTC)


def period_report(since: date, until: date) -> list[dict[str, str]]:
    start, end = report_range(since, until)
    actions = [AuditAction.DEPLOYMENT_TRANSITIONED, *_KINDS]
    events = list(audit_events_of_actions(actions, start, end))
    events = [
        e for e in events if e.action != AuditAction.DEPLOYMENT_TRANSITIONED or e.data.get("to") in _TRANSITION_KINDS
    ]
    codes = {e.object_id for e in events}
    deployments = {
        str(d.code): d for d in DeploymentRequest.objects.filter(code__in=codes).select_related("team", "artifact")
    }
    signoffs: dict[tuple[int, str], list[SignOff]] = {}
    signed = SignOff.objects.filter(deployment__in=deployments.values(), signature__isnull=False)
    for signoff in signed.select_related("signature").order_by("signed_at"):
        signoffs.setdefault((signoff.deployment_id, signoff.evidence_digest), []).append(signoff)
    gate = Counter(
        GateDecision.objects.filter(
            deployment__in=deployments.values(), created_at__gte=start, created_at__lt=end
        ).values_list("deployment_id", "decision")
    )
    return [_row(event, deployments.get(event.object_id), signoffs, gate) for event in events]


def _row(
    event: AuditEvent,
    deployment: DeploymentRequest | None,
    signoffs: dict[tuple[int, str], list[SignOff]],
    gate: Counter[tuple[int, str]],
) -> dict[str, str]:
    data = event.data or {}
    kind = _TRANSITION_KINDS.get(str(data.get("to")), "") or _KINDS.get(AuditAction(event.action), "")
    digest = str(data.get("evidence_digest") or (deployment.evidence_digest if deployment else ""))
    row = dict.fromkeys(REPORT_COLUMNS, "")
    row.update(
        kind=kind,
        occurred_at=event.occurred_at.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC"),
        request=event.object_id,
        evidence_digest=digest,
        audit_seq=str(event.seq),
        audit_hash=event.hash,
    )
    if deployment is None:
        return row
    signed = signoffs.get((deployment.pk, digest), [])
    row.update(
        product=deployment.product_name,
        team=deployment.team.name,
        model=f"{deployment.artifact.name} ({deployment.artifact.source_repo}@{deployment.artifact.revision})",
        artifact_digest=deployment.artifact.weights_digest,
        signers="; ".join(
            f"{s.role}: {s.signer_name} ({s.decision}, {s.signed_at.astimezone(UTC):%Y-%m-%d %H:%M} UTC)"
            for s in signed
        ),
        packet_sha256=signed[-1].signature.pdf_sha256 if signed else "",
        gate_decisions=", ".join(
            f"{gate[(deployment.pk, outcome)]} {outcome}"
            for outcome in ("allow", "deny")
            if gate[(deployment.pk, outcome)]
        )
        or "none",
    )
    if kind.startswith("waiver"):
        row["license_decision"] = (
            f"waiver of {data.get('license', '')} {data.get('code', data.get('finding', ''))}".strip()
        )
    # The evidence document of that moment is the request's current one when the digests agree;
    # otherwise the bundle's events and the packet (by its hash) carry it.
    evidence = deployment.evidence if deployment.evidence and deployment.evidence_digest == digest else None
    if evidence is not None:
        if not kind.startswith("waiver"):
            row["license_decision"] = "; ".join(
                f"{item.get('license')} {item.get('version')}: {DECISIONS.get(str(item.get('decision')), 'not stated')}"
                for item in evidence.get("licenses") or []
            )
        row["obligations"] = summary(evidence, "")["obligations"]
    elif not row["license_decision"]:
        row["license_decision"] = "evidence changed since: see the packet and the audit bundle"
    return row
