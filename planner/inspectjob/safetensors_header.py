"""A safetensors file's header, read and checked without touching its tensor data.

The format: an 8-byte little-endian header length N, N bytes of UTF-8 JSON (`{name: {dtype, shape,
data_offsets: [begin, end]}, "__metadata__": {str: str}}`), then the data region, offsets relative
to its start. Only the first 8 + N bytes are read. A header that cannot be a safetensors header
(length past the file or above the bound, not UTF-8, not JSON, too deep, entries of the wrong types)
refuses the checkpoint; tensors whose bytes lie outside the data region, overlap, or disagree with
their shape are problems (the engine would refuse to load them; nothing here is harmed).
"""

from __future__ import annotations

import itertools
import math
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from planner.inspectjob.reading import depth, parse_json, reading
from planner.inspectjob.report import InspectionRefused, InspectLimits, Problem

# Bytes per element of the dtypes safetensors defines (sub-byte ones are stored packed, in bytes).
DTYPE_BYTES = {
    "BOOL": 1,
    "U8": 1,
    "I8": 1,
    "F8_E5M2": 1,
    "F8_E4M3": 1,
    "F8_E8M0": 1,
    "I16": 2,
    "U16": 2,
    "F16": 2,
    "BF16": 2,
    "I32": 4,
    "U32": 4,
    "F32": 4,
    "F64": 8,
    "I64": 8,
    "U64": 8,
}


# No real tensor has a dimension near 2**53; a bigger one would make the element counts numbers that
# json.dumps refuses to write (Python's 4,300-digit limit), after the inspection had ended.
MAX_DIMENSION = 1 << 53


@dataclass(frozen=True, slots=True)
class TensorInfo:
    dtype: str
    shape: tuple[int, ...]

    @property
    def elements(self) -> int:
        return math.prod(self.shape)


@dataclass(frozen=True, slots=True)
class SafetensorsHeader:
    tensors: dict[str, TensorInfo]
    metadata: dict[str, str]
    data_bytes: int  # the size of the data region the file actually has
    problems: tuple[Problem, ...]


def read_header_bytes(path: Path, relative: str, limits: InspectLimits) -> tuple[bytes, int]:
    """The JSON header's bytes and the data region's size; reads exactly 8 + N bytes."""
    with reading(relative):
        size = path.stat().st_size
        if size < 8:
            raise InspectionRefused(relative, f"{size} bytes: shorter than a safetensors header length")
        with open(path, "rb") as handle:  # the module's own `open`: a test counts the bytes it reads
            length = struct.unpack("<Q", handle.read(8))[0]
            if length > size - 8:
                raise InspectionRefused(
                    relative, f"the header length {length:,} runs past the end of the file ({size:,} bytes)"
                )
            if length > limits.max_safetensors_header_bytes:
                raise InspectionRefused(
                    relative,
                    f"a {length:,}-byte header; at most {limits.max_safetensors_header_bytes:,} bytes are read",
                )
            data = handle.read(length)
    if len(data) != length:  # shrank since stat
        raise InspectionRefused(relative, "the file ended inside its header")
    return data, size - 8 - length


def _entry(name: str, raw: Any, relative: str, limits: InspectLimits) -> tuple[TensorInfo, int, int]:
    if not isinstance(raw, dict):
        raise InspectionRefused(relative, f"tensor {name[:200]!r}: not an object")
    dtype, shape, offsets = raw.get("dtype"), raw.get("shape"), raw.get("data_offsets")
    if not isinstance(dtype, str) or len(dtype) > 16:
        raise InspectionRefused(relative, f"tensor {name[:200]!r}: dtype is not a short string")
    if (
        not isinstance(shape, list)
        or len(shape) > 16
        or not all(type(d) is int and 0 <= d <= MAX_DIMENSION for d in shape)
    ):
        raise InspectionRefused(relative, f"tensor {name[:200]!r}: shape is not a list of sizes")
    if (
        not isinstance(offsets, list)
        or len(offsets) != 2
        or not all(type(o) is int and o >= 0 for o in offsets)
        or offsets[0] > offsets[1]
    ):
        raise InspectionRefused(relative, f"tensor {name[:200]!r}: data_offsets is not [begin, end]")
    if len(raw) > 3:  # keys the format does not define: ignored, but not nested without bound
        for key, value in raw.items():
            if key not in ("dtype", "shape", "data_offsets") and depth(value) > limits.max_json_depth - 2:
                raise InspectionRefused(relative, f"tensor {name[:200]!r}: JSON nested too deep")
    return TensorInfo(dtype=dtype, shape=tuple(shape)), offsets[0], offsets[1]


def read_header(path: Path, relative: str, limits: InspectLimits) -> SafetensorsHeader:
    data, data_bytes = read_header_bytes(path, relative, limits)
    parsed = parse_json(data, relative, limits, check_depth=False)  # the entries' shapes are checked below
    del data
    if not isinstance(parsed, dict):
        raise InspectionRefused(relative, "the safetensors header is not a JSON object")
    metadata = parsed.pop("__metadata__", None) or {}
    if not isinstance(metadata, dict) or not all(isinstance(v, str) for v in metadata.values()):
        raise InspectionRefused(relative, "__metadata__ is not an object of strings")
    tensors: dict[str, TensorInfo] = {}
    spans: list[tuple[int, int, str]] = []
    problems: list[Problem] = []
    for name, raw in parsed.items():
        info, begin, end = _entry(name, raw, relative, limits)
        tensors[name] = info
        spans.append((begin, end, name))
        width = DTYPE_BYTES.get(info.dtype)
        if width is None:
            problems.append(Problem(relative, "safetensors.dtype", f"tensor {name}: unknown dtype {info.dtype!r}"))
        elif end - begin != info.elements * width:
            problems.append(
                Problem(
                    relative,
                    "safetensors.size",
                    f"tensor {name}: {end - begin:,} bytes stored for a {info.dtype} {list(info.shape)} tensor",
                )
            )
    spans.sort()
    outside = [name for _, end, name in spans if end > data_bytes]
    if outside:
        problems.append(
            Problem(
                relative,
                "safetensors.offsets",
                f"{len(outside)} tensor(s) lie past the {data_bytes:,}-byte data region, e.g. {outside[0]}",
            )
        )
    overlaps = [b[2] for a, b in itertools.pairwise(spans) if b[0] < a[1]]
    if overlaps:
        problems.append(
            Problem(relative, "safetensors.overlap", f"{len(overlaps)} tensor(s) overlap another, e.g. {overlaps[0]}")
        )
    return SafetensorsHeader(tensors=tensors, metadata=dict(metadata), data_bytes=data_bytes, problems=tuple(problems))
