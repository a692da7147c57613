"""Every write to deployment requests, split by concern. Each runs in one transaction, locks the
request row (select_for_update) and writes its audit events in that transaction; Celery work and
e-mail are queued with transaction.on_commit.

- transitions: the row lock, permission checks, deployment_transition (the only status change), expiry
- evidence: license evaluations, obligations derived from them, the evidence document and its refresh
- lifecycle: create, update, submit, review, revoke
- obligations, waivers, usage: what hangs off a request

Callers import from `governance.deployments.services`; the submodules are the layout, not the API."""

from governance.deployments.selectors import deployment_blockers
from governance.deployments.services.evidence import (
    build_evidence,
    deployment_evidence_refresh,
    deployments_reevaluate,
    on_artifact_inspected,
    on_capacity_plan_computed,
    on_eval_finished,
    on_license_text_classified,
    on_license_version_published,
    on_startup_log_recorded,
    planner_inputs,
    serving_plan_inputs,
    validate_facts,
)
from governance.deployments.services.lifecycle import (
    EVIDENCE_FIELDS,
    deployment_create,
    deployment_revoke,
    deployment_start_review,
    deployment_submit,
    deployment_update,
    deployment_withdraw,
    require_servable_precision,
)
from governance.deployments.services.obligations import obligation_acknowledge, obligation_review
from governance.deployments.services.transitions import (
    SYSTEM,
    Actor,
    deployment_lock,
    deployment_transition,
    deployments_expire_approvals,
)
from governance.deployments.services.usage import usage_report_record
from governance.deployments.services.waivers import PermissionDocument, waiver_confirm, waiver_grant, waivers_expire

__all__ = [
    "EVIDENCE_FIELDS",
    "SYSTEM",
    "Actor",
    "PermissionDocument",
    "build_evidence",
    "deployment_blockers",
    "deployment_create",
    "deployment_evidence_refresh",
    "deployment_lock",
    "deployment_revoke",
    "deployment_start_review",
    "deployment_submit",
    "deployment_transition",
    "deployment_update",
    "deployment_withdraw",
    "deployments_expire_approvals",
    "deployments_reevaluate",
    "obligation_acknowledge",
    "obligation_review",
    "on_artifact_inspected",
    "on_capacity_plan_computed",
    "on_eval_finished",
    "on_license_text_classified",
    "on_license_version_published",
    "on_startup_log_recorded",
    "planner_inputs",
    "require_servable_precision",
    "serving_plan_inputs",
    "usage_report_record",
    "validate_facts",
    "waiver_confirm",
    "waiver_grant",
    "waivers_expire",
]
