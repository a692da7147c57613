"""The collectives step's pure parts (no torch): the message ladder, the statistics of the samples and
the profile entry they make, with bus bandwidth per the nccl-tests convention."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from typing import Any

from planner.calibrate.profile import bus_factor

# The message ladder, bytes: powers of two from 4 KiB to 256 MiB on GPUs (nccl-tests' usual span),
# 4 KiB to 64 KiB on a CPU test run; the model's decode messages (tokens x hidden x 2 bytes) inside the
# span are added to it.
GPU_LADDER = (4 << 10, 256 << 20)
CPU_LADDER = (4 << 10, 64 << 10)


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
