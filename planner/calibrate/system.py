"""HBM bandwidth, kernel launch latency, and the machine and versions of what measured them (collectives:
planner.calibrate.collectives)."""

from __future__ import annotations

import os
import platform
import statistics
import subprocess
import time
from collections.abc import Callable
from typing import Any

# NVLink multicast (NVLS) can take a shared host's GPUs out of service; never let NCCL use it.
os.environ["NCCL_NVLS_ENABLE"] = "0"
os.environ.setdefault("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1")

import torch

from planner.calibrate import timing


def measure_memory(size_bytes: int = 4 << 30) -> dict[str, Any]:
    if timing.DEVICE == "cpu":
        size_bytes = 64 << 20
    a = torch.randn(size_bytes // 4, device=timing.DEVICE)
    b = torch.empty_like(a)

    def timed(work: Callable[[], Any]) -> float:
        work()
        if timing.DEVICE == "cpu":
            samples = []
            for _ in range(5):
                began = time.perf_counter()
                work()
                samples.append(time.perf_counter() - began)
            return statistics.median(samples)
        events = []
        for _ in range(10):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            work()
            end.record()
            events.append((start, end))
        return timing.median_s(events)

    copy_s = timed(lambda: b.copy_(a))
    read_s = timed(lambda: torch.sum(a))
    return {
        "bytes": size_bytes,
        "copy_gb_per_s": round(2 * size_bytes / copy_s / 1e9, 1),
        "read_gb_per_s": round(size_bytes / read_s / 1e9, 1),
        "method": "copy: bytes read + written over the median of 10 copies; read: torch.sum",
    }


def measure_launch() -> dict[str, Any]:
    if timing.DEVICE == "cpu":
        return {"method": "not measured on a CPU"}
    x = torch.zeros(16, device="cuda")
    count = 2000
    for _ in range(50):
        x.add_(1)
    torch.cuda.synchronize()
    began = time.perf_counter()
    for _ in range(count):
        x.add_(1)
    torch.cuda.synchronize()
    eager = (time.perf_counter() - began) / count
    per_kernel, mode = timing.time_launches([lambda: x.add_(1)] * count, reps=5)
    return {
        "eager_us": round(eager * 1e6, 3),
        "graph_kernel_us": round(per_kernel * 1e6, 3),
        "graph_timing": mode,
        "method": "a 16-element add: eager wall time per launch; per kernel inside one CUDA graph of 2000",
    }


def machine() -> dict[str, Any]:
    """The host that measured: its name, OS and processor (a profile is per cluster and GPU; this says
    which of the cluster's nodes)."""
    return {"hostname": platform.node(), "platform": platform.platform(), "processor": platform.machine()}


def versions() -> dict[str, Any]:
    info: dict[str, Any] = {"python": platform.python_version(), "torch": torch.__version__, "cuda": torch.version.cuda}
    try:
        info["nccl"] = ".".join(str(v) for v in torch.cuda.nccl.version())
    except Exception:
        info["nccl"] = None
    try:
        import triton

        info["triton"] = triton.__version__
    except ImportError:
        info["triton"] = None
    try:
        smi = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],  # noqa: S607
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        )
        info["driver"] = smi.stdout.strip().splitlines()[0]
    except (OSError, subprocess.SubprocessError, IndexError):
        info["driver"] = None
    return info
