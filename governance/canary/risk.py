"""The gate's canary stage, as pure functions: which rollouts are high-risk, and what a high-risk
production rollout still needs (a passed canary analysis of the same request, weights digest and
serving envelope). No query here: governance.canary.selectors reads the records in one statement.

**High-risk** (`is_high_risk`, the one definition): a rollout to a canary-guarded environment
(`CANARY_ENVIRONMENTS`, default `production`) of **quantized weights** (the evidence's
`artifact.weights.quantized`: a derivative stored at reduced precision, whatever the serving plan
says) whose weights digest and serving envelope have **not already been promoted** (no passed or
promoted canary analysis of exactly these weights and envelope, for any request of the team). A new
envelope of the same weights (another engine version, layout, context length...) is therefore
high-risk again until its own canary passes.

Everything else is **low-risk** and skips the canary: a redeploy of an already promoted digest and
envelope, and unquantized weights as their publisher ships them (served as BF16, or quantized by the
engine at load). Their changes are held by the readiness rule's eval binding instead (`eval.stale`,
`serving.engine_version_mismatch`: a new engine or layout needs a fresh eval). Deciding this from
the evidence alone keeps the gate's hot path unchanged for them: the canary records are read (one
indexed statement) only for quantized weights in a guarded environment.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from governance.core.canonical import canonical_sha256
from governance.deployments.readiness import ENGINEERING, PIPELINE, Actor, Reason, ReasonCode

# The serving envelope a canary is bound to: the gate check's `serving` less `dp` (replicas are not
# part of what was evaluated), with the gate's own defaults, so the pipeline's canary request and its
# later production check digest the same way.
ENVELOPE_KEYS = (
    "engine",
    "engine_version",
    "precision",
    "kv_dtype",
    "gpu",
    "tp",
    "pp",
    "ep",
    "max_model_len",
    "gpu_memory_utilization",
)
ENVELOPE_DEFAULTS: Mapping[str, Any] = {"pp": 1, "ep": 1, "gpu_memory_utilization": 0.9}
OK_STATUSES = frozenset({"passed", "promoted"})
PENDING_STATUSES = frozenset({"pending", "running", "inconclusive"})


def serving_envelope(serving: Mapping[str, Any]) -> dict[str, Any]:
    """The envelope's canonical form: the known keys that carry a value, defaults filled in."""
    merged = {**ENVELOPE_DEFAULTS, **{k: v for k, v in serving.items() if v is not None}}
    envelope = {key: merged[key] for key in ENVELOPE_KEYS if key in merged}
    if "gpu_memory_utilization" in envelope:
        envelope["gpu_memory_utilization"] = float(envelope["gpu_memory_utilization"])
    return envelope


def envelope_digest(serving: Mapping[str, Any]) -> str:
    return canonical_sha256(serving_envelope(serving))


@dataclass(frozen=True, slots=True)
class CanaryRecord:
    """One analysis as the gate reads it (newest first in the list it gets)."""

    same_request: bool
    status: str
    digest: str
    envelope_digest: str


def is_high_risk(*, quantized: bool, already_promoted: bool) -> bool:
    """See the module's docstring: quantized weights, unless exactly these weights and envelope
    were promoted already."""
    return quantized and not already_promoted


def weights_quantized(evidence: Mapping[str, Any]) -> bool:
    return bool(((evidence.get("artifact") or {}).get("weights") or {}).get("quantized"))


def needs_records(*, environment: str, guarded: Iterable[str], evidence: Mapping[str, Any]) -> bool:
    """Whether the canary records can change the answer: quantized weights in a guarded environment."""
    return environment in set(guarded) and weights_quantized(evidence)


def canary_reasons(
    *,
    environment: str,
    guarded: Iterable[str],
    evidence: Mapping[str, Any],
    digest: str,
    envelope_sha: str,
    records: list[CanaryRecord],
) -> list[Reason]:
    """The gate's canary reasons for one check (an empty list: no canary stands in the way)."""
    if environment not in set(guarded):
        return []
    digest = digest.lower()

    def same(record: CanaryRecord) -> bool:
        return record.digest.lower() == digest and record.envelope_digest == envelope_sha

    own = [r for r in records if r.same_request and same(r)]
    if own and own[0].status in OK_STATUSES:
        return []  # this request's latest canary of these weights and envelope passed
    high = is_high_risk(
        quantized=weights_quantized(evidence),
        already_promoted=any(not r.same_request and r.status in OK_STATUSES and same(r) for r in records),
    )
    if not high:
        return []
    why = "quantized weights"
    if not own:
        return [
            Reason(
                ReasonCode.CANARY_MISSING,
                f"a high-risk rollout ({why}) to {environment} needs a passed canary analysis of these weights "
                f"({digest}) and serving envelope (sha256 {envelope_sha[:12]}…); none is on record",
                f"{PIPELINE} deploys the canary and starts its analysis (POST /api/v1/canary/analyses)",
                Actor.PIPELINE,
            )
        ]
    latest = own[0]  # newest first: a later analysis supersedes an earlier one
    if latest.status in PENDING_STATUSES:
        waiting = (
            f"{ENGINEERING} promotes or rolls back the inconclusive analysis"
            if latest.status == "inconclusive"
            else "nobody: the analysis is running; ask again when it finishes"
        )
        return [
            Reason(
                ReasonCode.CANARY_PENDING,
                f"the canary analysis of these weights and envelope is {latest.status}",
                waiting,
                Actor.ENGINEERING if latest.status == "inconclusive" else Actor.PIPELINE,
            )
        ]
    # failed or rolled back
    return [
        Reason(
            ReasonCode.CANARY_FAILED,
            f"the canary analysis of these weights and envelope {latest.status.replace('_', ' ')}: "
            "its checks name the metric, values and threshold",
            f"{PIPELINE} rolls the canary back and fixes what it deployed, then starts a new analysis",
            Actor.PIPELINE,
        )
    ]
