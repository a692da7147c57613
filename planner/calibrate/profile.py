"""Load a calibration profile (what `python -m planner.calibrate run` wrote) and turn its raw timings
into efficiencies the throughput model uses, interpolated by shape. Pure Python: the web service reads
profiles too.

Efficiency of a measured GEMM = its roofline time (max of FLOPs over the catalog peak and bytes over
the catalog HBM bandwidth) / its measured time; the planner divides its own roofline by the
efficiency interpolated in log2(M) at the measured shape nearest in weight size.
"""

from __future__ import annotations

import itertools
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from planner.specs import GpuSpec

SCHEMA = "planner.calibration/1"
# planner precision -> (profile GEMM path, tensor-core math it runs on)
PATHS = {
    "bf16": ("bf16", "bf16"),
    "fp8": ("fp8", "fp8"),
    "w8a8": ("int8", "int8"),
    "w4a16": ("w4a16", "bf16"),
    "w4a8": ("w4a8", "int8"),
}
COMPUTE = {"bf16": "bf16", "fp8": "fp8", "int8": "int8", "w4a16": "bf16", "w4a8": "int8"}
_REQUIRED = ("schema", "created_at", "gpu", "versions", "gemm", "memory", "launch", "collectives")
COLLECTIVE_OPS = ("all_reduce", "all_to_all")


def bus_factor(op: str, ranks: int) -> float:
    """Bus bandwidth over algorithm bandwidth (bytes / time), the nccl-tests convention
    (https://github.com/NVIDIA/nccl-tests/blob/master/doc/PERFORMANCE.md): all-reduce moves
    2(n-1)/n of the message over each rank's link, all-to-all (n-1)/n."""
    return 2 * (ranks - 1) / ranks if op == "all_reduce" else (ranks - 1) / ranks


@dataclass(frozen=True, slots=True)
class EfficiencyPoint:
    shape: str
    m: float  # tokens (dense GEMMs) or rows per expert (grouped MoE GEMMs)
    n: int
    k: int
    efficiency: float


@dataclass(frozen=True, slots=True)
class CollectiveTime:
    seconds: float  # one call of the message size asked for, from the profile's medians
    timing: str  # "cuda_graph" or "eager": how the points it came from were timed
    backend: str  # "nccl", "gloo"; "" in a profile from before the backend was recorded

    def label(self, op: str, ranks: int) -> str:
        how = ", ".join(part for part in (self.backend, self.timing.replace("_", " ")) if part)
        return f"{op} at {ranks} GPUs ({how})"


@dataclass(frozen=True, eq=False)
class CalibrationProfile:
    name: str
    gpu_name: str
    gpu_key: str | None
    versions: dict[str, Any]
    created_at: str
    raw: dict[str, Any] = field(repr=False)

    @classmethod
    def from_dict(cls, data: Any, name: str = "profile") -> CalibrationProfile:
        validate(data)
        return cls(
            name=name,
            gpu_name=data["gpu"]["name"],
            gpu_key=data["gpu"].get("catalog_key"),
            versions=dict(data["versions"]),
            created_at=data["created_at"],
            raw=data,
        )

    def label(self) -> str:
        v = self.versions
        return (
            f"{self.name} ({self.gpu_name}, driver {v.get('driver')}, CUDA {v.get('cuda')}, torch {v.get('torch')}, "
            f"measured {self.created_at})"
        )

    # -- GEMMs ---------------------------------------------------------------------------------
    def _points(self, section: str, path: str, gpu: GpuSpec) -> dict[str, list[EfficiencyPoint]]:
        cache = self.__dict__.setdefault("_cache", {})
        key = (section, path, gpu.key)
        if key not in cache:
            by_shape: dict[str, list[EfficiencyPoint]] = {}
            for point in self.raw.get(section, []):
                if point["precision"] != path:
                    continue
                grouped = section == "moe"
                efficiency = _efficiency(point, gpu, grouped=grouped)
                m = int(point["m"]) * int(point["top_k"]) / int(point["experts"]) if grouped else int(point["m"])
                by_shape.setdefault(point["shape"], []).append(
                    EfficiencyPoint(point["shape"], m, int(point["n"]), int(point["k"]), efficiency)
                )
            for points in by_shape.values():
                points.sort(key=lambda p: p.m)
            cache[key] = by_shape
        result: dict[str, list[EfficiencyPoint]] = cache[key]
        return result

    def gemm_efficiency(
        self, precision: str, m: float, n: int, k: int, gpu: GpuSpec, *, experts: bool = False, grouped: bool = False
    ) -> float | None:
        """Measured efficiency for `precision` at M=m (rows per expert when `grouped`), at the measured
        shape nearest to n x k (expert shapes for expert GEMMs); None when the profile lacks the path."""
        path = PATHS.get(precision, (None, None))[0]
        if path is None:
            return None
        shapes = self._points("moe" if grouped else "gemm", path, gpu)
        if not grouped:
            shapes = {name: pts for name, pts in shapes.items() if name.startswith("expert") == experts} or shapes
        if not shapes:
            return None
        target = math.log(max(n * k, 1))
        nearest = min(shapes.values(), key=lambda pts: abs(math.log(pts[0].n * pts[0].k) - target))
        return interpolate([(p.m, p.efficiency) for p in nearest], m)

    # -- memory, launch, collectives -------------------------------------------------------------
    def memory_read_efficiency(self, gpu: GpuSpec) -> float | None:
        read = self.raw["memory"].get("read_gb_per_s")
        return min(1.0, float(read) / gpu.hbm_bandwidth_gb_per_s) if read else None

    def kernel_overhead_s(self) -> float | None:
        value = self.raw["launch"].get("graph_kernel_us")
        return float(value) * 1e-6 if value else None

    def measures_gemms(self) -> bool:
        """Whether it timed GEMMs (a collectives-only run does not: the GPU's factors stand)."""
        return bool(self.raw.get("gemm") or self.raw.get("moe"))

    def collective_s(self, op: str, message_bytes: float, ranks: int) -> CollectiveTime | None:
        """One `op` of `message_bytes` over `ranks` GPUs, from the points measured at that rank count
        (None when there are none: another rank count's figure is not this one's). Points timed inside
        CUDA graphs are preferred up to the largest size graphed (engines decode under graphs). Between
        two measured sizes the median time is linear in bytes; below the smallest it is the smallest's
        (latency bound); above the largest it grows at the largest's bandwidth."""
        points = [p for p in self.raw["collectives"] if p["op"] == op and int(p["ranks"]) == ranks]
        graphed = [p for p in points if p.get("timing") == "cuda_graph"]
        if graphed and message_bytes <= max(int(p["bytes"]) for p in graphed):
            points = graphed
        else:
            points = [p for p in points if p.get("timing") != "cuda_graph"] or points
        if not points:
            return None
        curve = sorted((float(p["bytes"]), float(p["time_us"]) * 1e-6) for p in points)
        return CollectiveTime(
            seconds=_along(curve, message_bytes),
            timing=str(points[0].get("timing") or "eager"),
            backend=str(points[0].get("backend") or ""),
        )


def _along(curve: list[tuple[float, float]], size: float) -> float:
    """Time at `size` on a sorted (bytes, seconds) curve: see CalibrationProfile.collective_s."""
    if size <= curve[0][0]:
        return curve[0][1]
    if size >= curve[-1][0]:
        return curve[-1][1] * size / curve[-1][0]
    for (low, low_s), (high, high_s) in itertools.pairwise(curve):
        if size <= high:
            return low_s + (high_s - low_s) * (size - low) / (high - low)
    return curve[-1][1]


def _efficiency(point: dict[str, Any], gpu: GpuSpec, *, grouped: bool) -> float:
    m = int(point.get("rows") or point.get("m_run") or point["m"]) if not grouped else int(point["m"])
    n, k = int(point["n"]), int(point["k"])
    weight_bytes = n * k * float(point["weight_bits"]) / 8
    if grouped:
        weight_bytes *= int(point["experts_touched"])
        tokens = m * int(point["top_k"])
    else:
        tokens = m
    moved = weight_bytes + tokens * k * int(point["activation_bytes"]) + tokens * n * 2
    flops = 2.0 * tokens * n * k
    peak = gpu.peak_tflops(COMPUTE[point["precision"]]) * 1e12
    roofline = max(flops / peak, moved / (gpu.hbm_bandwidth_gb_per_s * 1e9))
    return min(1.0, roofline / (float(point["time_us"]) * 1e-6))


def interpolate(points: list[tuple[float, float]], m: float) -> float:
    """Linear in log2(M) between measured points, clamped to the end points."""
    if not points:
        raise ValueError("interpolate: no points")
    x = math.log2(max(m, 1.0))
    xs = [math.log2(max(p, 1.0)) for p, _ in points]
    if x <= xs[0]:
        return points[0][1]
    if x >= xs[-1]:
        return points[-1][1]
    for i in range(1, len(points)):
        if x <= xs[i]:
            span = xs[i] - xs[i - 1] or 1.0
            weight = (x - xs[i - 1]) / span
            return points[i - 1][1] * (1 - weight) + points[i][1] * weight
    return points[-1][1]


def validate(data: Any) -> None:
    """ValueError naming the first missing or malformed field."""
    if not isinstance(data, dict):
        raise ValueError("calibration: profile must be a JSON object")
    for key in _REQUIRED:
        if key not in data:
            raise ValueError(f"calibration: profile lacks {key!r}")
    if data["schema"] != SCHEMA:
        raise ValueError(f"calibration: schema must be {SCHEMA!r}, got {data['schema']!r}")
    if not isinstance(data["gpu"], dict) or not data["gpu"].get("name"):
        raise ValueError("calibration: gpu.name is required")
    for section, fields in (
        ("gemm", ("precision", "shape", "m", "n", "k", "weight_bits", "activation_bytes", "time_us")),
        (
            "moe",
            (
                "precision",
                "shape",
                "m",
                "n",
                "k",
                "top_k",
                "experts",
                "experts_touched",
                "weight_bits",
                "activation_bytes",
                "time_us",
            ),
        ),
        ("collectives", ("op", "ranks", "bytes", "time_us", "bus_gb_per_s")),
    ):
        entries = data.get(section, [])
        if not isinstance(entries, list):
            raise ValueError(f"calibration: {section} must be a list")
        for index, entry in enumerate(entries):
            missing = [f for f in fields if f not in entry]
            if missing:
                raise ValueError(f"calibration: {section}[{index}] lacks {', '.join(missing)}")
            if float(entry["time_us"]) <= 0:
                raise ValueError(f"calibration: {section}[{index}].time_us must be positive")
            if section != "collectives" and entry["precision"] not in COMPUTE:
                raise ValueError(f"calibration: {section}[{index}].precision {entry['precision']!r} is unknown")
            if section == "collectives":
                _validate_collective(index, entry)
    for key in ("read_gb_per_s", "copy_gb_per_s"):
        if key in data["memory"] and float(data["memory"][key]) <= 0:
            raise ValueError(f"calibration: memory.{key} must be positive")


def _validate_collective(index: int, entry: dict[str, Any]) -> None:
    where = f"calibration: collectives[{index}]"
    if entry["op"] not in COLLECTIVE_OPS:
        raise ValueError(f"{where}.op {entry['op']!r} is unknown; one of {', '.join(COLLECTIVE_OPS)}")
    if not isinstance(entry["ranks"], int) or entry["ranks"] < 2:
        raise ValueError(f"{where}.ranks must be an integer of at least 2")
    if not isinstance(entry["bytes"], int) or entry["bytes"] <= 0:
        raise ValueError(f"{where}.bytes must be a positive integer")
    if "p90_us" in entry and float(entry["p90_us"]) < float(entry["time_us"]):
        raise ValueError(f"{where}.p90_us must not be below its median time_us")


def load(path: str | Path) -> CalibrationProfile:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ValueError(f"calibration: cannot read {path}: {exc}") from None
    return CalibrationProfile.from_dict(data, name=Path(path).name)
