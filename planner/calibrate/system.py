"""HBM bandwidth, kernel launch latency, NCCL collectives and the versions of what measured them."""

from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
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


def _collective_worker(rank: int, world: int, sizes: list[int], port: int, out: str) -> None:
    import torch.distributed as dist

    os.environ.update({"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "NCCL_NVLS_ENABLE": "0"})
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", rank=rank, world_size=world, device_id=torch.device("cuda", rank))
    results = []
    for op in ("all_reduce", "all_to_all"):
        for size in sizes:
            elements = max(world, size // 2 // world * world)
            buffer = torch.randn(elements, device="cuda", dtype=torch.bfloat16)
            target = torch.empty_like(buffer)

            def run(op: str = op, buffer: Any = buffer, target: Any = target) -> None:
                if op == "all_reduce":
                    dist.all_reduce(buffer)
                else:
                    dist.all_to_all_single(target, buffer)

            for _ in range(5):
                run()
            torch.cuda.synchronize()
            mode = "cuda_graph"
            try:  # engines replay collectives inside CUDA graphs: time them the same way
                graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(graph):
                    for _ in range(10):
                        run()
                replay: Any = graph.replay
                per_replay = 10
            except RuntimeError:
                mode, replay, per_replay = "eager", run, 1
            replay()
            torch.cuda.synchronize()
            events = []
            for _ in range(10):
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                replay()
                end.record()
                events.append((start, end))
            seconds = timing.median_s(events) / per_replay
            nbytes = elements * 2
            factor = 2 * (world - 1) / world if op == "all_reduce" else (world - 1) / world
            results.append(
                {
                    "op": op,
                    "ranks": world,
                    "bytes": nbytes,
                    "time_us": round(seconds * 1e6, 3),
                    "timing": mode,
                    "bus_gb_per_s": round(nbytes * factor / seconds / 1e9, 2),
                }
            )
    torch.cuda.synchronize()
    if rank == 0:
        temporary = Path(out + ".tmp")
        temporary.write_text(json.dumps(results))
        os.replace(temporary, out)
    # Tearing down a communicator that CUDA graphs captured can hang; the process is done with it.
    os._exit(0)


def measure_collectives(sizes: list[int], out_dir: Path) -> list[dict[str, Any]]:
    import torch.multiprocessing as mp

    world = torch.cuda.device_count() if timing.DEVICE == "cuda" else 0
    if world < 2:
        return []
    target = out_dir / ".collectives.json"
    mp.spawn(_collective_worker, args=(world, sizes, 29511, str(target)), nprocs=world, join=True)
    results: list[dict[str, Any]] = json.loads(target.read_text())
    target.unlink()
    return results


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
