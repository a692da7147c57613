"""The gate's conditions: the readiness rule (deployments.readiness, the same function the sign-off
service, the request page and the packet read) plus the gate's own deploy-time checks — the
request's status and expiry, the environment, the signed packet verifying, the artifact digest and
the serving envelope. A pure function of stored state: no query, no PDF parsing, no license
evaluation, no planner run. Each failed condition is a reason naming who must act."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from governance.deployments.choices import Status
from governance.deployments.envelope import approved_envelope
from governance.deployments.readiness import (
    CANARY_CODES,
    ENGINEERING,
    LEGAL,
    PIPELINE,
    REQUESTER,
    SIGNING_ROLES,
    Actor,
    ReadinessState,
    Reason,
    ReasonCode,
    approved_evals,
    readiness,
    regressed_evals,
    regressed_reason,
)
from governance.deployments.readiness import approved_parallelism as evidence_parallelism

# The reasons only the gate gives: everything else comes from the readiness rule, so a request's
# page lists exactly the gate's reasons less these.
DEPLOY_TIME_CODES = frozenset(
    {
        ReasonCode.NOT_APPROVED,
        ReasonCode.REVOKED,
        ReasonCode.EXPIRED,
        ReasonCode.ENVIRONMENT_NOT_APPROVED,
        ReasonCode.SIGNATURE_INVALID,
        ReasonCode.ARTIFACT_DIGEST_MISMATCH,
        ReasonCode.SERVING_ENGINE,
        ReasonCode.SERVING_ENGINE_VERSION,
        ReasonCode.SERVING_ENGINE_VERSION_MISSING,
        ReasonCode.SERVING_PRECISION,
        ReasonCode.SERVING_KV_DTYPE,
        ReasonCode.SERVING_GPU,
        ReasonCode.SERVING_PARALLELISM,
        ReasonCode.SERVING_MAX_MODEL_LEN,
        ReasonCode.SERVING_MEMORY_UTILIZATION,
        *CANARY_CODES,  # given by governance.canary at the gate (gate.services calls it)
    }
)


@dataclass(frozen=True, slots=True)
class GateState:
    """What the gate reads, loaded by selectors.gate_deployment_for_token in one indexed query."""

    status: str
    approval_expires_at: datetime | None
    environments: list[str]
    readiness: ReadinessState
    # Per role: does the stored verification of the completed packet say its PAdES signature is
    # valid over the signed evidence? None while no completed packet was verified.
    packet_valid: Mapping[str, bool] | None = None

    @property
    def evidence(self) -> Mapping[str, Any]:
        return self.readiness.evidence


@dataclass(frozen=True, slots=True)
class GateCheck:
    environment: str
    artifact_digest: str
    serving: dict[str, Any]


def evaluate(state: GateState, check: GateCheck, now: datetime, *, require_engine_version: bool = True) -> list[Reason]:
    """Every reason to deny; an empty list is an allow. `require_engine_version` (the setting
    GATE_REQUIRE_ENGINE_VERSION): a check must name the engine version when the approved evals
    recorded the one they served."""
    reasons: list[Reason] = []
    reasons += _status(state, now)
    if check.environment not in state.environments:
        reasons.append(
            Reason(
                ReasonCode.ENVIRONMENT_NOT_APPROVED,
                f"environment {check.environment!r} is not among the approved ones ({', '.join(state.environments) or 'none'})",
                f"{REQUESTER} adds the environment to the request and the reviewers approve it again",
                Actor.REQUESTER,
            )
        )
    reasons += readiness(state.readiness, now)
    reasons += _packet(state)
    reasons += _artifact(state, check)
    reasons += _serving(state, check, require_engine_version)
    return reasons


def _status(state: GateState, now: datetime) -> list[Reason]:
    if state.status == Status.APPROVED:
        if state.approval_expires_at is not None and state.approval_expires_at <= now:
            return [
                Reason(
                    ReasonCode.EXPIRED,
                    f"the approval expired at {state.approval_expires_at.isoformat()}",
                    f"{REQUESTER} opens a new deployment request for review",
                    Actor.REQUESTER,
                )
            ]
        return []
    if state.status == Status.REVOKED:
        return [
            Reason(
                ReasonCode.REVOKED,
                "the approval was revoked",
                f"{REQUESTER} opens a new deployment request; {LEGAL} reviews it",
                Actor.REQUESTER,
            )
        ]
    if state.status == Status.EXPIRED:
        return [
            Reason(
                ReasonCode.EXPIRED,
                "the approval expired",
                f"{REQUESTER} opens a new deployment request for review",
                Actor.REQUESTER,
            )
        ]
    return [
        Reason(
            ReasonCode.NOT_APPROVED,
            f"the deployment request is {state.status}, not approved",
            f"{LEGAL} and {ENGINEERING} review and approve the current evidence",
            Actor.LEGAL,
        )
    ]


def _packet(state: GateState) -> list[Reason]:
    """A current signature counts only when the verification of the completed PDF packet says that
    role's PAdES signature is valid over the same evidence (a sign-off row without a verified
    packet, or a packet whose signature no longer verifies, is `signature.invalid`)."""
    current = {
        role
        for role in SIGNING_ROLES
        if (signature := state.readiness.signatures.get(role)) is not None
        and not signature.voided
        and signature.evidence_digest == state.readiness.evidence_digest
    }
    if not current or (state.status != Status.APPROVED and state.packet_valid is None):
        return []  # nothing signed yet, or the packet is still being signed (no completed file)
    reasons = []
    for role in SIGNING_ROLES:
        if role in current and not (state.packet_valid or {}).get(role, False):
            who = LEGAL if role == "legal" else ENGINEERING
            reasons.append(
                Reason(
                    ReasonCode.SIGNATURE_INVALID,
                    f"the {role} signature of the approval packet does not verify",
                    f"{who} signs the approval packet again; an admin investigates the tampering",
                    Actor.LEGAL if role == "legal" else Actor.ENGINEERING,
                )
            )
    return reasons


def _artifact(state: GateState, check: GateCheck) -> list[Reason]:
    approved = (state.evidence.get("artifact") or {}).get("weights_digest", "")
    if check.artifact_digest.lower() != str(approved).lower():
        return [
            Reason(
                ReasonCode.ARTIFACT_DIGEST_MISMATCH,
                f"artifact_digest {check.artifact_digest} is not the approved weights {approved}",
                f"{PIPELINE} deploys the approved weights, or {REQUESTER} registers these weights in a new request",
                Actor.PIPELINE,
            )
        ]
    return []


def approved_parallelism(state: GateState) -> dict[str, int]:
    """tp/pp/ep as approved (deployments.readiness.approved_parallelism of the evidence)."""
    return evidence_parallelism(state.evidence)


def _serving(state: GateState, check: GateCheck, require_engine_version: bool) -> list[Reason]:
    envelope = approved_envelope(state.evidence)  # the request page's and the packet's envelope
    serving = check.serving
    reasons = []
    fix = f"{PIPELINE} deploys the approved configuration, or {REQUESTER} changes the serving plan for re-approval"
    for name, code in (
        ("engine", ReasonCode.SERVING_ENGINE),
        ("precision", ReasonCode.SERVING_PRECISION),
        ("gpu", ReasonCode.SERVING_GPU),
    ):
        if serving[name] != envelope[name]:
            reasons.append(
                Reason(code, f"{name} {serving[name]!r} is not the approved {envelope[name]!r}", fix, Actor.PIPELINE)
            )
    if serving.get("kv_dtype") is not None and serving["kv_dtype"] != envelope["kv_dtype"]:
        reasons.append(
            Reason(
                ReasonCode.SERVING_KV_DTYPE,
                f"kv_dtype {serving['kv_dtype']!r} is not the approved {envelope['kv_dtype']!r}",
                fix,
                Actor.PIPELINE,
            )
        )
    approved = approved_parallelism(state)
    differing = [f"{n}={serving[n]} (approved {approved[n]})" for n in ("tp", "pp", "ep") if serving[n] != approved[n]]
    if differing:
        reasons.append(
            Reason(ReasonCode.SERVING_PARALLELISM, "parallelism differs: " + ", ".join(differing), fix, Actor.PIPELINE)
        )
    max_len = envelope["max_model_len"]
    if max_len is None or serving["max_model_len"] > max_len:
        reasons.append(
            Reason(
                ReasonCode.SERVING_MAX_MODEL_LEN,
                f"max_model_len {serving['max_model_len']} is above the approved {max_len}",
                fix,
                Actor.PIPELINE,
            )
        )
    wanted_version = serving.get("engine_version")
    covering = approved_evals(state.evidence)
    versions = sorted({str(run.get("engine_version")) for run in covering})
    recorded = sorted({str(version) for run in covering if (version := run.get("engine_version"))})
    if not wanted_version and recorded and require_engine_version:
        # The approval is bound to the versions its evals served: a check that does not say which
        # version it deploys could be an unevaluated upgrade (issue 43).
        named = ", ".join(repr(v) for v in recorded)
        reasons.append(
            Reason(
                ReasonCode.SERVING_ENGINE_VERSION_MISSING,
                f"serving.engine_version is missing; the approval is bound to the engine version its evals served ({named})",
                f"{PIPELINE} sends serving.engine_version, the version it deploys (one of {named})",
                Actor.PIPELINE,
            )
        )
    if wanted_version and covering and wanted_version not in versions:
        # An engine upgrade is a high-risk change like a new quantization: it needs a fresh eval. A
        # version whose own eval passed stays allowed (a roll-back to it is not a new risk), unless
        # that eval regressed against the last approved run: the reason then says where and by how much.
        regressed = [
            reason
            for run in regressed_evals(state.evidence)
            if str(run.get("engine_version")) == wanted_version and (reason := regressed_reason(run))
        ]
        detail = (
            f"; its eval regressed: {regressed[-1].message}" if regressed else ": an engine upgrade needs a fresh eval"
        )
        reasons.append(
            Reason(
                ReasonCode.SERVING_ENGINE_VERSION,
                f"engine version {wanted_version!r} is not one the approved evals served "
                f"({', '.join(repr(v) for v in versions)}){detail}",
                regressed[-1].fix
                if regressed
                else "an engineering reviewer runs the eval on this engine version; the reviewers approve it",
                Actor.ENGINEERING,
            )
        )
    utilization = envelope["gpu_memory_utilization"]
    if serving["gpu_memory_utilization"] > utilization:
        reasons.append(
            Reason(
                ReasonCode.SERVING_MEMORY_UTILIZATION,
                f"gpu_memory_utilization {serving['gpu_memory_utilization']} is above the approved {utilization}",
                fix,
                Actor.PIPELINE,
            )
        )
    return reasons
