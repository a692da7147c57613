"""All-reduce and all-to-all between one node's GPUs, measured through torch.distributed.

One process per rank, spawned here (NCCL on GPUs, gloo on a CPU test run, the same code), at each
rank count the spec asks for (2, 4 and 8 by default) that the node holds. Each message size of the ladder is a BF16 tensor; each
collective is warmed up, then timed `reps` times, each sample `ops` back-to-back calls after a
barrier (CUDA events on a GPU, the wall clock on a CPU), and a sample's time is the slowest rank's.
The profile keeps the median and the p90 (nearest rank) per op, rank count and size. On GPUs the
small messages (up to GRAPH_MAX_BYTES) are timed again inside CUDA graphs, as engines decode;
a CPU run says it measured none.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# NVLink multicast (NVLS) can take a shared host's GPUs out of service; never let NCCL, PyTorch's
# symmetric memory or NVSHMEM use it. Set before torch loads, and again in each spawned rank.
os.environ.update({"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"})

import torch
import torch.distributed as dist

from planner.calibrate.ladder import Settings, ops_per_sample, point
from planner.calibrate.profile import COLLECTIVE_OPS

NO_MULTICAST = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}
GRAPH_MAX_BYTES = 8 << 20  # "small": a decode step's all-reduce of up to 512 tokens of a 7168-wide model
OPS_PER_GRAPH = 10  # calls captured in one graph; its replay is one sample
GRAPH_NOTE_CPU = "CUDA-graph-captured collectives not measured: a CPU (gloo) run has no CUDA graphs."


def _timed(run: Callable[[], Any], ops: int, reps: int, cuda: bool, device: torch.device) -> list[float]:
    """Seconds per call of `reps` samples of `run` (which makes `ops` calls), the slowest rank's each."""
    pairs, walls = [], []
    for _ in range(reps):
        dist.barrier()
        if cuda:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            run()
            end.record()
            pairs.append((start, end))
        else:
            began = time.perf_counter()
            run()
            walls.append(time.perf_counter() - began)
    if cuda:
        torch.cuda.synchronize()
        walls = [start.elapsed_time(end) / 1e3 for start, end in pairs]
    slowest = torch.tensor(walls, dtype=torch.float64, device=device)
    dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
    return [float(s) / ops for s in slowest.tolist()]


def _agreed(ok: bool, device: torch.device) -> bool:
    """Whether every rank got `ok` (a capture that failed on one rank must not be replayed on others)."""
    flag = torch.tensor([1 if ok else 0], dtype=torch.int32, device=device)
    dist.all_reduce(flag, op=dist.ReduceOp.MIN)
    return bool(flag.item())


def _worker(rank: int, world: int, sizes: list[int], settings: Settings, init_file: str, out: str) -> None:
    os.environ.update(NO_MULTICAST)
    cuda = settings.backend == "nccl"
    timeout = dt.timedelta(minutes=10)
    if cuda:
        torch.cuda.set_device(rank)
        device = torch.device("cuda", rank)
        dist.init_process_group(
            "nccl", init_method=f"file://{init_file}", rank=rank, world_size=world, timeout=timeout, device_id=device
        )
    else:
        torch.set_num_threads(1)
        device = torch.device("cpu")
        dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world, timeout=timeout)
    points: list[dict[str, Any]] = []
    failures: list[dict[str, str]] = []
    graphs_ok = dict.fromkeys(COLLECTIVE_OPS, cuda)
    for op in COLLECTIVE_OPS:
        for size in sizes:
            elements = max(world, size // 2 // world * world)  # all-to-all splits it evenly
            source = torch.randn(elements, device=device).to(torch.bfloat16)
            target = torch.empty_like(source)

            def call(op: str = op, source: torch.Tensor = source, target: torch.Tensor = target) -> None:
                if op == "all_reduce":
                    dist.all_reduce(source)
                else:
                    dist.all_to_all_single(target, source)

            ops = ops_per_sample(elements * 2)

            def eager(ops: int = ops, call: Callable[[], None] = call) -> None:
                for _ in range(ops):
                    call()

            for _ in range(settings.warmup):
                call()
            samples = _timed(eager, ops, settings.reps, cuda, device)
            points.append(point(op, world, elements * 2, samples, timing="eager", backend=settings.backend, ops=ops))
            if not graphs_ok[op] or elements * 2 > GRAPH_MAX_BYTES:
                continue
            graph: Any = None
            error = ""
            try:  # engines replay their decode step, collectives included, as CUDA graphs
                torch.cuda.synchronize()
                graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(graph):
                    for _ in range(OPS_PER_GRAPH):
                        call()
            except RuntimeError as exc:
                error = str(exc)[:300]
            if not _agreed(not error, device):
                graphs_ok[op] = False
                failures.append({"what": f"{op} in a CUDA graph at {world} ranks", "error": error or "another rank"})
                continue
            graph.replay()
            samples = _timed(graph.replay, OPS_PER_GRAPH, settings.reps, cuda, device)
            points.append(
                point(
                    op, world, elements * 2, samples, timing="cuda_graph", backend=settings.backend, ops=OPS_PER_GRAPH
                )
            )
    if rank == 0:
        temporary = Path(out + ".tmp")
        temporary.write_text(json.dumps({"points": points, "failures": failures}))
        os.replace(temporary, out)
    if cuda:
        torch.cuda.synchronize()
        # Tearing down a communicator that CUDA graphs captured can hang; the process is done with it.
        os._exit(0)
    dist.destroy_process_group()


def rank_counts(device: str, wanted: list[int]) -> list[int]:
    """The rank counts of `wanted` this node runs: on GPUs those its visible GPUs hold; on a CPU, all."""
    if device != "cuda":
        return list(wanted)
    return [r for r in wanted if r <= torch.cuda.device_count()]


@dataclass(frozen=True, slots=True)
class Measured:
    points: list[dict[str, Any]]
    failures: list[dict[str, str]]
    notes: list[str]


def measure(sizes: list[int], ranks: Sequence[int], settings: Settings) -> Measured:
    """Spawn each rank count's processes in turn; a rank count that fails is recorded and the rest go on."""
    import torch.multiprocessing as mp

    points: list[dict[str, Any]] = []
    failures: list[dict[str, str]] = []
    for world in ranks:
        print(f"calibrate: collectives at {world} ranks ({settings.backend})", flush=True)
        # The ranks meet through a file store on local disk (no port to collide with another job's; a
        # job's own directory may be on a shared file system).
        with tempfile.TemporaryDirectory(prefix="collectives-") as scratch:
            init_file, target = Path(scratch) / "init", Path(scratch) / "result.json"
            try:
                mp.spawn(_worker, args=(world, sizes, settings, str(init_file), str(target)), nprocs=world)
                found = json.loads(target.read_text())
            except Exception as exc:  # a rank count that fails leaves the others measured
                failures.append({"what": f"collectives at {world} ranks", "error": str(exc)[:300]})
                continue
        points.extend(found["points"])
        failures.extend(found["failures"])
    timer = "CUDA events" if settings.backend == "nccl" else "the wall clock"
    notes = [
        f"Collectives: {settings.backend}, BF16, one process per rank; {settings.warmup} warm-up calls, then "
        f"{settings.reps} samples timed with {timer}, each the slowest rank's; time_us is the median per call, "
        "p90_us the 90th percentile; bus bandwidth per nccl-tests (all-reduce x 2(n-1)/n, all-to-all x (n-1)/n)."
    ]
    if settings.backend != "nccl":
        notes.append(GRAPH_NOTE_CPU)
    return Measured(points, failures, notes)


__all__ = ["GRAPH_MAX_BYTES", "Measured", "measure", "rank_counts"]
