"""The approved serving envelope, stated whole (what the gate compares a rollout with), and the
`scripts/gate-check` command a pipeline runs for it. Pure functions of the evidence document."""

from __future__ import annotations

import shlex
from typing import Any

from governance.deployments.readiness import DEFAULT_KV_DTYPE, approved_parallelism

# The serving fields the gate compares, in the order they are shown (request page, packet).
ENVELOPE_FIELDS = (
    "engine",
    "precision",
    "gpu",
    "kv_dtype",
    "tp",
    "pp",
    "ep",
    "max_model_len",
    "gpu_memory_utilization",
)
# What the gate assumes when the serving plan is silent (gate.conditions._serving).
_DEFAULTS: dict[str, Any] = {"engine": "vllm", "kv_dtype": DEFAULT_KV_DTYPE, "gpu_memory_utilization": 0.9}


def approved_envelope(evidence: dict[str, Any]) -> dict[str, Any]:
    """Every field the gate checks. tp/pp/ep: readiness.approved_parallelism (the gate's reading)."""
    plan = evidence.get("serving_envelope") or {}
    envelope: dict[str, Any] = {name: plan.get(name, _DEFAULTS.get(name)) for name in ENVELOPE_FIELDS}
    envelope.update(approved_parallelism(evidence))
    envelope["gpu_memory_utilization"] = float(envelope["gpu_memory_utilization"])
    return envelope


def gate_check_command(*, deployment: str, environment: str, evidence: dict[str, Any], base_url: str) -> str:
    """The command a pipeline runs before rolling out exactly what was approved. Every value is
    shell-quoted (a product's environment name is free text). GOV_TOKEN, the team's CI token, comes
    from the pipeline's secrets and is never written into the command."""
    envelope = approved_envelope(evidence)
    options: list[tuple[str, Any]] = [
        ("deployment", deployment),
        ("environment", environment),
        ("artifact-digest", (evidence.get("artifact") or {}).get("weights_digest", "")),
        *((name.replace("_", "-"), envelope[name]) for name in ENVELOPE_FIELDS),
    ]
    lines = [f"GOV_URL={shlex.quote(base_url.rstrip('/'))} scripts/gate-check"]
    lines += [f"  --{flag} {shlex.quote(str(value))}" for flag, value in options if value not in (None, "")]
    return " \\\n".join(lines)
