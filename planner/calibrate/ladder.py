"""The collectives step's pure parts (no torch): the message ladder, the statistics of the samples and
the profile entry they make, with bus bandwidth per the nccl-tests convention."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from planner.calibrate.profile import bus_factor

# The message ladder, bytes: powers of two from 4 KiB to 256 MiB on GPUs (nccl-tests' usual span),
# 4 KiB to 64 KiB on a CPU test run; the model's decode messages (tokens x hidden x 2 bytes) inside the
# span are added to it.
GPU_LADDER = (4 << 10, 256 << 20)
CPU_LADDER = (4 << 10, 64 << 10)
RANKS = (2, 4, 8)  # rank counts measured on GPUs where the node has them; 2 processes on a CPU


def _integers(value: Any) -> bool:
    return isinstance(value, list | tuple) and all(isinstance(v, int) and not isinstance(v, bool) for v in value)


def wanted_ranks(value: Any, device: str) -> list[int]:
    """The spec's `collective_ranks`, checked, or the default for the device."""
    if value is None:
        return list(RANKS) if device == "cuda" else [2]
    if not _integers(value) or any(r < 2 for r in value):
        raise ValueError("collective_ranks: must be a list of integers of at least 2")
    return sorted(set(value))


def message_span(value: Any, device: str) -> tuple[int, int]:
    """The spec's `collective_bytes` ([low, high]), checked, or the default ladder's for the device."""
    if value is None:
        return GPU_LADDER if device == "cuda" else CPU_LADDER
    if not _integers(value) or len(value) != 2 or not 0 < value[0] <= value[1]:
        raise ValueError("collective_bytes: must be [low, high] in bytes with 0 < low <= high")
    return int(value[0]), int(value[1])


def ladder(low: int, high: int, extra: Sequence[int] = ()) -> list[int]:
    """Powers of two from `low` to `high` bytes, with the `extra` sizes that fall between them."""
    if not 0 < low <= high:
        raise ValueError("collective_bytes: must be [low, high] with 0 < low <= high")
    sizes = {1 << p for p in range(max(low - 1, 0).bit_length(), high.bit_length()) if low <= 1 << p <= high}
    return sorted(sizes | {int(s) for s in extra if low <= s <= high})


def percentile(values: Sequence[float], q: float) -> float:
    """The nearest-rank q-th percentile (q in (0, 100]): the smallest value at least q% of them reach."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


def ops_per_sample(nbytes: int) -> int:
    """Eager calls per timed sample: enough for a small message to outlast the timer's resolution."""
    return max(1, min(20, (4 << 20) // max(nbytes, 1)))


def point(
    op: str, ranks: int, nbytes: int, samples_s: Sequence[float], *, timing: str, backend: str, ops: int
) -> dict[str, Any]:
    """One profile entry. Bus bandwidth per the nccl-tests convention
    (https://github.com/NVIDIA/nccl-tests/blob/master/doc/PERFORMANCE.md): algbw = bytes / time;
    all-reduce busbw = algbw x 2(n-1)/n, all-to-all busbw = algbw x (n-1)/n."""
    median = statistics.median(samples_s)
    algbw = nbytes / median / 1e9
    return {
        "op": op,
        "ranks": ranks,
        "bytes": nbytes,
        "dtype": "bf16",
        "backend": backend,
        "timing": timing,
        "time_us": round(median * 1e6, 3),
        "p90_us": round(percentile(samples_s, 90) * 1e6, 3),
        "alg_gb_per_s": round(algbw, 3),
        "bus_gb_per_s": round(algbw * bus_factor(op, ranks), 3),
        "samples": len(samples_s),
        "ops_per_sample": ops,
    }


@dataclass(frozen=True, slots=True)
class Settings:
    backend: str  # "nccl" or "gloo"
    warmup: int
    reps: int

    @classmethod
    def for_device(cls, device: str, warmup: Any = None, reps: Any = None) -> Settings:
        """The defaults (5 warm-up calls and 20 samples on GPUs, 2 and 5 on a CPU) or the spec's, checked."""
        cuda = device == "cuda"
        warmup = (5 if cuda else 2) if warmup is None else warmup
        reps = (20 if cuda else 5) if reps is None else reps
        if not isinstance(warmup, int) or isinstance(warmup, bool) or warmup < 0:
            raise ValueError("collective_warmup: must be an integer of at least 0")
        if not isinstance(reps, int) or isinstance(reps, bool) or reps < 1:
            raise ValueError("collective_reps: must be an integer of at least 1")
        return cls(backend="nccl" if cuda else "gloo", warmup=warmup, reps=reps)
