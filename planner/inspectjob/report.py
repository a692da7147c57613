"""The inspection's typed result, its limits and its refusal: what the node reports about a checkpoint.

`InspectionReport.to_json()` is the `governance.inspection/1` document the service reads from
result.json; keys may be added, never renamed (docs/inspection.md).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

FORMAT = "governance.inspection/1"
MIB = 1 << 20


class InspectionRefused(ValueError):
    """A hostile or unreadable checkpoint: nothing of it is reported. `path` is relative to the root.

    `reason` says whose fault it is: `checkpoint` (the files), `manifest` (not the registered files),
    `memory_limit` / `time_limit` (the job's own bounds ran out while reading `path`)."""

    def __init__(self, path: str, message: str, *, reason: str = "checkpoint") -> None:
        super().__init__(f"{path}: {message}")
        self.path = path
        self.message = message
        self.reason = reason

    def to_json(self) -> dict[str, Any]:
        return {"format": FORMAT, "refused": {"file": self.path, "message": self.message, "reason": self.reason}}


class InspectionTimeout(Exception):
    """The job's wall-clock limit ran out (raised from the SIGALRM handler the CLI installs)."""


@dataclass(frozen=True, slots=True)
class InspectLimits:
    """Bounds a hostile checkpoint cannot push the inspection past; each is checked before reading."""

    max_files: int = 100_000
    max_safetensors_header_bytes: int = 100 * MIB  # the safetensors library's own bound
    max_config_bytes: int = 4 * MIB  # config.json, generation_config.json, hf_quant_config.json
    max_index_bytes: int = 64 * MIB  # *.index.json (DeepSeek-V3's is 9 MB)
    max_card_bytes: int = 1 * MIB  # the prefix of README.md searched for front matter
    max_front_matter_bytes: int = 256 * 1024
    max_license_bytes: int = 512 * 1024  # GPL-3 is 35 KB, the Llama 3.1 license 9 KB
    # Every license text travels in result.json and is stored by the service: a checkpoint ships a
    # handful (LICENSE, NOTICE, USE_POLICY, a code and a model license), not thousands.
    max_license_files: int = 64
    max_license_total_bytes: int = 4 * MIB
    max_json_depth: int = 32  # config.json nests 6 deep, a safetensors header 3
    max_listed_names: int = 20  # bf16_tensors
    max_ignore_entries: int = 512


DEFAULT_LIMITS = InspectLimits()  # frozen: one shared default is safe


@dataclass(frozen=True, slots=True)
class Problem:
    file: str
    code: str
    message: str

    def to_json(self) -> dict[str, Any]:
        return {"file": self.file, "code": self.code, "message": self.message}


@dataclass(frozen=True, slots=True)
class FileEntry:
    path: str
    size_bytes: int
    sha256: str | None  # None only when inspected with hash_files=False (the benchmark's headers-only run)
    kind: str

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "size": self.size_bytes, "sha256": self.sha256, "kind": self.kind}


@dataclass(frozen=True, slots=True)
class TensorSummary:
    count: int
    elements_by_dtype: dict[str, int]  # stored elements (a packed I32 holds 8 int4 values)
    quantized_tensors: int
    bf16_tensors: tuple[str, ...]  # linear weights kept in 16-bit when others are quantized
    bf16_linear_count: int
    linear_by_kind: dict[str, int]  # linear weights per stored kind: 16-bit, int_packed, int8, fp8, mxfp4, nvfp4
    files_read: tuple[str, ...]  # the shards counted (those the index names, else the top-level ones)

    def to_json(self) -> dict[str, Any]:
        return {
            "count": self.count,
            "parameters_by_dtype": dict(sorted(self.elements_by_dtype.items())),
            "quantized_tensors": self.quantized_tensors,
            "bf16_tensors": list(self.bf16_tensors),
            "bf16_linear_count": self.bf16_linear_count,
            "linear_by_kind": dict(sorted(self.linear_by_kind.items())),
            "files_read": list(self.files_read),
        }


@dataclass(frozen=True, slots=True)
class ConfigSummary:
    architectures: tuple[str, ...]
    model_type: str | None
    torch_dtype: str | None
    quantization_config: dict[str, Any] | None
    dimensions: dict[str, int] = field(default_factory=dict)  # hidden_size, num_hidden_layers, vocab_size, …

    def to_json(self) -> dict[str, Any]:
        return {
            "architectures": list(self.architectures),
            "model_type": self.model_type,
            "torch_dtype": self.torch_dtype,
            "quantization_config": self.quantization_config,
            "dimensions": dict(self.dimensions),
        }


@dataclass(frozen=True, slots=True)
class SafetensorsFile:
    """One safetensors file as its header describes it: what the artifact page lists per file."""

    path: str
    tensors: int
    dtypes: dict[str, tuple[int, int]]  # dtype -> (tensors, stored elements)
    largest: tuple[str, str, tuple[int, ...]] | None  # (name, dtype, shape) of the tensor with most elements

    def to_json(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "tensors": self.tensors,
            "dtypes": {
                dtype: {"tensors": count, "parameters": elements}
                for dtype, (count, elements) in sorted(self.dtypes.items())
            },
            "largest": (
                {"name": self.largest[0], "dtype": self.largest[1], "shape": list(self.largest[2])}
                if self.largest
                else None
            ),
        }


@dataclass(frozen=True, slots=True)
class Structure:
    """The tensors modulo quantization packing (planner.inspectjob.structure): digests, not the list."""

    tensors: int  # after the tensors only quantization adds are left out
    names_sha256: str  # of the sorted canonical names, one a line
    shapes_sha256: str  # of the sorted "name dims" lines

    def to_json(self) -> dict[str, Any]:
        return {"tensors": self.tensors, "names_sha256": self.names_sha256, "shapes_sha256": self.shapes_sha256}


@dataclass(frozen=True, slots=True)
class Precision:
    key: str | None  # the planner's precision vocabulary; None when neither config nor tensors tell
    method: str  # compressed-tensors, gptq, awq, fp8, mxfp4, modelopt, bitsandbytes, none, or as declared
    weight_bits: int | None
    activation_bits: int | None
    group_size: int | None
    strategy: str | None
    ignore: tuple[str, ...]
    summary: str
    agrees_with_tensors: bool  # False: config.json and the stored dtypes disagree (problems says how)
    declared_key: str | None  # what config.json alone says
    tensors_key: str | None  # what the stored dtypes alone say (None: no safetensors, or ambiguous)
    problems: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "method": self.method,
            "weight_bits": self.weight_bits,
            "activation_bits": self.activation_bits,
            "group_size": self.group_size,
            "strategy": self.strategy,
            "ignore": list(self.ignore),
            "summary": self.summary,
            "agrees_with_tensors": self.agrees_with_tensors,
            "declared_key": self.declared_key,
            "tensors_key": self.tensors_key,
            "problems": list(self.problems),
        }


@dataclass(frozen=True, slots=True)
class ModelCard:
    license: str | None
    license_name: str | None
    license_link: str | None
    base_model: tuple[str, ...]
    base_model_relation: str | None

    def to_json(self) -> dict[str, Any]:
        return {
            "license": self.license,
            "license_name": self.license_name,
            "license_link": self.license_link,
            "base_model": list(self.base_model),
            "base_model_relation": self.base_model_relation,
        }


@dataclass(frozen=True, slots=True)
class LicenseFile:
    path: str
    kind: str  # license, use_policy, notice
    sha256: str  # of the raw bytes
    fingerprint: str  # license_fingerprint(text)
    text: str
    utf8: bool  # False: decoded with U+FFFD replacements (and a problem says so)

    def to_json(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "kind": self.kind,
            "sha256": self.sha256,
            "fingerprint": self.fingerprint,
            "text": self.text,
            "utf8": self.utf8,
        }


@dataclass(frozen=True, slots=True)
class InspectionReport:
    weights_digest: str | None  # None only with hash_files=False
    manifest: str | None
    files: tuple[FileEntry, ...]
    tensors: TensorSummary
    config: ConfigSummary | None
    precision: Precision
    model_card: ModelCard | None
    license_files: tuple[LicenseFile, ...]
    problems: tuple[Problem, ...] = field(default=())
    safetensors: tuple[SafetensorsFile, ...] = field(default=())
    structure: Structure | None = None  # the tensors modulo quantization packing (planner.inspectjob.structure)

    def to_json(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "weights_digest": self.weights_digest,
            "manifest": self.manifest,
            "files": [entry.to_json() for entry in self.files],
            "tensors": self.tensors.to_json(),
            "config": self.config.to_json() if self.config else None,
            "precision": self.precision.to_json(),
            "model_card": self.model_card.to_json() if self.model_card else None,
            "license_files": [entry.to_json() for entry in self.license_files],
            "problems": [problem.to_json() for problem in self.problems],
            "safetensors": [entry.to_json() for entry in self.safetensors],
            "structure": self.structure.to_json() if self.structure else None,
        }
