"""inspect_checkpoint: one pass over a checkpoint directory, cheapest checks first, hashing last.

Order: walk (links, special files, names), config.json, the weight indexes (names that escape the
directory), every safetensors header, the model card, the license files, then the manifest (every
file hashed in 1 MiB chunks: the only step that reads the tensors' bytes).
"""

from __future__ import annotations

import posixpath
from collections import Counter
from pathlib import Path
from typing import Any

from planner.inspectjob.licenses import license_kind, read_card, read_license
from planner.inspectjob.precision import UNQUANTIZED_KINDS, decide, weight_kind
from planner.inspectjob.reading import load_json, reading, walk
from planner.inspectjob.report import (
    DEFAULT_LIMITS,
    ConfigSummary,
    FileEntry,
    InspectionRefused,
    InspectionReport,
    InspectLimits,
    LicenseFile,
    Problem,
    SafetensorsFile,
    TensorSummary,
)
from planner.inspectjob.safetensors_header import SafetensorsHeader, read_header
from planner.inspectjob.structure import canonical_tensor, config_dimensions, structure_of
from planner.manifest import digest_of_manifest, manifest_line, resolve_inside_roots

WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".ckpt", ".gguf", ".msgpack", ".h5", ".onnx", ".npz")
PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".ckpt")
INDEX_SUFFIXES = (".safetensors.index.json", ".bin.index.json", ".pt.index.json")
CONFIG_NAMES = frozenset(
    {
        "config.json",
        "generation_config.json",
        "hf_quant_config.json",
        "quantization_config.json",
        "params.json",
        "preprocessor_config.json",
        "processor_config.json",
        "recipe.yaml",
    }
)
TOKENIZER_NAMES = frozenset(
    {
        "tokenizer.json",
        "tokenizer_config.json",
        "tokenizer.model",
        "special_tokens_map.json",
        "added_tokens.json",
        "vocab.json",
        "vocab.txt",
        "merges.txt",
        "spiece.model",
        "tekken.json",
        "chat_template.jinja",
        "chat_template.json",
    }
)


def file_kind(relative: str) -> str:
    name = relative.rsplit("/", 1)[-1]
    lowered = name.lower()
    if "/" not in relative and lowered == "readme.md":
        return "model_card"
    kind = license_kind(relative)
    if kind:
        return kind
    if lowered.endswith(WEIGHT_SUFFIXES + INDEX_SUFFIXES):
        return "weights"
    if name in CONFIG_NAMES:
        return "config"
    if name in TOKENIZER_NAMES or lowered.endswith(".tiktoken"):
        return "tokenizer"
    return "other"


def _shard_name(index: str, tensor: str, shard: Any) -> str:
    """The shard an index entry names, relative to the root; refused if it could leave the directory."""
    where = f"weight_map[{tensor[:200]!r}]"
    if not isinstance(shard, str) or not shard:
        raise InspectionRefused(index, f"{where} is not a file name")
    parts = shard.split("/")
    if shard.startswith("/") or "\\" in shard or "\0" in shard or ".." in parts or ":" in parts[0]:
        raise InspectionRefused(index, f"{where} names {shard[:200]!r}, outside the checkpoint directory")
    return posixpath.normpath(posixpath.join(posixpath.dirname(index), shard))


def _config(root: Path, names: set[str], limits: InspectLimits) -> tuple[dict[str, Any] | None, list[Problem]]:
    if "config.json" not in names:
        return None, [Problem(".", "config.missing", "no config.json")]
    config = load_json(root, "config.json", limits.max_config_bytes, limits, "config")
    if not isinstance(config, dict):
        return None, [Problem("config.json", "config.not_object", "config.json is not a JSON object")]
    return config, []


def _config_summary(config: dict[str, Any]) -> ConfigSummary:
    architectures = config.get("architectures")
    dtype = config.get("torch_dtype") or config.get("dtype")
    quantization = config.get("quantization_config")
    return ConfigSummary(
        architectures=tuple(str(a)[:200] for a in architectures[:16]) if isinstance(architectures, list) else (),
        model_type=config["model_type"][:200] if isinstance(config.get("model_type"), str) else None,
        torch_dtype=dtype if isinstance(dtype, str) else None,
        quantization_config=quantization if isinstance(quantization, dict) else None,
        dimensions=config_dimensions(config),
    )


def _file_summary(relative: str, header: SafetensorsHeader) -> SafetensorsFile:
    dtypes: dict[str, tuple[int, int]] = {}
    largest: tuple[str, str, tuple[int, ...]] | None = None
    most = -1
    for name, info in header.tensors.items():
        count, elements = dtypes.get(info.dtype, (0, 0))
        dtypes[info.dtype] = (count + 1, elements + info.elements)
        if info.elements > most:
            most, largest = info.elements, (name[:200], info.dtype, info.shape)
    return SafetensorsFile(path=relative, tensors=len(header.tensors), dtypes=dtypes, largest=largest)


def _with_modelopt(root: Path, config: dict[str, Any], names: set[str], limits: InspectLimits) -> dict[str, Any]:
    """A ModelOpt export may declare its scheme only in hf_quant_config.json: read it as modelopt's."""
    if isinstance(config.get("quantization_config"), dict) or "hf_quant_config.json" not in names:
        return config
    data = load_json(root, "hf_quant_config.json", limits.max_config_bytes, limits, "config")
    scheme = data.get("quantization") if isinstance(data, dict) else None
    if not isinstance(scheme, dict):
        return config
    return {**config, "quantization_config": {"quant_method": "modelopt", **scheme}}


def _indexes(root: Path, names: set[str], limits: InspectLimits) -> tuple[Counter[str], list[Problem]]:
    """Tensors per shard, over every top-level weight index; an index naming a file outside is refused."""
    per_shard: Counter[str] = Counter()
    problems: list[Problem] = []
    for index in sorted(n for n in names if "/" not in n and n.endswith(INDEX_SUFFIXES)):
        data = load_json(root, index, limits.max_index_bytes, limits, "weight index")
        weight_map = data.get("weight_map") if isinstance(data, dict) else None
        if not isinstance(weight_map, dict):
            raise InspectionRefused(index, "no weight_map object")
        shards: Counter[str] = Counter(_shard_name(index, str(t), s) for t, s in weight_map.items())
        for shard in sorted(set(shards) - names):
            problems.append(Problem(index, "index.missing_shard", f"names {shard}, which is not in the checkpoint"))
        if index.endswith(".safetensors.index.json"):
            per_shard.update(shards)
    return per_shard, problems


def require_within(root: Path, within: tuple[Path, ...]) -> None:
    """Refuse a root whose real path lies outside every one of `within` (the cluster's model roots).
    The service checks the path as written; only the node can see a link on the way
    (models/shared -> /home/someone), and a model root that is itself a link resolves the same way.
    The check is the eval and quantize payloads' own (planner.manifest.resolve_inside_roots); the
    refusal never says where the link leads."""
    try:
        resolve_inside_roots(str(root), [str(path) for path in within], "directory")
    except ValueError:
        raise InspectionRefused(".", "leads outside the cluster's model roots (through a symbolic link)") from None


def inspect_checkpoint(
    root: Path, *, limits: InspectLimits = DEFAULT_LIMITS, hash_files: bool = True, within: tuple[Path, ...] = ()
) -> InspectionReport:
    """Inspect the checkpoint at `root`; raises InspectionRefused naming the file for a hostile one.
    `within`: the model roots the root must resolve inside (the job passes the cluster's; empty: no
    check, for a directory inspected by hand). hash_files=False skips the manifest (weights_digest,
    manifest and each sha256 are None): the benchmark's headers-only figure, never the job's."""
    root = Path(root)
    if within:
        require_within(root, within)
    files = walk(root, limits)
    names = {relative for relative, _ in files}
    problems: list[Problem] = []

    config, found = _config(root, names, limits)
    problems += found
    effective = _with_modelopt(root, config, names, limits) if config else None

    per_shard, found = _indexes(root, names, limits)
    problems += found
    top_level = sorted(n for n in names if "/" not in n and n.endswith(".safetensors"))
    counted = set(per_shard) & names if per_shard else set(top_level)
    elements: Counter[str] = Counter()
    kinds: Counter[str] = Counter()
    examples: dict[str, tuple[str, str]] = {}
    sixteen_names: list[str] = []
    canonical: list[tuple[str, tuple[int, ...]]] = []
    per_file: list[SafetensorsFile] = []
    tensor_count = 0
    for relative in sorted(n for n in names if n.endswith(".safetensors")):
        header = read_header(root / relative, relative, limits)
        problems += header.problems
        per_file.append(_file_summary(relative, header))
        if relative in per_shard and per_shard[relative] != len(header.tensors):
            problems.append(
                Problem(
                    relative,
                    "index.count",
                    f"the index names {per_shard[relative]:,} tensors in it; its header has {len(header.tensors):,}",
                )
            )
        if relative not in counted:
            continue
        tensor_count += len(header.tensors)
        for name, info in header.tensors.items():
            elements[info.dtype] += info.elements
            found_tensor = canonical_tensor(name, info)
            if found_tensor is not None:
                canonical.append(found_tensor)
            kind = weight_kind(name, info, header.tensors)
            if kind is None:
                continue
            kinds[kind] += 1
            examples.setdefault(kind, (relative, name))
            if kind in UNQUANTIZED_KINDS:
                sixteen_names.append(name)
    if not counted:
        pickled = [n for n in sorted(names) if n.endswith(PICKLE_SUFFIXES)]
        if pickled:
            problems.append(
                Problem(
                    pickled[0], "weights.unread", "pickle weights are never loaded here: precision from config.json"
                )
            )
        elif not any(file_kind(n) == "weights" for n in names):
            problems.append(Problem(".", "weights.none", "no weights file"))

    precision, found = decide(effective, kinds, examples, limits)
    problems += found
    quantized = sum(n for k, n in kinds.items() if k not in UNQUANTIZED_KINDS)
    tensors = TensorSummary(
        count=tensor_count,
        elements_by_dtype=dict(elements),
        quantized_tensors=quantized,
        bf16_tensors=tuple(sorted(sixteen_names)[: limits.max_listed_names]) if quantized else (),
        bf16_linear_count=len(sixteen_names) if quantized else 0,
        linear_by_kind=dict(kinds),
        files_read=tuple(sorted(counted)),
    )

    readme = next((n for n in sorted(names) if file_kind(n) == "model_card"), None)
    card = None
    if readme is None:
        problems.append(Problem(".", "card.missing", "no README.md model card"))
    else:
        card, found = read_card(root, readme, limits)
        problems += found

    license_files: list[LicenseFile] = []
    license_bytes = 0
    sizes = dict(files)
    for relative in sorted(names):
        kind = license_kind(relative)
        if kind:
            license_bytes += sizes[relative]
            if len(license_files) >= limits.max_license_files:
                raise InspectionRefused(relative, f"more than {limits.max_license_files} license files")
            if license_bytes > limits.max_license_total_bytes:
                raise InspectionRefused(
                    relative, f"license files above {limits.max_license_total_bytes:,} bytes together"
                )
            entry, found = read_license(root, relative, kind, limits)
            license_files.append(entry)
            problems += found
    if not license_files:
        problems.append(Problem(".", "license.missing", "no LICENSE, USE_POLICY or NOTICE file: a finding for legal"))

    entries: list[FileEntry] = []
    lines: list[str] = []
    for relative, size in files:
        sha256 = None
        if hash_files:
            with reading(relative):
                line = manifest_line(root, root / relative)
            lines.append(line)
            sha256, size = line.split(" ", 2)[0], int(line.split(" ", 2)[1])
        entries.append(FileEntry(path=relative, size_bytes=size, sha256=sha256, kind=file_kind(relative)))
    manifest = "".join(lines) if hash_files else None
    if hash_files and not lines:
        raise InspectionRefused(".", "no files to hash")
    if hash_files:
        # The texts read above are what the service keeps; the digest is what is approved. A file
        # swapped between the two reads (a link to another file while its text was read, the
        # original back for hashing) would make them differ: refuse rather than keep a text the
        # digest does not cover.
        hashed = {entry.path: entry.sha256 for entry in entries}
        for license_file in license_files:
            if hashed.get(license_file.path) != license_file.sha256:
                raise InspectionRefused(license_file.path, "changed while the inspection read it")
    return InspectionReport(
        weights_digest=digest_of_manifest(lines) if manifest else None,
        manifest=manifest,
        files=tuple(entries),
        tensors=tensors,
        config=_config_summary(config) if config else None,
        precision=precision,
        model_card=card,
        license_files=tuple(license_files),
        problems=tuple(problems),
        safetensors=tuple(per_file),
        structure=structure_of(canonical) if counted else None,
    )
