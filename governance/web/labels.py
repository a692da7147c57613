"""Translatable names for the codes the apps store (statuses, severities, roles…) and for the
wizard's answers, and the guidance shown with each blocker: who must act, what to do, and where
on the page to do it."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from governance.deployments.reason_text import reason_message, reason_todo

# kind -> stored code -> its name (each table is data: one per kind, written densely)
TABLES: dict[str, dict[str, Any]] = {
    "status": {
        "draft": _("Draft"),
        "submitted": _("Submitted"),
        "in_review": _("In review"),
        "approved": _("Approved"),
        "rejected": _("Rejected"),
        "revoked": _("Revoked"),
        "expired": _("Expired"),
        "withdrawn": _("Withdrawn"),
    },
    "role": {
        "requester": _("Requester"),
        "legal_reviewer": _("Legal reviewer"),
        "engineering_reviewer": _("Engineering reviewer"),
        "auditor": _("Auditor"),
        "admin": _("Administrator"),
    },
    "token_scope": {
        "gate:check": _("Ask the CI gate whether a rollout may proceed"),
        "usage:write": _("Post monthly usage reports"),
    },
    "severity": {
        "blocker": _("Blocker"),
        "approval": _("Licensor approval"),
        "obligation": _("Obligation"),
        "info": _("Information"),
    },
    "decision": {
        "prohibited": _("Prohibited"),
        "licensor_approval_required": _("Licensor approval required"),
        "allowed_with_obligations": _("Allowed with obligations"),
        "allowed": _("Allowed"),
    },
    "confidence": {
        "verified": _("verified against the license text"),
        "secondary": _("from a secondary source"),
        "unverified": _("unverified"),
    },
    "canary_status": {
        "pending": _("Pending"),
        "running": _("Running"),
        "passed": _("Passed"),
        "failed": _("Failed"),
        "inconclusive": _("Inconclusive: waits for engineering"),
        "promoted": _("Promoted by engineering"),
        "rolled_back": _("Rolled back by engineering"),
    },
    "canary_verdict": {"passed": _("passed"), "failed": _("failed"), "inconclusive": _("inconclusive")},
    "plan_figure": {
        "ttft_ms": _("Time to first token (ms)"),
        "tpot_ms": _("Time per output token (ms)"),
        "kv_cache_usage": _("KV-cache usage (share of the planned pool)"),
    },
    "plan_verdict": {
        "as_planned": _("as planned"),
        "worse": _("worse than planned"),
        "no_data": _("no data"),
    },
    "plan_position": {"below": _("below"), "inside": _("inside"), "above": _("above")},
    "memory_part": {
        "weights": _("Weights"),
        "kv_cache": _("KV cache"),
        "activations": _("Activations"),
        "overhead": _("Reserve"),
    },
    "job_state": {
        "queued": _("Queued"),
        "submitting": _("Submitting"),
        "pending": _("Pending on the cluster"),
        "running": _("Running"),
        "succeeded": _("Succeeded"),
        "failed": _("Failed"),
        "cancelled": _("Cancelled"),
        "timeout": _("Timed out"),
        "lost": _("Lost"),
    },
    "eval_status": {
        "running": _("Running"),
        "passed": _("Passed"),
        "failed": _("Failed the gate"),
        "error": _("Error"),
    },
    "obligation_status": {
        "open": _("Open"),
        "acknowledged": _("Acknowledged, waiting for legal"),
        "accepted": _("Accepted by legal"),
        "rejected": _("Not accepted: answer again"),
        "superseded": _("No longer required"),
    },
    "capacity_status": {"pending": _("Computing"), "computed": _("Computed"), "failed": _("Failed")},
    "gate_decision": {"allow": _("Allow"), "deny": _("Deny")},
    "review_role": {"legal": _("Legal"), "engineering": _("Engineering")},
    "verdict": {"approve": _("Approves"), "reject": _("Rejects")},
    # audit actions in words, by their stored name (governance.audit.actions)
    "audit_action": {
        "user.login": _("Signed in"),
        "user.login_failed": _("Sign-in failed"),
        "user.logout": _("Signed out"),
        "api_token.issued": _("API token issued"),
        "api_token.revoked": _("API token revoked"),
        "user.roles_changed": _("User roles changed"),
        "user.changed": _("User changed"),
        "team.members_changed": _("Team members changed"),
        "team.created": _("Team created"),
        "team.leads_changed": _("Team leads changed"),
        "admin.object_changed": _("Changed in the admin"),
        "admin.object_deleted": _("Deleted in the admin"),
        "license.catalog_loaded": _("License catalog loaded"),
        "license.version_published": _("License version published"),
        "license.term_changed": _("License term changed"),
        "license.term_deleted": _("License term deleted"),
        "license.fx_rate_changed": _("Exchange rate changed"),
        "license.evaluated": _("License evaluated"),
        "license.text_classified": _("License text classified"),
        "artifact.registered": _("Model artifact registered"),
        "artifact.updated": _("Model artifact updated"),
        "artifact.shared": _("Model artifact shared"),
        "artifact.inspected": _("Model artifact's files inspected"),
        "artifact.signed": _("Model artifact's files signed (OpenSSF model-signing)"),
        "deployment.created": _("Request created"),
        "deployment.updated": _("Request edited"),
        "deployment.transitioned": _("Request status changed"),
        "deployment.reevaluated": _("Request re-evaluated"),
        "deployment.usage_reported": _("Usage reported"),
        "deployment.waiver_granted": _("Waiver granted"),
        "deployment.waiver_expired": _("Waiver expired"),
        "deployment.waiver_proposed": _("Waiver proposed"),
        "deployment.waiver_confirmed": _("Waiver confirmed"),
        "deployment.obligation_acknowledged": _("Obligation answered"),
        "deployment.obligation_reviewed": _("Obligation reviewed"),
        "capacity.plan_computed": _("Capacity plan computed"),
        "cluster.registered": _("Cluster registered"),
        "job.submitted": _("Cluster job submitted"),
        "job.state_changed": _("Cluster job state changed"),
        "eval.completed": _("Eval completed"),
        "canary.requested": _("Canary analysis requested"),
        "canary.started": _("Canary analysis started"),
        "canary.finished": _("Canary analysis finished"),
        "canary.decided": _("Canary analysis decided by engineering"),
        "canary.plan_exceeded": _("Measured worse than the capacity plan"),
        "fleet.alert": _("The fleet serves beyond its capacity plan"),
        "canary.outside_interval": _("Measured outside the capacity plan's interval"),
        "calibration.completed": _("Calibration completed"),
        "calibration.startup_log_recorded": _("Engine startup log recorded for calibration"),
        "approval.signoff_recorded": _("Sign-off recorded"),
        "approval.signoff_voided": _("Sign-off voided"),
        "approval.signoff_refused": _("Sign-off refused"),
        "approval.packet_signed": _("Approval packet signed"),
        "approval.packet_rendered": _("Approval packet rendered"),
        "approval.packet_render_failed": _("Approval packet render failed"),
        "approval.packet_verified": _("Approval packet verified"),
        "approval.pki_initialised": _("Signing PKI set up"),
        "approval.model_signer_issued": _("Model-signing certificate issued"),
        "approval.certificate_issued": _("Signing certificate issued"),
        "approval.certificate_revoked": _("Signing certificate revoked"),
        "gate.decision": _("CI gate decision"),
        "audit.exported": _("Audit trail exported"),
        "audit.checkpoint": _("Audit checkpoint signed"),
        "audit.checkpoint_refused": _("Audit checkpoint refused"),
    },
    "executor": {"slurm": _("Slurm over SSH"), "local": _("Local subprocess")},
    "use_case": {
        "external_commercial": _("External commercial product"),
        "internal": _("Internal use only"),
        "evaluation": _("Evaluation"),
        "research": _("Research"),
    },
    "derivative": {
        "none": _("None: the weights as published"),
        "fine_tune": _("Fine-tune"),
        "quantize": _("Quantize"),
        "distill": _("Distill"),
        "merge": _("Merge"),
    },
    # What an inspection of a checkpoint's files stored (planner.inspectjob, governance.artifacts.weights):
    # the evidence keeps the codes (the API's and the packet's contract), the pages name them.
    "weights_source": {
        "inspection": _("the files read on the cluster"),
        "config.json": "config.json",
        "quantization_config": "quantization_config",
        "catalog": _("the model catalog"),
        "assumed": _("nothing (assumed)"),
    },
    "inspection_status": {"running": _("Running"), "passed": _("Passed"), "refused": _("Refused"), "error": _("Error")},
    "checkpoint_file": {
        "model_card": _("Model card"),
        "license": _("License"),
        "use_policy": _("Use policy"),
        "notice": _("Notice"),
        "weights": _("Weights"),
        "config": _("Configuration"),
        "tokenizer": _("Tokenizer"),
        "other": _("Other"),
    },
    # The default eval set's categories (planner/evaljob/data); another set's keep their keys.
    "eval_category": {
        "math": _("Math"),
        "code": _("Code"),
        "zh_summary": _("Chinese summaries"),
        "multi_turn": _("Multi-turn"),
    },
    "license_match": {"catalog": _("the catalog's standard text"), "classified": _("classified by legal")},
    "distribution": {"none": _("Not distributed"), "internal": _("Inside the company"), "public": _("Published")},
    "aup": {
        "military": _("Military"),
        "weapons": _("Weapons"),
        "critical_infrastructure": _("Critical infrastructure"),
        "medical_advice": _("Medical advice"),
        "law_enforcement": _("Law enforcement"),
        "immigration": _("Immigration"),
        "surveillance": _("Surveillance"),
        "automated_legal_decisions": _("Automated legal decisions"),
        "disinformation": _("Disinformation"),
        "csam": _("Child sexual abuse material"),
        "illegal_activity": _("Illegal activity"),
        "impersonation": _("Impersonation"),
        "malware": _("Malware"),
        "harassment": _("Harassment"),
        "unlicensed_professional_practice": _("Unlicensed professional practice"),
        "discrimination": _("Discrimination"),
        "personal_data": _("Personal data without consent"),
        "fraud": _("Fraud, scams, phishing"),
        "spam": _("Spam"),
        "undisclosed_ai_content": _("Undisclosed AI-generated content"),
        "defamation": _("Defamation"),
        "sexually_explicit": _("Sexually explicit content"),
        "violent_extremism": _("Violent extremism or terrorism"),
        "self_harm": _("Promoting self-harm"),
        "ip_infringement": _("Intellectual-property infringement"),
        "safety_circumvention": _("Circumventing safety filters"),
    },
}


def label(kind: str, code: str) -> str:
    """The name of `code` among `kind`'s codes (the code itself when it has none); an unknown kind
    is a KeyError, so a misspelt one fails in the tests rather than showing raw codes."""
    return str(TABLES[kind].get(code, code))


def choices(kind: str, codes: Iterable[str] | None = None) -> list[tuple[str, Any]]:
    """(code, lazy name) pairs for a form field, in the order of `codes` (else the table's)."""
    table = TABLES[kind]
    return [(code, table[code]) for code in (table if codes is None else codes)]


# A fact left out (the engine's `facts.assumed` finding, params `field` and `value`): its conservative
# value in the reader's words. The engine's English `message` stays the API's and the evidence's.
_ASSUMED_WORDS: dict[str, Any] = {
    "monthly_active_users": _("not stated: every user threshold counts as crossed"),
    "monthly_active_users_at_model_release": _("not stated: the current monthly active users count"),
    "monthly_revenue": _("not stated: every revenue threshold counts as crossed"),
    "org_country": _("not stated: every territorial restriction counts as applying"),
    "derivative": _("a fine-tune, distributed publicly"),
    "intended_uses": _("none"),
    "use_case": TABLES["use_case"]["external_commercial"],
}


def finding_words(finding: dict[str, Any]) -> dict[str, Any]:
    """A license finding's `message` and `how_to_comply` for a page, in the reader's language where the
    service itself wrote them (`facts.assumed`); a catalog term's own words (the license's) as they are."""
    params = finding.get("params") or {}
    name = params.get("field")
    if finding.get("code") != "facts.assumed" or not isinstance(name, str):
        return {}
    value = params.get("value")
    if name in _ASSUMED_WORDS:
        assumed = str(_ASSUMED_WORDS[name])
    elif isinstance(value, bool):
        assumed = gettext("yes") if value else gettext("no")
    else:
        assumed = str(value)
    return {
        "message": gettext("%(field)s was not given; assumed the most conservative value: %(value)s.")
        % {"field": name, "value": assumed},
        "how_to_comply": gettext("Provide facts.%(field)s for a precise evaluation.") % {"field": name},
    }


def _anchor(code: str) -> str:
    """The anchor of the form on the request page that acts on a readiness reason."""
    if code == "obligation.not_accepted":
        return "obligations"
    if code.startswith("capacity."):
        return "capacity"
    if code.startswith("eval."):
        return "evals"
    if code in ("license.unidentified", "license.mismatch", "license.file_missing") or code.startswith(
        ("weights.", "artifact.")
    ):
        return "checkpoint"
    if code.startswith("license."):
        return "waivers"
    return "signoff"


def blocker_guidance(blocker: dict[str, Any], request: Any) -> dict[str, Any]:
    """Who must act on a readiness reason (its `role`), what to do, and the anchor of the form."""
    code, role = blocker["code"], blocker.get("role", "")
    who = {
        "requester": gettext("Requester"),
        "legal": gettext("Legal reviewer"),
        "engineering": gettext("Engineering reviewer"),
        "nobody": gettext("Nobody (wait)"),
        "pipeline": gettext("Pipeline owner"),
    }.get(role, role)
    todo, anchor = reason_todo(code, role), _anchor(code)
    severity = blocker.get("severity", "blocker")
    message_text = reason_message(blocker)  # the reader's language; `message` stays English (API)
    return {
        **blocker,
        "message_text": message_text,
        "severity_label": label("severity", severity),
        "who": who,
        "todo": todo,
        "anchor": anchor,
    }


def audit_action_names() -> dict[int, str]:
    """Each audit action's name, by stored value, as AuditEvent.get_action_display() gives it (which
    builds this mapping of every choice on each call: read it once per page instead)."""
    from governance.audit.models import AuditEvent

    words = TABLES["audit_action"]
    return {value: str(words.get(str(name), name)) for value, name in AuditEvent._meta.get_field("action").flatchoices}
