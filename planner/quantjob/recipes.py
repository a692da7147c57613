"""Quantization recipes as data: each names the project's scheme, the algorithm, the llm-compressor
modifiers (type + arguments) it runs, and whether it needs calibration data. Pure: no torch here,
so the web tier validates a request against the same table the node applies."""

from __future__ import annotations

import copy
from typing import Any

# Kept out of quantization in every recipe (quantization-eval reference): the LM head (tied to the
# embeddings in the tiny model) and, for MoE checkpoints, the router / gate.
IGNORE = ["lm_head", "re:.*mlp.gate$"]

# Weight arguments of compressed-tensors' QuantizationArgs, for the recipes no preset names.
INT4_PER_TENSOR = {"num_bits": 4, "type": "int", "symmetric": True, "strategy": "tensor"}
INT4_PER_CHANNEL = {"num_bits": 4, "type": "int", "symmetric": True, "strategy": "channel"}

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
    # The careless int4 people reach for when a tool's default is not at hand: one scale for the whole
    # weight matrix (no groups, no channels), rounded to nearest with no calibration. A single outlier
    # sets the step for every weight of the layer; the eval must catch what that costs.
    "w4a16-tensor-rtn": {
        "scheme": "w4a16",
        "algorithm": "rtn",
        "calibration": False,
        "modifiers": [
            {
                "type": "QuantizationModifier",
                "config_groups": {"group_0": {"targets": ["Linear"], "weights": INT4_PER_TENSOR}},
                "ignore": IGNORE,
            }
        ],
    },
    # Per-channel int4 without groups (one scale per output row), round to nearest, no calibration.
    "w4a16-channel-rtn": {
        "scheme": "w4a16",
        "algorithm": "rtn",
        "calibration": False,
        "modifiers": [
            {
                "type": "QuantizationModifier",
                "config_groups": {"group_0": {"targets": ["Linear"], "weights": INT4_PER_CHANNEL}},
                "ignore": IGNORE,
            }
        ],
    },
    # Two bits per weight (compressed-tensors' W2A16 preset: int2 group-128, symmetric), the same scheme
    # made carelessly and well. Measured on the trained tiny model (docs/quantization.md): round to
    # nearest with no calibration fails the eval's gate; GPTQ on the calibration set passes it.
    # The planner does not model 2-bit weights and plans such a checkpoint as BF16 (more memory than
    # it needs, never less).
    "w2a16-rtn": {
        "scheme": "w2a16",
        "algorithm": "rtn",
        "calibration": False,
        "modifiers": [{"type": "QuantizationModifier", "targets": ["Linear"], "scheme": "W2A16", "ignore": IGNORE}],
    },
    "w2a16-gptq": {
        "scheme": "w2a16",
        "algorithm": "gptq",
        "calibration": True,
        "modifiers": [{"type": "GPTQModifier", "targets": ["Linear"], "scheme": "W2A16", "ignore": IGNORE}],
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
MODIFIER_ARGS = {
    "targets",
    "scheme",
    "config_groups",
    "ignore",
    "smoothing_strength",
    "dampening_frac",
    "block_size",
}
# A config group is a compressed-tensors QuantizationScheme; only these keys, with plain values, may
# come as data (a spec is input: nothing in it may name code to run).
GROUP_KEYS = {"targets", "weights", "input_activations", "output_activations"}
QUANT_ARG_KEYS = {"num_bits", "type", "symmetric", "group_size", "strategy", "dynamic", "actorder"}
STRATEGIES = {"tensor", "channel", "group", "token"}


def _validate_groups(where: str, groups: Any) -> None:
    if not isinstance(groups, dict) or not groups:
        raise ValueError(f"{where}: an object of named config groups")
    for name, group in groups.items():
        here = f"{where}.{name}"
        if not isinstance(group, dict) or not isinstance(group.get("targets"), list) or "weights" not in group:
            raise ValueError(f"{here}: needs targets (a list) and weights")
        unknown = set(group) - GROUP_KEYS
        if unknown:
            raise ValueError(f"{here}: unknown keys {', '.join(sorted(unknown))}")
        for key in GROUP_KEYS - {"targets"}:
            args = group.get(key)
            if args is None:
                continue
            if not isinstance(args, dict) or set(args) - QUANT_ARG_KEYS:
                raise ValueError(f"{here}.{key}: an object of {', '.join(sorted(QUANT_ARG_KEYS))}")
            bits = args.get("num_bits")
            if not isinstance(bits, int) or isinstance(bits, bool) or not 2 <= bits <= 8:
                raise ValueError(f"{here}.{key}.num_bits: an integer from 2 to 8")
            if args.get("type", "int") not in ("int", "float"):
                raise ValueError(f"{here}.{key}.type: int or float")
            if args.get("strategy", "tensor") not in STRATEGIES:
                raise ValueError(f"{here}.{key}.strategy: one of {', '.join(sorted(STRATEGIES))}")


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
        if "config_groups" in modifier:
            _validate_groups(f"recipe.modifiers[{index}].config_groups", modifier["config_groups"])
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
