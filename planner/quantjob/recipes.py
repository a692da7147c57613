"""Quantization recipes as data: each names the project's scheme, the algorithm, the llm-compressor
modifiers (type + arguments) it runs, and whether it needs calibration data. Pure: no torch here,
so the web tier validates a request against the same table the node applies."""

from __future__ import annotations

import copy
from typing import Any

# Kept out of quantization in every recipe (quantization-eval reference): the LM head (tied to the
# embeddings in the tiny model) and, for MoE checkpoints, the router / gate.
IGNORE = ["lm_head", "re:.*mlp.gate$"]

RECIPES: dict[str, dict[str, Any]] = {
    "w4a16-gptq": {
        "scheme": "w4a16",
        "algorithm": "gptq",
        "calibration": True,
        "modifiers": [{"type": "GPTQModifier", "targets": ["Linear"], "scheme": "W4A16", "ignore": IGNORE}],
    },
    "w4a16-awq": {
        "scheme": "w4a16",
        "algorithm": "awq",
        "calibration": True,
        "modifiers": [{"type": "AWQModifier", "targets": ["Linear"], "scheme": "W4A16_ASYM", "ignore": IGNORE}],
    },
    # Round-to-nearest with no calibration data: the careless baseline the eval should catch.
    "w4a16-rtn": {
        "scheme": "w4a16",
        "algorithm": "rtn",
        "calibration": False,
        "modifiers": [{"type": "QuantizationModifier", "targets": ["Linear"], "scheme": "W4A16", "ignore": IGNORE}],
    },
    "w8a8-smoothquant-gptq": {
        "scheme": "w8a8",
        "algorithm": "smoothquant+gptq",
        "calibration": True,
        "modifiers": [
            {"type": "SmoothQuantModifier", "smoothing_strength": 0.8},
            {"type": "GPTQModifier", "targets": ["Linear"], "scheme": "W8A8", "ignore": IGNORE},
        ],
    },
    "fp8-dynamic": {
        "scheme": "fp8",
        "algorithm": "rtn",
        "calibration": False,
        "modifiers": [
            {"type": "QuantizationModifier", "targets": ["Linear"], "scheme": "FP8_DYNAMIC", "ignore": IGNORE}
        ],
    },
    # int4 group-128 weights + per-token dynamic int8 activations (the seed deployment's W4A8); applied
    # only where the installed compressed-tensors has that preset (see refusal()).
    "w4a8-gptq": {
        "scheme": "w4a8",
        "algorithm": "gptq",
        "calibration": True,
        "modifiers": [{"type": "GPTQModifier", "targets": ["Linear"], "scheme": "W4A8", "ignore": IGNORE}],
    },
}

MODIFIER_TYPES = {
    "GPTQModifier": "llmcompressor.modifiers.quantization",
    "QuantizationModifier": "llmcompressor.modifiers.quantization",
    "AWQModifier": "llmcompressor.modifiers.awq",
    "SmoothQuantModifier": "llmcompressor.modifiers.smoothquant",
}
MODIFIER_ARGS = {"targets", "scheme", "ignore", "smoothing_strength", "dampening_frac", "block_size"}


def recipe(name: str) -> dict[str, Any]:
    """The recipe named `name`, as data (a copy: callers store it with the run)."""
    if name not in RECIPES:
        raise ValueError(f"recipe: unknown {name!r}; one of {', '.join(sorted(RECIPES))}")
    return {"name": name, **copy.deepcopy(RECIPES[name])}


def validate(data: Any) -> dict[str, Any]:
    """A recipe that came as data (a spec file): every modifier a known type with known arguments."""
    if not isinstance(data, dict):
        raise ValueError("recipe: must be an object")
    for key in ("name", "scheme", "algorithm", "calibration", "modifiers"):
        if key not in data:
            raise ValueError(f"recipe.{key}: missing")
    modifiers = data["modifiers"]
    if not isinstance(modifiers, list) or not modifiers:
        raise ValueError("recipe.modifiers: a non-empty list")
    for index, modifier in enumerate(modifiers):
        if not isinstance(modifier, dict) or modifier.get("type") not in MODIFIER_TYPES:
            raise ValueError(f"recipe.modifiers[{index}].type: one of {', '.join(sorted(MODIFIER_TYPES))}")
        unknown = set(modifier) - MODIFIER_ARGS - {"type"}
        if unknown:
            raise ValueError(f"recipe.modifiers[{index}]: unknown arguments {', '.join(sorted(unknown))}")
    return data


def presets_used(data: dict[str, Any]) -> list[str]:
    return [m["scheme"] for m in data["modifiers"] if "scheme" in m]


def refusal(data: dict[str, Any], available_presets: set[str] | frozenset[str]) -> str | None:
    """Why the installed tool cannot apply this recipe (None when it can). The message names the scheme."""
    missing = [p for p in presets_used(data) if p not in available_presets]
    if missing:
        return (
            f"scheme {data['scheme']}: the installed compressed-tensors has no {', '.join(missing)} preset, "
            f"so llm-compressor cannot apply recipe {data['name']}"
        )
    return None
