"""The precision an artifact's weights are stored in, read from the checkpoint itself.

What a requester types (a request's `serving_plan.precision`, an artifact's `derivation`) is checked
against this, never trusted instead of it. The most direct source wins: the latest inspection of the
files on a cluster (their safetensors headers and config.json, planner.inspectjob), else the
checkpoint's own config.json / quantization_config given at registration, else the catalog's record
of how the architecture is published. The mapping from a quantization_config to the planner's
precision vocabulary is the planner's (`planner.hf_config.infer_precision`): one reading for the
planner's memory model and for this check.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from planner.hf_config import infer_precision
from planner.inspectjob.precision import UNQUANTIZED_KINDS
from planner.specs import models as planner_models

# Precisions an engine serves without quantizing the weights: no quantization eval is needed for them.
# The node's inspection reads the same set off the tensors' dtypes (one vocabulary).
UNQUANTIZED_PRECISIONS = UNQUANTIZED_KINDS


@dataclass(frozen=True, slots=True)
class WeightsPrecision:
    """How the weights are stored: the planner precision key and where that was read."""

    precision: str  # planner vocabulary: bf16, fp8, w8a8, w4a16, w4a8, mxfp4, nvfp4, …
    summary: str  # for people: "w4a16 (compressed-tensors, group 128)"
    source: str  # inspection | config.json | quantization_config | catalog | assumed
    published: bool  # the architecture's publisher ships it in this precision (catalog)

    @property
    def quantized(self) -> bool:
        return self.precision not in UNQUANTIZED_PRECISIONS

    def as_evidence(self) -> dict[str, Any]:
        return {
            "precision": self.precision,
            "summary": self.summary,
            "source": self.source,
            "quantized": self.quantized,
            "published": self.published,
        }


def _raw_quantization_config(config: Any, quantization_config: Any) -> dict[str, Any] | None:
    """The checkpoint's own quantization_config: the one inside config.json, else the one given beside
    it when it is in the checkpoint's format (the service's own summary has `method`, not
    `quant_method`, and was derived from config.json anyway)."""
    if isinstance(config, dict) and isinstance(config.get("quantization_config"), dict):
        return dict(config["quantization_config"])
    if isinstance(quantization_config, dict) and "quant_method" in quantization_config:
        return dict(quantization_config)
    return None


def _summary(key: str, raw: dict[str, Any], group_size: Any) -> str:
    method = str(raw.get("quant_method") or "")
    details = [method] if method else []
    if isinstance(group_size, int) and group_size > 0:
        details.append(f"group {group_size}")
    block = raw.get("weight_block_size")
    if isinstance(block, list) and len(block) == 2:
        details.append(f"block {block[0]}x{block[1]}")
    return f"{key} ({', '.join(details)})" if details else key


def weights_precision_of(
    *, architecture_key: str, config: Any, quantization_config: Any, inspected: dict[str, Any] | None = None
) -> WeightsPrecision:
    """Pure: the stored precision from what is known of a checkpoint. `inspected` is an inspection
    report's `precision` block (planner.inspectjob): it decides when present."""
    spec = planner_models().get(architecture_key) if architecture_key else None
    native = spec.checkpoint_precision if spec is not None else None
    if inspected is not None:
        key = str(inspected.get("key") or "")
        if not key:  # quantized in a layout the inspection does not know: never taken for BF16
            summary = str(inspected.get("summary") or "an unrecognised quantized layout")
            return WeightsPrecision("unknown", summary, "inspection", False)
        return WeightsPrecision(key, str(inspected.get("summary") or key), "inspection", key == native)
    raw = _raw_quantization_config(config, quantization_config)
    if raw is not None:
        inferred = infer_precision({"quantization_config": raw}) or {}
        declared = str(inferred.get("precision") or "")
        if declared:
            source = (
                "config.json"
                if isinstance(config, dict) and config.get("quantization_config")
                else "quantization_config"
            )
            return WeightsPrecision(
                declared, _summary(declared, raw, inferred.get("group_size")), source, declared == native
            )
    if native:
        return WeightsPrecision(native, f"{native} (as published)", "catalog", True)
    return WeightsPrecision("bf16", "bf16 (no quantization_config)", "assumed", False)


def precision_conflict(weights: WeightsPrecision, serving_precision: str) -> str | None:
    """Why a serving precision cannot serve these weights, or None. Quantized weights are served at
    their own precision; BF16 weights may be quantized by the engine at load (online quantization, an
    eval of its own), so any precision serves them."""
    if not weights.quantized or serving_precision == weights.precision:
        return None
    return f"the weights are {weights.summary}, not {serving_precision}"
