"""Is the artifact named as a derivative's parent the checkpoint it was made from? Pure: two inspection
reports (`governance.inspection/1` documents) in, the ways they differ out.

A quantized derivative keeps its parent's architecture, its config.json sizes (hidden size, layers,
vocabulary, experts) and its tensors' names and shapes once packing is taken out
(planner.inspectjob.structure). Anything else named as the parent is another model: an eval against it
measures nothing about this one.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class ParentComparison:
    comparable: bool  # False: the reports share nothing to compare (no config, no structure read)
    differences: tuple[str, ...]  # each names what differs and both values, child first

    @property
    def matches(self) -> bool:
        return self.comparable and not self.differences


def _mapping(report: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = report.get(key)
    return value if isinstance(value, Mapping) else {}


def compare_with_parent(child: Mapping[str, Any], parent: Mapping[str, Any]) -> ParentComparison:
    """How the derivative's report (`child`) differs from its claimed parent's. Only what both reports
    carry is compared; with nothing in common the answer is not comparable, never a match."""
    differences: list[str] = []
    compared = False
    child_config, parent_config = _mapping(child, "config"), _mapping(parent, "config")
    for key in ("architectures", "model_type"):
        mine, theirs = child_config.get(key), parent_config.get(key)
        if mine and theirs:
            compared = True
            if mine != theirs:
                differences.append(f"config.json {key}: {_text(mine)} here, {_text(theirs)} in the parent")
    mine_dims, their_dims = _mapping(child_config, "dimensions"), _mapping(parent_config, "dimensions")
    for key in sorted(set(mine_dims) & set(their_dims)):
        compared = True
        if mine_dims[key] != their_dims[key]:
            differences.append(f"config.json {key} {mine_dims[key]} here, {their_dims[key]} in the parent")
    mine_tensors, their_tensors = _mapping(child, "structure"), _mapping(parent, "structure")
    if mine_tensors and their_tensors:
        compared = True
        counts = f"{mine_tensors.get('tensors')} tensors here, {their_tensors.get('tensors')} in the parent"
        if mine_tensors.get("names_sha256") != their_tensors.get("names_sha256"):
            differences.append(f"the tensor names differ, quantization packing aside ({counts})")
        elif mine_tensors.get("shapes_sha256") != their_tensors.get("shapes_sha256"):
            differences.append(f"the tensor shapes differ, quantization packing aside ({counts})")
    return ParentComparison(comparable=compared, differences=tuple(differences))


def _text(value: Any) -> str:
    if isinstance(value, list):
        return ", ".join(str(item) for item in value[:4]) or "none"
    return str(value)
