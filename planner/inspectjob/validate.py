"""The service's check of a node's inspection report before any of it is believed.

result.json comes from a job on a cluster node, next to files a requester controls: its checksum
proves it is whole, not that it is right. Before the service stores a report as what the artifact is,
the keys it reads must have the types docs/inspection.md gives them, stay within bounds no honest
inspection exceeds (the same InspectLimits the node applies), and the precision must agree with the
tensor kinds the same report lists (the node's own rule: the tensors decide). A report that fails is
refused naming the key; it is never a crash and never a pass.
"""

from __future__ import annotations

from typing import Any

from planner.inspectjob.precision import UNQUANTIZED_KINDS
from planner.inspectjob.report import DEFAULT_LIMITS, FORMAT, InspectLimits
from planner.manifest import digest_of_manifest, manifest_entries, manifest_text_lines
from planner.specs import precisions

LICENSE_FILE_KINDS = frozenset({"license", "use_policy", "notice"})
CARD_TEXT_FIELDS = ("license", "license_name", "license_link", "base_model_relation")


def _count(value: Any) -> bool:
    return type(value) is int and value >= 0


def _optional_text(value: Any) -> bool:
    return value is None or isinstance(value, str)


def precision_keys() -> frozenset[str]:
    """Every key a report's precision may carry: the planner's precisions and the 16-bit ones."""
    return frozenset(precisions()) | UNQUANTIZED_KINDS


def _precision_fault(precision: Any, tensors: Any) -> str | None:
    if not isinstance(precision, dict):
        return "precision: not an object"
    key = precision.get("key")
    if key is not None and (not isinstance(key, str) or key not in precision_keys()):
        return f"precision.key: {str(key)[:40]!r} is not a precision the planner knows"
    if not _optional_text(precision.get("summary")):
        return "precision.summary: not a string"
    if not isinstance(tensors, dict):
        return "tensors: not an object"
    kinds = tensors.get("linear_by_kind")
    if not isinstance(kinds, dict) or not all(isinstance(k, str) and _count(n) for k, n in kinds.items()):
        return "tensors.linear_by_kind: not an object of counts"
    quantized = {kind: count for kind, count in kinds.items() if kind not in UNQUANTIZED_KINDS and count}
    sixteen = sum(count for kind, count in kinds.items() if kind in UNQUANTIZED_KINDS)
    if key in UNQUANTIZED_KINDS and quantized:
        kind, count = max(quantized.items(), key=lambda item: item[1])
        return f"precision.key: {key}, but the report's own tensors hold {count:,} linear weights as {kind}"
    if key is not None and key not in UNQUANTIZED_KINDS and sixteen and not quantized:
        return f"precision.key: {key}, but the report's own tensors hold only 16-bit linear weights"
    return None


def _card_fault(card: Any) -> str | None:
    if card is None:
        return None
    if not isinstance(card, dict):
        return "model_card: not an object"
    for name in CARD_TEXT_FIELDS:
        if not _optional_text(card.get(name)):
            return f"model_card.{name}: not a string"
    bases = card.get("base_model")
    if bases is not None and not (isinstance(bases, list) and all(isinstance(b, str) for b in bases)):
        return "model_card.base_model: not a list of strings"
    return None


def _license_files_fault(files: Any, limits: InspectLimits) -> str | None:
    if not isinstance(files, list):
        return "license_files: not a list"
    if len(files) > limits.max_license_files:
        return f"license_files: {len(files):,} files; an inspection reports at most {limits.max_license_files}"
    total = 0
    for number, item in enumerate(files):
        where = f"license_files[{number}]"
        if not isinstance(item, dict):
            return f"{where}: not an object"
        if not isinstance(item.get("path"), str) or item.get("kind") not in LICENSE_FILE_KINDS:
            return f"{where}: no path, or a kind other than license, use_policy, notice"
        text = item.get("text")
        if not isinstance(text, str) or not isinstance(item.get("sha256"), str):
            return f"{where}: text and sha256 are not strings"
        # A decoded character comes from at least one byte (a replaced one from exactly one): the
        # node's byte bounds bound the characters too.
        if len(text) > limits.max_license_bytes:
            return (
                f"{where}: a text of {len(text):,} characters; an inspection reads at most {limits.max_license_bytes:,}"
            )
        total += len(text)
        if total > limits.max_license_total_bytes:
            return f"license_files: above {limits.max_license_total_bytes:,} characters of text together"
    return None


def _structure_fault(report: dict[str, Any], limits: InspectLimits) -> str | None:
    """The keys the parent comparison and the artifact page read (absent from reports written before
    them: optional)."""
    structure = report.get("structure")
    if structure is not None and not (
        isinstance(structure, dict)
        and _count(structure.get("tensors"))
        and isinstance(structure.get("names_sha256"), str)
        and isinstance(structure.get("shapes_sha256"), str)
    ):
        return "structure: not an object of a count and two digests"
    config = report.get("config")
    dimensions = config.get("dimensions") if isinstance(config, dict) else None
    if dimensions is not None and not (
        isinstance(dimensions, dict) and all(isinstance(k, str) and _count(v) for k, v in dimensions.items())
    ):
        return "config.dimensions: not an object of sizes"
    files = report.get("safetensors", [])
    if not isinstance(files, list) or len(files) > limits.max_files:
        return "safetensors: not a list of at most one entry a file"
    for number, item in enumerate(files):
        if not (isinstance(item, dict) and isinstance(item.get("path"), str) and _count(item.get("tensors"))):
            return f"safetensors[{number}]: no path or tensor count"
        dtypes = item.get("dtypes")
        if not isinstance(dtypes, dict) or len(dtypes) > 64:
            return f"safetensors[{number}].dtypes: not an object"
    return None


def report_fault(report: Any, limits: InspectLimits = DEFAULT_LIMITS) -> str | None:
    """Why `report` (a parsed result.json that is not a refusal) cannot be believed, naming the key;
    None when it can."""
    if not isinstance(report, dict) or report.get("format") != FORMAT:
        return f"format: not {FORMAT}"
    if not isinstance(report.get("weights_digest"), str):
        return "weights_digest: not a string"
    manifest = report.get("manifest")
    if not isinstance(manifest, str):
        return "manifest: not a string"
    try:
        hashes_to = digest_of_manifest(manifest) == report["weights_digest"].lower()
    except ValueError:
        hashes_to = False
    if not hashes_to:
        return "manifest: does not hash to the report's weights_digest"
    for name in ("files", "problems"):
        if not isinstance(report.get(name), list):
            return f"{name}: not a list"
    return (
        _precision_fault(report.get("precision"), report.get("tensors"))
        or _card_fault(report.get("model_card"))
        or _license_files_fault(report.get("license_files"), limits)
        or _license_files_hashed(report["license_files"], manifest)
        or _structure_fault(report, limits)
    )


def _license_files_hashed(files: list[dict[str, Any]], manifest: str) -> str | None:
    """Each license text's bytes are the bytes the manifest (so the approved digest) hashed."""
    hashed = {relative: sha256 for sha256, _size, relative in manifest_entries(manifest_text_lines(manifest))}
    for number, item in enumerate(files):
        if hashed.get(item["path"]) != item["sha256"]:
            return f"license_files[{number}]: its sha256 is not the manifest's for {item['path'][:200]}"
    return None
