"""Audit event types, in numbered ranges per area (like Zulip's RealmAuditLog)."""

from django.db import models


class AuditAction(models.IntegerChoices):
    # 100-199: identity and access
    USER_LOGIN = 100, "user.login"
    USER_LOGIN_FAILED = 101, "user.login_failed"
    USER_LOGOUT = 102, "user.logout"
    API_TOKEN_ISSUED = 110, "api_token.issued"
    API_TOKEN_REVOKED = 111, "api_token.revoked"
    USER_ROLES_CHANGED = 120, "user.roles_changed"
    USER_CHANGED = 121, "user.changed"
    TEAM_MEMBERS_CHANGED = 130, "team.members_changed"
    TEAM_CREATED = 131, "team.created"
    TEAM_LEADS_CHANGED = 132, "team.leads_changed"
    # admin edits of records that have no service of their own (configuration)
    ADMIN_OBJECT_CHANGED = 150, "admin.object_changed"
    ADMIN_OBJECT_DELETED = 151, "admin.object_deleted"
    # 200-299: license catalog and evaluations
    LICENSE_CATALOG_LOADED = 200, "license.catalog_loaded"
    LICENSE_VERSION_PUBLISHED = 201, "license.version_published"
    LICENSE_TERM_CHANGED = 202, "license.term_changed"
    LICENSE_TERM_DELETED = 203, "license.term_deleted"
    FX_RATE_CHANGED = 210, "license.fx_rate_changed"
    LICENSE_EVALUATED = 220, "license.evaluated"
    LICENSE_TEXT_CLASSIFIED = 230, "license.text_classified"
    # 300-399: model artifacts
    ARTIFACT_REGISTERED = 300, "artifact.registered"
    ARTIFACT_UPDATED = 301, "artifact.updated"
    ARTIFACT_SHARED = 302, "artifact.shared"
    ARTIFACT_INSPECTED = 303, "artifact.inspected"
    ARTIFACT_SIGNED = 304, "artifact.signed"
    # 400-499: deployment requests
    DEPLOYMENT_CREATED = 400, "deployment.created"
    DEPLOYMENT_UPDATED = 401, "deployment.updated"
    DEPLOYMENT_TRANSITIONED = 402, "deployment.transitioned"
    DEPLOYMENT_REEVALUATED = 403, "deployment.reevaluated"
    DEPLOYMENT_USAGE_REPORTED = 410, "deployment.usage_reported"
    WAIVER_GRANTED = 420, "deployment.waiver_granted"
    WAIVER_EXPIRED = 421, "deployment.waiver_expired"
    WAIVER_PROPOSED = 422, "deployment.waiver_proposed"  # a blocker's waiver, before a second reviewer
    WAIVER_CONFIRMED = 423, "deployment.waiver_confirmed"
    OBLIGATION_ACKNOWLEDGED = 430, "deployment.obligation_acknowledged"
    OBLIGATION_REVIEWED = 431, "deployment.obligation_reviewed"
    # 500-599: capacity plans
    CAPACITY_PLAN_COMPUTED = 500, "capacity.plan_computed"
    # 600-699: cluster jobs and eval runs
    CLUSTER_REGISTERED = 600, "cluster.registered"
    JOB_SUBMITTED = 610, "job.submitted"
    JOB_STATE_CHANGED = 611, "job.state_changed"
    EVAL_COMPLETED = 620, "eval.completed"
    CALIBRATION_COMPLETED = 630, "calibration.completed"
    STARTUP_LOG_RECORDED = 631, "calibration.startup_log_recorded"  # a cluster's startup log: plan evidence
    # 700-799: approvals and signatures
    SIGNOFF_RECORDED = 700, "approval.signoff_recorded"
    SIGNOFF_VOIDED = 701, "approval.signoff_voided"
    SIGNOFF_REFUSED = 702, "approval.signoff_refused"
    PACKET_SIGNED = 710, "approval.packet_signed"
    PACKET_RENDERED = 711, "approval.packet_rendered"
    PACKET_VERIFIED = 712, "approval.packet_verified"
    PACKET_RENDER_FAILED = 713, "approval.packet_render_failed"
    PKI_INITIALISED = 720, "approval.pki_initialised"
    CERTIFICATE_ISSUED = 721, "approval.certificate_issued"
    CERTIFICATE_REVOKED = 722, "approval.certificate_revoked"
    MODEL_SIGNER_ISSUED = 723, "approval.model_signer_issued"
    # 800-899: CI gate
    GATE_DECISION = 800, "gate.decision"
    CANARY_REQUESTED = 810, "canary.requested"
    CANARY_STARTED = 811, "canary.started"
    CANARY_FINISHED = 812, "canary.finished"
    CANARY_DECIDED = 813, "canary.decided"  # an engineering reviewer promoted or rolled back an inconclusive one
    CANARY_PLAN_EXCEEDED = 814, "canary.plan_exceeded"  # measured worse than the capacity plan: for engineering
    FLEET_ALERT = 815, "fleet.alert"  # a promoted deployment's figures sustained beyond its plan
    # a canary's or the fleet's TTFT/TPOT outside the capacity plan's interval: for engineering
    CANARY_OUTSIDE_INTERVAL = 816, "canary.outside_interval"
    # 900-999: the audit trail itself
    AUDIT_EXPORTED = 900, "audit.exported"
    AUDIT_CHECKPOINT = 901, "audit.checkpoint"
    AUDIT_CHECKPOINT_REFUSED = 902, "audit.checkpoint_refused"
