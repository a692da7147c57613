"""Approval readiness: the ONE rule that decides what stands between a request and approval.

`readiness` is a pure function of (the evidence document, the sign-offs on record, the usage
state, the clock): no query, no PDF, no license evaluation. Every reader calls it:

- the sign-off service refuses to sign while anything but a signature still to be given blocks
  (`blocks_signing`);
- the request page, the API's `blockers` and the approval packet show its list as it is;
- the gate calls it and adds only its deploy-time checks (status and expiry, environment,
  artifact digest, serving envelope, the signed packet verifying, the token's scope).

Waivers are part of the evidence (the document carries the waivers in force when it was built,
with their expiry); the clock decides whether each is still in force.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import models

from governance.artifacts.weights import UNQUANTIZED_PRECISIONS
from governance.deployments.choices import SERVING_DEFAULTS, ReviewRole
from governance.licenses.choices import BLOCKING_SEVERITIES, Severity

REQUESTER = "the requester"
LEGAL = "a legal reviewer"
ENGINEERING = "an engineering reviewer"
PIPELINE = "the pipeline owner"


class Actor(models.TextChoices):
    """Who must act to clear a reason."""

    REQUESTER = "requester"
    LEGAL = "legal"
    ENGINEERING = "engineering"
    NOBODY = "nobody"  # wait: a plan or an eval is still computing
    PIPELINE = "pipeline"  # the deploying pipeline (gate-only reasons)


class ReasonCode(models.TextChoices):
    """Every reason approval is blocked or a gate check denies; docs/gate.md lists the same."""

    NOT_APPROVED = "deployment.not_approved"
    REVOKED = "approval.revoked"
    EXPIRED = "approval.expired"
    ENVIRONMENT_NOT_APPROVED = "environment.not_approved"
    SIGNATURE_MISSING = "signature.missing"
    SIGNATURE_STALE = "signature.stale"
    SIGNATURE_INVALID = "signature.invalid"
    LICENSE_BLOCKER = "license.blocker"
    LICENSE_APPROVAL_REQUIRED = "license.licensor_approval_required"
    # Read from the checkpoint's own LICENSE / USE_POLICY files (an inspection of its files):
    LICENSE_MISMATCH = "license.mismatch"  # the text (or the card) is another license than the one declared
    LICENSE_UNIDENTIFIED = "license.unidentified"  # a text nobody has classified yet
    LICENSE_FILE_MISSING = "license.file_missing"  # the checkpoint carries no license text at all
    ARTIFACT_INSPECTION_REFUSED = "artifact.inspection_refused"  # the files were refused on the node
    OBLIGATION_NOT_ACCEPTED = "obligation.not_accepted"
    USAGE_THRESHOLD_CROSSED = "usage.threshold_crossed"
    CAPACITY_MISSING = "capacity.missing"
    CAPACITY_PENDING = "capacity.pending"
    CAPACITY_FAILED = "capacity.failed"
    CAPACITY_DOES_NOT_FIT = "capacity.does_not_fit"
    CAPACITY_OVER_BUDGET = "capacity.over_budget"  # fits only on more GPUs than the serving plan's max_gpus
    CAPACITY_TIGHT = "capacity.tight"  # fits at the central figures only: engineering's call (signing clears it)
    # A startup log of the request's deployment fell outside the plan's interval: engineering's call (signing
    # clears it), as the plan or the deployment is not what the other assumed.
    CAPACITY_OUTSIDE_INTERVAL = "capacity.outside_interval"
    EVAL_MISSING = "eval.missing"
    EVAL_PENDING = "eval.pending"
    EVAL_FAILED = "eval.failed"
    EVAL_DIGEST_MISMATCH = "eval.digest_mismatch"  # the passed eval served other weights
    EVAL_STALE = "eval.stale"  # same weights, but another engine or parallel layout
    EVAL_REGRESSED = "eval.regressed"  # an upgrade's fresh eval fell below the last approved run's
    # The weights are stored at another precision than the request serves (read from the checkpoint).
    WEIGHTS_PRECISION_MISMATCH = "weights.precision_mismatch"
    # Quantized weights with no baseline registered as their parent: nothing to evaluate them against.
    ARTIFACT_PARENT_MISSING = "artifact.parent_missing"
    # The parent's files are another model's (architecture, sizes, tensors): an eval against it measures nothing.
    ARTIFACT_PARENT_MISMATCH = "artifact.parent_mismatch"
    ARTIFACT_DIGEST_MISMATCH = "artifact.digest_mismatch"
    SERVING_ENGINE = "serving.engine_mismatch"
    SERVING_ENGINE_VERSION = "serving.engine_version_mismatch"  # not the version the eval served
    SERVING_ENGINE_VERSION_MISSING = "serving.engine_version_missing"  # left out, the approval bound to one
    SERVING_PRECISION = "serving.precision_mismatch"
    SERVING_KV_DTYPE = "serving.kv_dtype_mismatch"
    SERVING_GPU = "serving.gpu_mismatch"
    SERVING_PARALLELISM = "serving.parallelism_mismatch"
    SERVING_MAX_MODEL_LEN = "serving.max_model_len_exceeded"
    SERVING_MEMORY_UTILIZATION = "serving.gpu_memory_utilization_exceeded"
    # Gate-time only (governance/canary/risk.py): a high-risk production rollout needs a passed canary.
    CANARY_MISSING = "canary.missing"
    CANARY_PENDING = "canary.pending"
    CANARY_FAILED = "canary.failed"


# The gate-time canary reasons: given by governance.canary at the gate, never by the readiness rule.
CANARY_CODES = frozenset({ReasonCode.CANARY_MISSING, ReasonCode.CANARY_PENDING, ReasonCode.CANARY_FAILED})


# Reasons that signing itself clears: a reviewer may sign while only these remain.
CLEARED_BY_SIGNING = frozenset(
    {
        ReasonCode.SIGNATURE_MISSING,
        ReasonCode.SIGNATURE_STALE,
        ReasonCode.USAGE_THRESHOLD_CROSSED,
        ReasonCode.CAPACITY_TIGHT,
        ReasonCode.CAPACITY_OUTSIDE_INTERVAL,
    }
)


SIGNING_ROLES: tuple[str, ...] = tuple(ReviewRole.values)  # legal first: the signing order
_ROLE_ACTOR = {"legal": (Actor.LEGAL, LEGAL), "engineering": (Actor.ENGINEERING, ENGINEERING)}


@dataclass(frozen=True, slots=True)
class Reason:
    code: str
    message: str
    fix: str
    role: str  # an Actor: who must act
    license: str = ""  # the license a license reason is about
    finding: str = ""  # the license finding's code (e.g. threshold.licensor_approval)
    severity: str = "blocker"  # "review": the actor's call, cleared by their signature (capacity.tight)

    def as_dict(self) -> dict[str, str]:
        """The gate's contract (DESIGN.md): code, message, fix."""
        return {"code": self.code, "message": self.message, "fix": self.fix}

    def as_blocker(self) -> dict[str, str]:
        """The request page's and the API's row: the gate's fields, who acts, and the license."""
        row = {
            "code": self.code,
            "message": self.message,
            "fix": self.fix,
            "role": self.role,
            "severity": self.severity,
        }
        if self.license:
            row["license"] = self.license
        if self.finding:
            row["finding"] = self.finding
        return row


@dataclass(frozen=True, slots=True)
class Signature:
    """One role's approving sign-off as recorded: the live one, else the latest voided one."""

    role: str
    evidence_digest: str
    voided: bool = False  # voided by a later change of evidence: it covers no current evidence


@dataclass(frozen=True, slots=True)
class ReadinessState:
    """Everything the rule reads: the stored evidence and the records beside it."""

    evidence: Mapping[str, Any]
    evidence_digest: str
    signatures: Mapping[str, Signature]  # by role: legal, engineering
    # A usage report that crossed license terms flags the request (its reason names the month and
    # the terms); only an approval clears the flag.
    flagged: bool = False
    flag_reason: str = ""
    # The eval runs still in progress, each as its evidence item would read (kind, scheme,
    # candidate_digest, engine, serving). Not in the evidence on purpose (evaluations.evals.
    # eval_evidence): a running run has no verdict, and the evidence digest the reviewers sign must
    # not depend on when it was last rebuilt. They only turn `eval.missing` into `eval.pending`, so
    # they ride beside the evidence as an input of this pure rule, never inside its digest. The
    # gate leaves them out: at deploy time a run in progress is still no eval.
    running_evals: tuple[Mapping[str, Any], ...] = ()


def readiness(state: ReadinessState, now: datetime) -> list[Reason]:
    """Every reason the request may not be approved (an empty list: it is approved, or may be)."""
    return [
        *_signatures(state),
        *_license(state.evidence, now),
        *_license_texts(state.evidence),
        *_usage(state),
        *_capacity(state.evidence, engineering_signed=_signed(state, "engineering")),
        *_weights(state.evidence),
        *_eval(state.evidence, state.running_evals),
    ]


def blocks_signing(reasons: list[Reason]) -> list[Reason]:
    """What a sign-off must refuse on: everything but the signatures (and the re-approval a usage
    report asks for) that signing gives."""
    return [reason for reason in reasons if reason.code not in CLEARED_BY_SIGNING]


def _signatures(state: ReadinessState) -> list[Reason]:
    reasons = []
    for role in SIGNING_ROLES:
        actor, who = _ROLE_ACTOR[role]
        signature = state.signatures.get(role)
        if signature is None:
            reasons.append(
                Reason(
                    ReasonCode.SIGNATURE_MISSING,
                    f"no {role} signature is on record",
                    f"{who} signs the approval packet",
                    actor,
                )
            )
        elif signature.voided or signature.evidence_digest != state.evidence_digest:
            reasons.append(
                Reason(
                    ReasonCode.SIGNATURE_STALE,
                    f"the {role} signature covers evidence {signature.evidence_digest[:12]}…, "
                    f"not the current {state.evidence_digest[:12]}…",
                    f"{who} reviews and signs the current evidence",
                    actor,
                )
            )
    return reasons


def waiver_in_force(waiver: Mapping[str, Any], license_key: str, finding: Mapping[str, Any], now: datetime) -> bool:
    """A waiver names the license and finding code (and optionally the clause), is unexpired, and
    waives a blocker only with the licensor's permission and a second legal reviewer's confirmation."""
    return (
        waiver.get("license") == license_key
        and waiver.get("code") == finding["code"]
        and waiver.get("clause", "") in ("", finding.get("clause", ""))
        and datetime.fromisoformat(str(waiver["expires_at"])) > now
        and (
            finding["severity"] != Severity.BLOCKER
            or (bool(waiver.get("permission")) and bool(waiver.get("confirmed_by")))
        )
    )


def finding_waived(
    waivers: list[Mapping[str, Any]], license_key: str, finding: Mapping[str, Any], now: datetime
) -> bool:
    return any(waiver_in_force(w, license_key, finding, now) for w in waivers)


def _license(evidence: Mapping[str, Any], now: datetime) -> list[Reason]:
    reasons = []
    waivers = list(evidence.get("waivers") or [])
    for evaluation in evidence.get("licenses") or []:
        license_key = evaluation["license"]
        for finding in evaluation.get("findings", []):
            if finding["severity"] not in BLOCKING_SEVERITIES or finding_waived(waivers, license_key, finding, now):
                continue
            message = f"{license_key}: {finding['code']} ({finding['clause']}): {finding['message']}"
            if finding["severity"] == "blocker":
                reasons.append(
                    Reason(
                        ReasonCode.LICENSE_BLOCKER,
                        message,
                        f"{REQUESTER} changes the facts so the term no longer applies, or {LEGAL} proposes a waiver "
                        "with the licensor's written permission and a second legal reviewer confirms it",
                        Actor.REQUESTER,
                        license_key,
                        finding["code"],
                    )
                )
            else:
                reasons.append(
                    Reason(
                        ReasonCode.LICENSE_APPROVAL_REQUIRED,
                        message,
                        f"{LEGAL} records the licensor's approval as a waiver",
                        Actor.LEGAL,
                        license_key,
                        finding["code"],
                    )
                )
    for item in evidence.get("obligations") or []:
        if item["status"] in ("accepted", "superseded"):
            continue
        # Acknowledged: the requester said how it is met and a legal reviewer decides; otherwise
        # (open, rejected) the requester says how it is met.
        acknowledged = item["status"] == "acknowledged"
        reasons.append(
            Reason(
                ReasonCode.OBLIGATION_NOT_ACCEPTED,
                f"{item['license']}: obligation {item['code']} ({item['clause']}) is {item['status']}",
                f"{LEGAL} accepts or rejects how it is met"
                if acknowledged
                else f"{REQUESTER} says how it is met; {LEGAL} accepts it",
                Actor.LEGAL if acknowledged else Actor.REQUESTER,
                item["license"],
                item["code"],
            )
        )
    return reasons


def _usage(state: ReadinessState) -> list[Reason]:
    if not state.flagged:
        return []
    return [
        Reason(
            ReasonCode.USAGE_THRESHOLD_CROSSED,
            state.flag_reason or "a usage report crossed license terms",
            f"{LEGAL} reviews the new findings and the request is approved again",
            Actor.LEGAL,
        )
    ]


def _signed(state: ReadinessState, role: str) -> bool:
    """Whether `role` signed the current evidence (a live signature of its digest)."""
    signature = state.signatures.get(role)
    return signature is not None and not signature.voided and signature.evidence_digest == state.evidence_digest


def _capacity(evidence: Mapping[str, Any], engineering_signed: bool = False) -> list[Reason]:
    plan = evidence.get("capacity_plan")
    change = f"{REQUESTER} changes the serving plan (GPUs, parallelism, precision) until it fits"
    if plan is None:
        return [
            Reason(
                ReasonCode.CAPACITY_MISSING,
                "no capacity plan is in the evidence",
                f"{REQUESTER} requests a capacity plan",
                Actor.REQUESTER,
            )
        ]
    status = plan.get("status")
    if status == "pending":
        return [
            Reason(
                ReasonCode.CAPACITY_PENDING,
                "the capacity plan is still computing",
                "nobody: the evidence updates when it is done",
                Actor.NOBODY,
            )
        ]
    if status == "failed":
        return [Reason(ReasonCode.CAPACITY_FAILED, "the capacity plan failed", change, Actor.REQUESTER)]
    if status != "done" or not plan.get("fits"):
        notes = [
            note
            for note in ((plan.get("result") or {}).get("notes") or [])
            if isinstance(note, str) and note.startswith(("Rejected", "No layout"))
        ]
        detail = f": {notes[0]}" if notes else ""
        return [
            Reason(
                ReasonCode.CAPACITY_DOES_NOT_FIT,
                f"the serving plan does not fit the target GPUs{detail}",
                change,
                Actor.REQUESTER,
            )
        ]
    result = plan.get("result") or {}
    over = _over_budget(evidence, result)
    if over is not None:
        return [over]
    if engineering_signed:
        return []
    reasons = []
    if result.get("verdict") == "tight":
        # Fits at the plan's central figures, not at its KV interval's pessimistic end: engineering judges the
        # margin (the plan's "Tight: …" note) and its signature of this evidence clears it.
        tight = [note for note in result.get("notes") or [] if isinstance(note, str) and note.startswith("Tight")]
        reasons.append(
            Reason(
                ReasonCode.CAPACITY_TIGHT,
                tight[0]
                if tight
                else "the serving plan fits at its central figures only, not at its intervals' pessimistic end",
                f"{ENGINEERING} decides whether the margin is enough and signs, or {REQUESTER} changes the serving "
                "plan until it fits at the pessimistic end",
                Actor.ENGINEERING,
                severity="review",
            )
        )
    for measured in plan.get("measured") or []:
        outside = _outside_interval(result, measured)
        if outside:
            reasons.append(
                Reason(
                    ReasonCode.CAPACITY_OUTSIDE_INTERVAL,
                    f"a startup log of this deployment ({measured.get('engine')} {measured.get('engine_version')} "
                    f"on cluster {measured.get('cluster')}) falls outside the capacity plan's interval: "
                    + "; ".join(outside),
                    f"{ENGINEERING} checks the deployment against the plan (engine release, settings) and signs, "
                    f"or {REQUESTER} plans again with the cluster's startup logs",
                    Actor.ENGINEERING,
                    severity="review",
                )
            )
    return reasons


# The startup-log figures held against the plan's intervals: (measured key, interval path, label, GiB or not).
MEASURED_FIGURES = (
    ("kv_pool_bytes", "memory_per_gpu.kv_cache", "KV pool per GPU", True),
    ("kv_capacity_tokens", "kv_cache.capacity_tokens", "KV tokens", False),
)


def _outside_interval(result: Mapping[str, Any], measured: Mapping[str, Any]) -> list[str]:
    """Each figure of a measured startup log outside the plan's interval, as "KV pool per GPU 55.50 GiB measured,
    80% interval 60.00-61.00 GiB". A log of another layout (tp, pp) than the plan's is not comparable: none."""
    parallel = result.get("parallel") or {}
    if (measured.get("tp") or 1, measured.get("pp") or 1) != (parallel.get("tp") or 1, parallel.get("pp") or 1):
        return []
    intervals = result.get("intervals") or {}
    found = []
    for key, path, label, in_gib in MEASURED_FIGURES:
        value, interval = measured.get(key), intervals.get(path)
        if not isinstance(value, int | float) or not isinstance(interval, Mapping):
            continue
        low, high = interval.get("low"), interval.get("high")
        if not isinstance(low, int | float) or not isinstance(high, int | float) or low <= value <= high:
            continue

        def shown(number: float, gib: bool = in_gib) -> str:
            return f"{number / (1 << 30):.2f}" if gib else f"{number:,.0f}"

        unit = " GiB" if in_gib else ""
        found.append(
            f"{label} {shown(value)}{unit} measured, {float(interval.get('coverage') or 0.8):.0%} interval "
            f"{shown(low)}\u2013{shown(high)}{unit}"
        )
    return found


def gpu_budget(evidence: Mapping[str, Any]) -> int | None:
    """The serving plan's GPU budget (`max_gpus`): at most this many GPUs for the whole deployment."""
    budget = (evidence.get("serving_envelope") or {}).get("max_gpus")
    return int(budget) if budget else None


def _over_budget(evidence: Mapping[str, Any], result: Mapping[str, Any]) -> Reason | None:
    """A plan that fits, but only on more GPUs than the requester has: the planner takes the fewest
    GPUs that fit, so no layout within the budget fits. A blocker, not engineering's call: the budget is
    the requester's statement of what they have, which no reviewer's signature adds GPUs to; the
    requester changes the plan (precision, context, concurrency) or states a larger budget."""
    budget = gpu_budget(evidence)
    gpus = int((result.get("parallel") or {}).get("gpus") or 0)
    if budget is None or gpus <= budget:
        return None
    kind = str((result.get("gpu") or {}).get("key") or (evidence.get("serving_envelope") or {}).get("gpu") or "")
    return Reason(
        ReasonCode.CAPACITY_OVER_BUDGET,
        f"the serving plan fits only on {gpus} GPUs{f' ({kind})' if kind else ''}, more than its budget of {budget}",
        f"{REQUESTER} changes the serving plan (precision, context length, concurrency) until it fits in "
        f"{budget} GPUs, or raises the budget",
        Actor.REQUESTER,
    )


def scheme_matches(scheme: str, precision: str) -> bool:
    """An eval scheme covers a precision when it is that precision or a variant of it (w4a16-awq)."""
    return scheme == precision or scheme.startswith(precision + "-")


LAYOUT = ("tp", "pp", "ep")


def approved_parallelism(evidence: Mapping[str, Any]) -> dict[str, int]:
    """tp/pp/ep as approved: the serving plan's when it fixed them, else the capacity plan's layout."""
    envelope = evidence.get("serving_envelope") or {}
    layout = (((evidence.get("capacity_plan") or {}).get("result")) or {}).get("parallel") or {}
    return {name: int(envelope.get(name) or layout.get(name) or 1) for name in LAYOUT}


def approved_engine(evidence: Mapping[str, Any]) -> str:
    return str((evidence.get("serving_envelope") or {}).get("engine") or SERVING_DEFAULTS["engine"])


def approved_kv_dtype(evidence: Mapping[str, Any]) -> str:
    """The KV cache dtype as approved: the serving plan's, else the one serving default."""
    return str((evidence.get("serving_envelope") or {}).get("kv_dtype") or SERVING_DEFAULTS["kv_dtype"])


def _config_changes(
    run: Mapping[str, Any], engine: str, layout: Mapping[str, int], kv_dtype: str | None = None
) -> list[str]:
    """How the approved serving config differs from what the eval served: engine, parallel layout,
    and the KV cache dtype (an FP8 cache answers differently from a BF16 one, and a passed eval is
    reused by the team's other requests: it covers only the cache it served). A run that recorded
    no kv_dtype is not compared on it."""
    changes = []
    if run.get("engine") != engine:
        changes.append(f"engine {run.get('engine')} -> {engine}")
    evaluated = run.get("serving") or {}
    for name in LAYOUT:
        if int(evaluated.get(name) or 1) != layout[name]:
            changes.append(f"{name} {evaluated.get(name) or 1} -> {layout[name]}")
    served_kv = evaluated.get("kv_dtype")
    if kv_dtype is not None and served_kv and served_kv != kv_dtype:
        changes.append(f"kv_dtype {served_kv} -> {kv_dtype}")
    return changes


def served_config(run: Mapping[str, Any]) -> str:
    """What a run served, for messages: engine, version and tp/pp/ep."""
    serving = run.get("serving") or {}
    layout = "/".join(f"{name}{int(serving.get(name) or 1)}" for name in LAYOUT)
    return f"{run.get('engine')} {run.get('engine_version') or '?'} {layout}"


def served_config_key(run: Mapping[str, Any]) -> tuple[Any, ...]:
    serving = run.get("serving") or {}
    return (run.get("engine"), run.get("engine_version"), *(int(serving.get(name) or 1) for name in LAYOUT))


def regression(run: Mapping[str, Any]) -> tuple[str, float, float] | None:
    """(category, last approved accuracy, fresh accuracy) of the first category in which `run` fell
    below the run the request's last approval before it relied on (`last_approved_eval`, in the
    run's evidence only where it served another engine, engine version or tp/pp/ep than that run)
    by more than its own threshold, the bound the eval passes by; None when it did not, when
    nothing was approved before it, or when it served the approved run's own config."""
    previous = run.get("last_approved_eval")
    if not previous or served_config_key(run) == served_config_key(previous):
        return None
    bound = float(run.get("threshold") or 0.05)
    fresh = run.get("accuracy") or {}
    for category, before in sorted((previous.get("accuracy") or {}).items()):
        after = fresh.get(category)
        if before is not None and after is not None and float(before) - float(after) > bound:
            return category, float(before), float(after)
    return None


def regressed_reason(run: Mapping[str, Any]) -> Reason | None:
    found = regression(run)
    if found is None:
        return None
    category, before, after = found
    previous = run.get("last_approved_eval") or {}
    return Reason(
        ReasonCode.EVAL_REGRESSED,
        f"the {run.get('scheme')} eval on {served_config(run)} regressed in {category}: candidate accuracy "
        f"{after:.3f} against {before:.3f} in the last approved run on {served_config(previous)} "
        f"(more than its threshold {float(run.get('threshold') or 0.05):.3f} lower)",
        f"{ENGINEERING} finds why the new engine or layout answers worse and runs the eval again, "
        f"or {REQUESTER} keeps the approved engine version and layout",
        Actor.ENGINEERING,
    )


def _card_key(value: Any) -> str:
    """A model card's `license:` id compared with catalog keys and SPDX ids: Hugging Face writes
    `llama3.1` and `apache-2.0` where the catalog says `llama-3.1` and `apache-2.0`."""
    return "".join(ch for ch in str(value or "").lower() if ch.isalnum())


def _license_texts(evidence: Mapping[str, Any]) -> list[Reason]:
    """The license the requester declared against the texts the checkpoint carries (an inspection
    read them). Every one of these is legal's call; nothing passes silently."""
    artifact = evidence.get("artifact") or {}
    inspection = artifact.get("inspection")
    if not inspection:
        return []
    if inspection.get("status") == "refused":
        return [
            Reason(
                ReasonCode.ARTIFACT_INSPECTION_REFUSED,
                f"the checkpoint's files were refused when they were read: {inspection.get('reason')}",
                f"{REQUESTER} fixes the checkpoint (or its location) and registers the location again",
                Actor.REQUESTER,
            )
        ]
    declared = str(artifact.get("declared_license") or "")
    files = inspection.get("license_files") or []
    licenses = [f for f in files if f.get("kind") == "license"]
    reasons = []
    if not licenses:
        reasons.append(
            Reason(
                ReasonCode.LICENSE_FILE_MISSING,
                f"the checkpoint carries no LICENSE file: nothing in it says it is {declared}",
                f"{LEGAL} obtains the license text the weights were published under, or {REQUESTER} adds it",
                Actor.LEGAL,
            )
        )
    for item in files:
        if item.get("kind") not in ("license", "use_policy"):
            continue
        fingerprint = str(item.get("fingerprint") or "")
        if not item.get("license"):
            reasons.append(
                Reason(
                    ReasonCode.LICENSE_UNIDENTIFIED,
                    f"{item.get('path')} ({fingerprint[:19]}…) is a text the organisation has not classified",
                    f"{LEGAL} reads it and classifies it once as a license version; artifacts carrying it then match",
                    Actor.LEGAL,
                )
            )
        elif item["license"] != declared:
            reasons.append(
                Reason(
                    ReasonCode.LICENSE_MISMATCH,
                    f"{item.get('path')} is {item.get('matches')}, but the artifact is registered as {declared}",
                    f"{REQUESTER} registers the artifact under {item['license']}, or {LEGAL} classifies the text again",
                    Actor.LEGAL,
                    license=declared,
                )
            )
    card = (inspection.get("model_card") or {}).get("license")
    if card and _card_key(card) not in {"", "other", _card_key(declared)}:
        reasons.append(
            Reason(
                ReasonCode.LICENSE_MISMATCH,
                f"the model card says license: {card}, but the artifact is registered as {declared}",
                f"{LEGAL} decides which terms apply and {REQUESTER} registers the artifact under them",
                Actor.LEGAL,
                license=declared,
            )
        )
    return reasons


def eval_precision(evidence: Mapping[str, Any]) -> str:
    """The precision an eval must cover: the weights' own when they are stored quantized (whatever the
    serving plan says: they are what ships), else the serving plan's (BF16 weights quantized by the
    engine at load need an eval of that precision; served as BF16 they need none)."""
    weights = (evidence.get("artifact") or {}).get("weights") or {}
    if weights.get("quantized") and weights.get("precision"):
        return str(weights["precision"])
    return str((evidence.get("serving_envelope") or {}).get("precision") or "")


def mismatched_parent_digest(evidence: Mapping[str, Any]) -> str:
    """The digest of the artifact named as the parent when its files are another model's, else ""."""
    check = (evidence.get("artifact") or {}).get("parent_check") or {}
    return str(check.get("parent_digest") or "").lower() if check.get("status") == "mismatch" else ""


def counted_evals(evidence: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The eval results that may cover the weights: not those measured against a parent whose files
    are another model's (they compared the derivative with something it was not made from)."""
    fake = mismatched_parent_digest(evidence)
    runs = evidence.get("eval_results") or []
    return [run for run in runs if not fake or str(run.get("baseline_digest") or "").lower() != fake]


def _weights(evidence: Mapping[str, Any]) -> list[Reason]:
    """What the checkpoint says of itself against what the request says of it."""
    reasons = []
    check = (evidence.get("artifact") or {}).get("parent_check") or {}
    if check.get("status") == "mismatch":
        reasons.append(
            Reason(
                ReasonCode.ARTIFACT_PARENT_MISMATCH,
                f"the parent {check.get('parent_name')} is not the checkpoint these weights were made from: "
                + "; ".join(check.get("differences") or []),
                f"{REQUESTER} names the checkpoint the weights were made from as the parent (and registers it), "
                f"or {ENGINEERING} finds why the two inspections differ",
                Actor.ENGINEERING,
            )
        )
    weights = (evidence.get("artifact") or {}).get("weights") or {}
    if not weights.get("quantized"):
        return reasons
    stored, summary = str(weights.get("precision")), str(weights.get("summary") or weights.get("precision"))
    serving = str((evidence.get("serving_envelope") or {}).get("precision") or "")
    if serving and serving != stored:
        reasons.append(
            Reason(
                ReasonCode.WEIGHTS_PRECISION_MISMATCH,
                f"the weights are {summary}, not {serving}",
                f"{REQUESTER} sets the serving plan's precision to {stored}, or requests other weights",
                Actor.REQUESTER,
            )
        )
    if not (evidence.get("artifact") or {}).get("parent") and not weights.get("published"):
        reasons.append(
            Reason(
                ReasonCode.ARTIFACT_PARENT_MISSING,
                f"the weights are {summary}, a quantized derivative, but no baseline is registered as its parent",
                f"{REQUESTER} registers the checkpoint it was quantized from and names it as the parent, "
                "so that an eval compares the two",
                Actor.REQUESTER,
            )
        )
    return reasons


def _passed_for_config(evidence: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    precision = eval_precision(evidence)
    digest = str((evidence.get("artifact") or {}).get("weights_digest") or "").lower()
    engine, layout, kv_dtype = approved_engine(evidence), approved_parallelism(evidence), approved_kv_dtype(evidence)
    return [
        run
        for run in counted_evals(evidence)
        if run.get("kind") == "served"
        and run.get("status") == "passed"
        and scheme_matches(str(run.get("scheme", "")), precision)
        and str(run.get("candidate_digest", "")).lower() == digest
        and not _config_changes(run, engine, layout, kv_dtype)
    ]


def regressed_evals(evidence: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """Passed evals of the approved artifact and serving config that regressed against the last
    approved run: they cover nothing (an upgrade that answers worse is not allowed)."""
    return [run for run in _passed_for_config(evidence) if regression(run) is not None]


def approved_evals(evidence: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """Every passed eval that covers the approved artifact and serving config, latest last: one per
    engine version evaluated (an upgrade's fresh eval stands beside the one it followed), less those
    that regressed against the last approved run."""
    return [run for run in _passed_for_config(evidence) if regression(run) is None]


def approved_eval(evidence: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The latest passed eval that covers the approved artifact and serving config, if any."""
    covering = approved_evals(evidence)
    return covering[-1] if covering else None


def _covers_config(
    run: Mapping[str, Any], precision: str, digest: str, engine: str, layout: Mapping[str, int], kv_dtype: str
) -> bool:
    """Whether a served run is of the approved precision, weights, engine, parallel layout and KV dtype."""
    return (
        run.get("kind") == "served"
        and scheme_matches(str(run.get("scheme", "")), precision)
        and str(run.get("candidate_digest", "")).lower() == digest.lower()
        and not _config_changes(run, engine, layout, kv_dtype)
    )


def _eval(evidence: Mapping[str, Any], running: tuple[Mapping[str, Any], ...] = ()) -> list[Reason]:
    """A quantized serving precision needs a passed eval that served exactly the approved weights
    (digest) through the approved engine and parallel layout. Screening runs (simulated
    quantization) never count; evals of other precisions are what-ifs and block nothing. While a
    run of exactly that is in progress (`running`, beside the evidence) the eval is pending."""
    precision = eval_precision(evidence)
    if not precision or precision in UNQUANTIZED_PRECISIONS:
        return []
    if approved_eval(evidence) is not None:
        return []
    digest = str((evidence.get("artifact") or {}).get("weights_digest") or "")
    engine, layout, kv_dtype = approved_engine(evidence), approved_parallelism(evidence), approved_kv_dtype(evidence)
    fake = mismatched_parent_digest(evidence)
    running = tuple(r for r in running if not fake or str(r.get("baseline_digest") or "").lower() != fake)
    if any(_covers_config(run, precision, digest, engine, layout, kv_dtype) for run in running):
        return [
            Reason(
                ReasonCode.EVAL_PENDING,
                f"the {precision} eval of {digest or 'the weights'} is still running",
                "nobody: the evidence updates when it finishes",
                Actor.NOBODY,
            )
        ]
    runs = [r for r in counted_evals(evidence) if scheme_matches(str(r.get("scheme", "")), precision)]
    served = [r for r in runs if r.get("kind") == "served"]
    for_digest = [r for r in served if str(r.get("candidate_digest", "")).lower() == digest.lower()]
    same_config = [r for r in for_digest if not _config_changes(r, engine, layout, kv_dtype)]
    rerun = f"{ENGINEERING} runs the {precision} eval of these weights on this engine and layout"
    regressed = [reason for run in regressed_evals(evidence) if (reason := regressed_reason(run))]
    if regressed:
        return regressed[-1:]
    if same_config:
        if all(r.get("status") == "running" for r in same_config):
            return [
                Reason(
                    ReasonCode.EVAL_PENDING,
                    f"the {precision} eval is still running",
                    "nobody: the evidence updates when it finishes",
                    Actor.NOBODY,
                )
            ]
        statuses = ", ".join(
            f"{r['scheme']} {r['status']} (95% upper bound {(r.get('overall') or {}).get('upper_bound_95')})"
            for r in same_config
        )
        return [
            Reason(
                ReasonCode.EVAL_FAILED,
                f"the {precision} eval of {digest} did not pass: {statuses}",
                f"{ENGINEERING} fixes the quantization and runs the eval again, or {REQUESTER} serves another precision",
                Actor.ENGINEERING,
            )
        ]
    passed_here = [r for r in for_digest if r.get("status") == "passed"]
    if passed_here:
        changes = "; ".join(_config_changes(passed_here[-1], engine, layout, kv_dtype))
        return [
            Reason(
                ReasonCode.EVAL_STALE,
                f"the passed {precision} eval of {digest} served another config ({changes}): "
                "an engine change or a new parallel layout needs a fresh eval",
                rerun,
                Actor.ENGINEERING,
            )
        ]
    passed_other = [r for r in served if r.get("status") == "passed"]
    if passed_other:
        evaluated = ", ".join(sorted({str(r.get("candidate_digest")) for r in passed_other}))
        return [
            Reason(
                ReasonCode.EVAL_DIGEST_MISMATCH,
                f"the passed {precision} eval covers weights {evaluated}, not the approved {digest}",
                f"{REQUESTER} requests the evaluated weights, or {rerun}",
                Actor.ENGINEERING,
            )
        ]
    only_screening = " (screening runs simulate quantization and never count)" if runs else ""
    return [
        Reason(
            ReasonCode.EVAL_MISSING,
            f"no {precision} eval served {digest or 'the weights'} through an engine{only_screening}",
            rerun,
            Actor.ENGINEERING,
        )
    ]
