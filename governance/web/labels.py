"""Translatable names for the codes the apps store (statuses, severities, roles…) and the guidance
shown with each blocker: who must act, what to do, and where on the page to do it."""

from __future__ import annotations

from typing import Any

from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

STATUS = {
    "draft": gettext_lazy("Draft"),
    "submitted": gettext_lazy("Submitted"),
    "in_review": gettext_lazy("In review"),
    "approved": gettext_lazy("Approved"),
    "rejected": gettext_lazy("Rejected"),
    "revoked": gettext_lazy("Revoked"),
    "expired": gettext_lazy("Expired"),
}
ROLE = {
    "requester": gettext_lazy("Requester"),
    "legal_reviewer": gettext_lazy("Legal reviewer"),
    "engineering_reviewer": gettext_lazy("Engineering reviewer"),
    "auditor": gettext_lazy("Auditor"),
    "admin": gettext_lazy("Administrator"),
}
GATE_DECISION = {"allow": gettext_lazy("Allow"), "deny": gettext_lazy("Deny")}
TOKEN_SCOPE = {
    "gate:check": gettext_lazy("Ask the CI gate whether a rollout may proceed"),
    "usage:write": gettext_lazy("Post monthly usage reports"),
}
REVIEW_ROLE = {"legal": gettext_lazy("Legal"), "engineering": gettext_lazy("Engineering")}
SEVERITY = {
    "blocker": gettext_lazy("Blocker"),
    "approval": gettext_lazy("Licensor approval"),
    "obligation": gettext_lazy("Obligation"),
    "info": gettext_lazy("Information"),
}
DECISION = {
    "prohibited": gettext_lazy("Prohibited"),
    "licensor_approval_required": gettext_lazy("Licensor approval required"),
    "allowed_with_obligations": gettext_lazy("Allowed with obligations"),
    "allowed": gettext_lazy("Allowed"),
}
CONFIDENCE = {
    "verified": gettext_lazy("verified against the license text"),
    "secondary": gettext_lazy("from a secondary source"),
    "unverified": gettext_lazy("unverified"),
}
MEMORY_PART = {
    "weights": gettext_lazy("Weights"),
    "kv_cache": gettext_lazy("KV cache"),
    "activations": gettext_lazy("Activations"),
    "overhead": gettext_lazy("Reserve"),
}
JOB_STATE = {
    "queued": gettext_lazy("Queued"),
    "submitting": gettext_lazy("Submitting"),
    "pending": gettext_lazy("Pending on the cluster"),
    "running": gettext_lazy("Running"),
    "succeeded": gettext_lazy("Succeeded"),
    "failed": gettext_lazy("Failed"),
    "cancelled": gettext_lazy("Cancelled"),
    "timeout": gettext_lazy("Timed out"),
    "lost": gettext_lazy("Lost"),
}
EVAL_STATUS = {
    "running": gettext_lazy("Running"),
    "passed": gettext_lazy("Passed"),
    "failed": gettext_lazy("Failed the gate"),
    "error": gettext_lazy("Error"),
}
OBLIGATION_STATUS = {
    "open": gettext_lazy("Open"),
    "acknowledged": gettext_lazy("Acknowledged, waiting for legal"),
    "accepted": gettext_lazy("Accepted by legal"),
    "rejected": gettext_lazy("Not accepted: answer again"),
    "superseded": gettext_lazy("No longer required"),
}
EXECUTOR = {"slurm": gettext_lazy("Slurm over SSH"), "local": gettext_lazy("Local subprocess")}
CAPACITY_STATUS = {
    "pending": gettext_lazy("Computing"),
    "computed": gettext_lazy("Computed"),
    "failed": gettext_lazy("Failed"),
}


def _label(table: dict[str, Any], code: str) -> str:
    return str(table.get(code, code))


def status(code: str) -> str:
    return _label(STATUS, code)


def role(code: str) -> str:
    return _label(ROLE, code)


def review_role(code: str) -> str:
    return _label(REVIEW_ROLE, code)


def gate_decision(code: str) -> str:
    return _label(GATE_DECISION, code)


def token_scope(code: str) -> str:
    return _label(TOKEN_SCOPE, code)


def severity(code: str) -> str:
    return _label(SEVERITY, code)


def decision(code: str) -> str:
    return _label(DECISION, code)


def confidence(code: str) -> str:
    return _label(CONFIDENCE, code)


def memory_part(code: str) -> str:
    return _label(MEMORY_PART, code)


def job_state(code: str) -> str:
    return _label(JOB_STATE, code)


def eval_status(code: str) -> str:
    return _label(EVAL_STATUS, code)


def obligation_status(code: str) -> str:
    return _label(OBLIGATION_STATUS, code)


def executor(code: str) -> str:
    return _label(EXECUTOR, code)


def capacity_status(code: str) -> str:
    return _label(CAPACITY_STATUS, code)


def blocker_guidance(blocker: dict[str, Any], request: Any) -> dict[str, Any]:
    """Who must act on a blocker, what to do, and the anchor of the form that does it."""
    code, sev = blocker["code"], blocker.get("severity", "blocker")
    if code == "obligation.not_accepted":
        if "acknowledged" in blocker["message"]:
            who, todo = _("Legal reviewer"), _("Accept or reject how the requester meets this obligation.")
        else:
            who, todo = _("Requester"), _("Say how this obligation is met.")
        anchor = "obligations"
    elif code.startswith("capacity."):
        if code == "capacity.pending":
            who, todo = _("Nobody (wait)"), _("The capacity plan is computing; this page updates when it is done.")
        else:
            who, todo = _("Requester"), _("Change the serving plan (GPUs, precision, parallel layout) so that it fits.")
        anchor = "capacity"
    elif code == "eval.pending":
        who, todo, anchor = _("Nobody (wait)"), _("The eval run is in progress."), "evals"
    elif code.startswith("eval."):
        who, todo, anchor = (
            _("Engineering reviewer"),
            _("Run the eval again, or the requester changes the precision."),
            "evals",
        )
    elif sev == "approval":
        who, todo, anchor = (
            _("Legal reviewer"),
            _("Obtain the licensor's approval, then record it as a waiver with its reference."),
            "waivers",
        )
    else:
        who, todo, anchor = (
            _("Requester or legal reviewer"),
            _("Change the deployment so the term no longer applies, or legal records a waiver."),
            "waivers",
        )
    return {**blocker, "severity_label": severity(sev), "who": who, "todo": todo, "anchor": anchor}
