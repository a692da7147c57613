"""Clusters, the audit trail, team CI tokens and packet verification, as their pages show them."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from django.utils import timezone

from governance.audit.models import AuditEvent
from governance.audit.selectors import audit_events_filter, audit_events_visible_to
from governance.core.models import ApiToken, Team
from governance.core.roles import Role, has_role
from governance.evaluations.models import Cluster
from governance.gate.selectors import ci_tokens_visible_to
from governance.web import labels

# --- clusters and audit -----------------------------------------------------------------------


def clusters() -> list[dict[str, Any]]:
    result = []
    for cluster in Cluster.objects.order_by("name"):
        inventory = cluster.inventory if isinstance(cluster.inventory, dict) else {}
        result.append(
            {
                "cluster": cluster,
                "nodes": inventory.get("nodes", []),
                "gpus": inventory.get("gpus", []),
                "executor_label": labels.label("executor", cluster.executor),
            }
        )
    return result


def audit_page(user: Any, filters: dict[str, Any]) -> QuerySet[AuditEvent]:
    """The events the user may see (the API's restriction), newest first."""
    return (
        audit_events_visible_to(user, audit_events_filter(**filters))
        .order_by("-seq")
        .only("seq", "occurred_at", "actor_name", "action", "object_type", "object_id")  # what a row shows
    )


# --- CI tokens ----------------------------------------------------------------------------------


def token_teams(user: Any) -> list[Team]:
    """The teams whose CI tokens the user manages: all for an admin, else those they lead."""
    if has_role(user, Role.ADMIN):
        return list(Team.objects.order_by("name"))
    return list(Team.objects.filter(leads=user).order_by("name"))


def ci_tokens(user: Any) -> list[dict[str, Any]]:
    """The team CI tokens the user may see (one query), newest first, with what a row shows."""
    now = timezone.now()
    tokens = ci_tokens_visible_to(user).order_by("-created_at")  # with its team: what a row shows
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


def verification_job(user: Any, code: Any) -> Any:
    """The user's own upload verification (None for another user's: a 404, as for none)."""
    from governance.approvals.selectors import verification_job_of

    return verification_job_of(user, code)


def verification_report(result: dict[str, Any]) -> dict[str, Any]:
    """An upload's verification report as the heavy worker stored it (the API's `report`: what the
    file proves, and what its uploader may know of the request it names) as the page shows it."""
    from django.utils.dateparse import parse_datetime

    signatures = []
    for signature in result.get("signatures", []):
        signed_at = parse_datetime(signature["signed_at"]) if signature.get("signed_at") else None
        role = signature.get("role") or ""
        signatures.append(
            {
                "field": signature["field"],
                "role": role,
                "role_label": labels.label("review_role", role) if role else "—",
                "signer": signature["signer"],
                "fingerprint": signature["signer_fingerprint"],
                "signed_at": signed_at,
                "timestamp_trusted": signature["timestamp_trusted"],
                "trusted": signature["trusted"],
                "intact": signature["intact"],
                "revoked": signature["revoked"],
                "accepted": signature["accepted"],
                "summary": signature["summary"],
            }
        )
    verified_at = result.get("verified_at")
    evidence_current = bool(result.get("evidence_current"))
    all_valid = bool(result.get("all_valid"))
    return {
        "pdf_sha256": result.get("pdf_sha256", ""),
        "deployment": result.get("deployment", ""),
        "evidence_digest": result.get("evidence_digest", ""),
        "evidence_current": evidence_current,
        "signatures": signatures,
        "all_valid": all_valid,
        "legal_valid": bool(result.get("legal_valid")),
        "engineering_valid": bool(result.get("engineering_valid")),
        "problems": list(result.get("problems", [])),
        "verified_at": parse_datetime(verified_at) if isinstance(verified_at, str) else verified_at,
        # Valid signatures over evidence the request no longer has: not the approval any more.
        "superseded": bool(all_valid and not evidence_current and result.get("request")),
        "current_url": _current_packet_url(result.get("request")),
    }


def _current_packet_url(code: str | None) -> str:
    """Where the request's current packet is: its sign-off section (which links the live packet,
    if one is rendered, and says what still blocks approval). Visibility is checked there."""
    from django.urls import reverse

    return reverse("web:deployment", args=[code]) + "#signoff" if code else ""
