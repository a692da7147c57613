"""The gate's conditions as one pure function of stored state: no query, no PDF parsing, no
license evaluation, no planner run. Each failed condition is a reason naming who must act."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from governance.deployments.choices import Status
from governance.gate.choices import UNQUANTIZED_PRECISIONS, ReasonCode

REQUESTER = "the requester"
LEGAL = "a legal reviewer"
ENGINEERING = "an engineering reviewer"
PIPELINE = "the pipeline owner"


@dataclass(frozen=True, slots=True)
class Reason:
    code: str
    message: str
    fix: str

    def as_dict(self) -> dict[str, str]:
        return {"code": self.code, "message": self.message, "fix": self.fix}


@dataclass(frozen=True, slots=True)
class Signature:
    """One role's signature as stored: valid (verified, or a live sign-off) for `evidence_digest`."""

    role: str
    valid: bool
    evidence_digest: str
    voided: bool = False  # a sign-off voided by a later change covers no current evidence


@dataclass(frozen=True, slots=True)
class GateState:
    """What the gate reads, loaded by selectors.gate_deployment_for_token in one indexed query."""

    status: str
    approval_expires_at: datetime | None
    approved_at: datetime | None
    environments: list[str]
    evidence: dict[str, Any]
    evidence_digest: str
    flagged: bool
    flag_reason: str
    signatures: dict[str, Signature]  # by role: legal, engineering
    signature_source: str  # how the answer names a signature ("signature")
    latest_usage_crossed: list[str] = field(default_factory=list)
    latest_usage_month: str = ""
    latest_usage_after_approval: bool = False  # the latest report came after the approval


@dataclass(frozen=True, slots=True)
class GateCheck:
    environment: str
    artifact_digest: str
    serving: dict[str, Any]


def evaluate(state: GateState, check: GateCheck, now: datetime) -> list[Reason]:
    """Every reason to deny; an empty list is an allow."""
    reasons: list[Reason] = []
    reasons += _status(state, now)
    if check.environment not in state.environments:
        reasons.append(
            Reason(
                ReasonCode.ENVIRONMENT_NOT_APPROVED,
                f"environment {check.environment!r} is not among the approved ones ({', '.join(state.environments) or 'none'})",
                f"{REQUESTER} adds the environment to the request and the reviewers approve it again",
            )
        )
    reasons += _signatures(state)
    reasons += _license(state, now)
    reasons += _usage(state)
    reasons += _capacity(state)
    reasons += _eval(state, check)
    reasons += _artifact(state, check)
    reasons += _serving(state, check)
    return reasons


def _status(state: GateState, now: datetime) -> list[Reason]:
    if state.status == Status.APPROVED:
        if state.approval_expires_at is not None and state.approval_expires_at <= now:
            return [
                Reason(
                    ReasonCode.EXPIRED,
                    f"the approval expired at {state.approval_expires_at.isoformat()}",
                    f"{REQUESTER} opens a new deployment request for review",
                )
            ]
        return []
    if state.status == Status.REVOKED:
        return [
            Reason(
                ReasonCode.REVOKED,
                "the approval was revoked",
                f"{REQUESTER} opens a new deployment request; {LEGAL} reviews it",
            )
        ]
    if state.status == Status.EXPIRED:
        return [
            Reason(ReasonCode.EXPIRED, "the approval expired", f"{REQUESTER} opens a new deployment request for review")
        ]
    return [
        Reason(
            ReasonCode.NOT_APPROVED,
            f"the deployment request is {state.status}, not approved",
            f"{LEGAL} and {ENGINEERING} review and approve the current evidence",
        )
    ]


def _signatures(state: GateState) -> list[Reason]:
    reasons = []
    for role, who in (("legal", LEGAL), ("engineering", ENGINEERING)):
        signature = state.signatures.get(role)
        if signature is None:
            reasons.append(
                Reason(
                    ReasonCode.SIGNATURE_MISSING,
                    f"no {role} {state.signature_source} is on record",
                    f"{who} signs the approval packet",
                )
            )
        elif not signature.valid:
            reasons.append(
                Reason(
                    ReasonCode.SIGNATURE_INVALID,
                    f"the {role} signature of the approval packet does not verify",
                    f"{who} signs the approval packet again; an admin investigates the tampering",
                )
            )
        elif signature.voided or signature.evidence_digest != state.evidence_digest:
            reasons.append(
                Reason(
                    ReasonCode.SIGNATURE_STALE,
                    f"the {role} {state.signature_source} covers evidence {signature.evidence_digest[:12]}…, "
                    f"not the current {state.evidence_digest[:12]}…",
                    f"{who} reviews and signs the current evidence",
                )
            )
    return reasons


def _waived(waivers: list[dict[str, Any]], license_key: str, finding: dict[str, Any], now: datetime) -> bool:
    return any(
        w["license"] == license_key
        and w["code"] == finding["code"]
        and w.get("clause", "") in ("", finding["clause"])
        and datetime.fromisoformat(w["expires_at"]) > now
        # a blocker is waived only with the licensor's permission and a second legal reviewer
        and (finding["severity"] != "blocker" or (bool(w.get("permission")) and bool(w.get("confirmed_by"))))
        for w in waivers
    )


def _license(state: GateState, now: datetime) -> list[Reason]:
    reasons = []
    waivers = state.evidence.get("waivers", [])
    for evaluation in state.evidence.get("licenses", []):
        for finding in evaluation.get("findings", []):
            if finding["severity"] not in ("blocker", "approval") or _waived(
                waivers, evaluation["license"], finding, now
            ):
                continue
            if finding["severity"] == "blocker":
                reasons.append(
                    Reason(
                        ReasonCode.LICENSE_BLOCKER,
                        f"{evaluation['license']}: {finding['code']} ({finding['clause']}): {finding['message']}",
                        f"{REQUESTER} changes the facts so the term no longer applies, or {LEGAL} proposes a waiver "
                        "with the licensor's written permission and a second legal reviewer confirms it",
                    )
                )
            else:
                reasons.append(
                    Reason(
                        ReasonCode.LICENSE_APPROVAL_REQUIRED,
                        f"{evaluation['license']}: {finding['code']} ({finding['clause']}): {finding['message']}",
                        f"{LEGAL} records the licensor's approval as a waiver",
                    )
                )
    for item in state.evidence.get("obligations", []):
        if item["status"] != "accepted":
            reasons.append(
                Reason(
                    ReasonCode.OBLIGATION_NOT_ACCEPTED,
                    f"{item['license']}: obligation {item['code']} ({item['clause']}) is {item['status']}",
                    f"{REQUESTER} says how it is met; {LEGAL} accepts it",
                )
            )
    return reasons


def _usage(state: GateState) -> list[Reason]:
    if state.latest_usage_crossed and state.latest_usage_after_approval:
        return [
            Reason(
                ReasonCode.USAGE_THRESHOLD_CROSSED,
                f"the usage report of {state.latest_usage_month} crossed license terms: "
                f"{', '.join(state.latest_usage_crossed)}",
                f"{LEGAL} reviews the new findings and the request is approved again",
            )
        ]
    if state.flagged:
        return [
            Reason(
                ReasonCode.USAGE_THRESHOLD_CROSSED,
                state.flag_reason or "the request is flagged",
                f"{LEGAL} reviews the new findings and the request is approved again",
            )
        ]
    return []


def _capacity(state: GateState) -> list[Reason]:
    plan = state.evidence.get("capacity_plan")
    if plan is None:
        return [
            Reason(
                ReasonCode.CAPACITY_MISSING,
                "no capacity plan is in the evidence",
                f"{REQUESTER} requests a capacity plan; {ENGINEERING} approves it",
            )
        ]
    if plan.get("status") != "done" or not plan.get("fits"):
        return [
            Reason(
                ReasonCode.CAPACITY_DOES_NOT_FIT,
                f"the capacity plan is {plan.get('status')} and {'fits' if plan.get('fits') else 'does not fit'}",
                f"{REQUESTER} changes the serving plan (GPUs, parallelism, precision) until it fits; "
                f"{ENGINEERING} approves it",
            )
        ]
    return []


LAYOUT = ("tp", "pp", "ep")


def _config_changes(run: dict[str, Any], check: GateCheck) -> list[str]:
    """How the rollout differs from what the eval served: engine, engine version, parallel layout."""
    serving = check.serving
    changes = []
    if run.get("engine") != serving["engine"]:
        changes.append(f"engine {run.get('engine')} -> {serving['engine']}")
    wanted_version = serving.get("engine_version")
    if wanted_version and run.get("engine_version") != wanted_version:
        changes.append(f"engine version {run.get('engine_version')} -> {wanted_version}")
    evaluated = run.get("serving") or {}
    for name in LAYOUT:
        if int(evaluated.get(name) or 1) != int(serving.get(name) or 1):
            changes.append(f"{name} {evaluated.get(name) or 1} -> {serving.get(name) or 1}")
    return changes


def _eval(state: GateState, check: GateCheck) -> list[Reason]:
    """A quantized precision needs a passed eval that served exactly these weights (digest) through
    this engine, engine version and parallel layout. Screening (simulated quantization) never counts;
    evidence from before eval runs named artifacts has no `kind` and was screening."""
    precision = check.serving["precision"]
    if precision in UNQUANTIZED_PRECISIONS:
        return []
    runs = [
        r
        for r in state.evidence.get("eval_results", [])
        if r["scheme"] == precision or r["scheme"].startswith(precision + "-")
    ]
    served = [r for r in runs if r.get("kind") == "served"]
    digest = check.artifact_digest.lower()
    for_digest = [r for r in served if str(r.get("candidate_digest", "")).lower() == digest]
    same_config = [r for r in for_digest if not _config_changes(r, check)]
    if any(r["status"] == "passed" for r in same_config):
        return []
    if same_config:
        statuses = ", ".join(f"{r['scheme']} {r['status']}" for r in same_config)
        return [
            Reason(
                ReasonCode.EVAL_FAILED,
                f"the {precision} eval of {check.artifact_digest} did not pass ({statuses})",
                f"{ENGINEERING} fixes the quantization and runs the eval again, or {REQUESTER} serves another precision",
            )
        ]
    passed_here = [r for r in for_digest if r["status"] == "passed"]
    if passed_here:
        changes = "; ".join(_config_changes(passed_here[-1], check))
        return [
            Reason(
                ReasonCode.EVAL_STALE,
                f"the passed {precision} eval of {check.artifact_digest} ran another serving config ({changes}): "
                "an engine upgrade or a new parallel layout needs a fresh eval",
                f"{ENGINEERING} runs the eval again on this engine, version and layout; the reviewers approve it",
            )
        ]
    passed_other = [r for r in served if r["status"] == "passed"]
    if passed_other:
        evaluated = ", ".join(sorted({str(r.get("candidate_digest")) for r in passed_other}))
        return [
            Reason(
                ReasonCode.EVAL_DIGEST_MISMATCH,
                f"the passed {precision} eval covers weights {evaluated}, not {check.artifact_digest} being deployed",
                f"{PIPELINE} deploys the evaluated weights, or {ENGINEERING} evaluates these weights",
            )
        ]
    only_screening = " (screening runs simulate quantization and never count)" if runs and not served else ""
    return [
        Reason(
            ReasonCode.EVAL_MISSING,
            f"no {precision} eval served {check.artifact_digest}{only_screening}",
            f"{ENGINEERING} runs the {precision} eval of these weights on the cluster",
        )
    ]


def _artifact(state: GateState, check: GateCheck) -> list[Reason]:
    approved = (state.evidence.get("artifact") or {}).get("weights_digest", "")
    if check.artifact_digest.lower() != str(approved).lower():
        return [
            Reason(
                ReasonCode.ARTIFACT_DIGEST_MISMATCH,
                f"artifact_digest {check.artifact_digest} is not the approved weights {approved}",
                f"{PIPELINE} deploys the approved weights, or {REQUESTER} registers these weights in a new request",
            )
        ]
    return []


def approved_parallelism(state: GateState) -> dict[str, int]:
    """tp/pp/ep as approved: the serving plan's when it fixed them, else the capacity plan's layout."""
    envelope = state.evidence.get("serving_envelope") or {}
    layout = (((state.evidence.get("capacity_plan") or {}).get("result")) or {}).get("parallel") or {}
    return {name: int(envelope.get(name) or layout.get(name) or 1) for name in ("tp", "pp", "ep")}


def _serving(state: GateState, check: GateCheck) -> list[Reason]:
    envelope = state.evidence.get("serving_envelope") or {}
    serving = check.serving
    reasons = []
    fix = f"{PIPELINE} deploys the approved configuration, or {REQUESTER} changes the serving plan for re-approval"
    for name, code in (
        ("engine", ReasonCode.SERVING_ENGINE),
        ("precision", ReasonCode.SERVING_PRECISION),
        ("gpu", ReasonCode.SERVING_GPU),
    ):
        if serving[name] != envelope.get(name, "vllm" if name == "engine" else None):
            reasons.append(Reason(code, f"{name} {serving[name]!r} is not the approved {envelope.get(name)!r}", fix))
    if serving.get("kv_dtype") is not None and serving["kv_dtype"] != envelope.get("kv_dtype", "bf16"):
        reasons.append(
            Reason(
                ReasonCode.SERVING_KV_DTYPE,
                f"kv_dtype {serving['kv_dtype']!r} is not the approved {envelope.get('kv_dtype', 'bf16')!r}",
                fix,
            )
        )
    approved = approved_parallelism(state)
    differing = [f"{n}={serving[n]} (approved {approved[n]})" for n in ("tp", "pp", "ep") if serving[n] != approved[n]]
    if differing:
        reasons.append(Reason(ReasonCode.SERVING_PARALLELISM, "parallelism differs: " + ", ".join(differing), fix))
    max_len = envelope.get("max_model_len")
    if max_len is None or serving["max_model_len"] > max_len:
        reasons.append(
            Reason(
                ReasonCode.SERVING_MAX_MODEL_LEN,
                f"max_model_len {serving['max_model_len']} is above the approved {max_len}",
                fix,
            )
        )
    utilization = float(envelope.get("gpu_memory_utilization", 0.9))
    if serving["gpu_memory_utilization"] > utilization:
        reasons.append(
            Reason(
                ReasonCode.SERVING_MEMORY_UTILIZATION,
                f"gpu_memory_utilization {serving['gpu_memory_utilization']} is above the approved {utilization}",
                fix,
            )
        )
    return reasons
