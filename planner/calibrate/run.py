"""python -m planner.calibrate run --spec spec.json --out DIR

Runs on a GPU node. The spec names the model whose shapes to time (catalog key or an inline
config.json) and the catalog key of the GPU; every figure is written with the shape it was
measured at. Writes DIR/profile.json atomically with DIR/profile.json.sha256. A path that fails
(an op torch lacks on this GPU, say) is recorded under `failures` and the run goes on.
"""

from __future__ import annotations

import argparse
import datetime as dt
import functools
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

# NVLink multicast (NVLS) can take a shared host's GPUs out of service; never let NCCL use it.
os.environ["NCCL_NVLS_ENABLE"] = "0"
os.environ.setdefault("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1")

import torch

from planner.calibrate.shapes import DECODE_M, PREFILL_M, GemmShape, layer_shapes
from planner.cluster.base import write_result
from planner.hf_config import parse_config
from planner.specs import model as catalog_model

SCHEMA = "planner.calibration/1"
WEIGHT_BITS = {"bf16": 16.0, "fp8": 8.0, "int8": 8.0, "w4a16": 4.25, "w4a8": 4.25}
ACTIVATION_BYTES = {"bf16": 2, "fp8": 1, "int8": 1, "w4a16": 2, "w4a8": 1}
ROTATE_BYTES = 512 << 20  # weights cycled per timed graph: several times the L2, so HBM is what is timed
# "cuda" on a GPU node; "cpu" only when the spec asks for it (tests run the same code on a CPU).
DEVICE = "cuda"


def _sync() -> None:
    if DEVICE == "cuda":
        torch.cuda.synchronize()


def _median_s(events: list[tuple[Any, Any]]) -> float:
    _sync()
    return statistics.median(start.elapsed_time(end) for start, end in events) / 1e3


def time_launches(launches: Sequence[Callable[[], Any]], reps: int = 10) -> tuple[float, str]:
    """Seconds per launch, replaying all launches captured in one CUDA graph (engines decode under
    CUDA graphs); eager with events where capture fails."""
    for launch in launches:
        launch()
    _sync()
    if DEVICE == "cpu":
        samples = []
        for _ in range(reps):
            began = time.perf_counter()
            for launch in launches:
                launch()
            samples.append(time.perf_counter() - began)
        return statistics.median(samples) / len(launches), "cpu"
    mode = "cuda_graph"
    try:
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for launch in launches:
                launch()
        replay: Callable[[], Any] = graph.replay
    except RuntimeError:
        mode = "eager"

        def replay() -> None:
            for launch in launches:
                launch()

    replay()
    events = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        replay()
        end.record()
        events.append((start, end))
    return _median_s(events) / len(launches), mode


def _copies(weight_bytes: int, m: int) -> int:
    if m >= PREFILL_M[0] or DEVICE == "cpu":
        return 2
    return max(2, min(32, math.ceil(ROTATE_BYTES / max(weight_bytes, 1))))


Launches = Sequence[Callable[[], Any]]


def _gemm_launches(precision: str, m: int, n: int, k: int, copies: int) -> tuple[Launches, int, str]:
    """(launches over `copies` weight sets, M actually run, kernel path) for one precision."""
    device = DEVICE
    x = torch.randn(m, k, device=device, dtype=torch.bfloat16)
    if precision == "bf16":
        weights = [torch.randn(n, k, device=device, dtype=torch.bfloat16) for _ in range(copies)]
        return [functools.partial(torch.mm, x, w.t()) for w in weights], m, "torch.mm (cuBLAS)"
    if precision == "fp8":
        xq = x.to(torch.float8_e4m3fn)
        scale_a = torch.rand(m, 1, device=device) + 0.5
        scale_b = torch.rand(1, n, device=device) + 0.5
        weights = [torch.randn(n, k, device=device).to(torch.float8_e4m3fn) for _ in range(copies)]
        scaled = [
            functools.partial(torch._scaled_mm, xq, w.t(), scale_a=scale_a, scale_b=scale_b, out_dtype=torch.bfloat16)
            for w in weights
        ]
        return scaled, m, "torch._scaled_mm rowwise"
    if precision == "int8":
        m_run = max(32, -(-m // 8) * 8)  # torch._int_mm needs M > 16 on CUDA
        xq = torch.randint(-127, 127, (m_run, k), device=device, dtype=torch.int8)
        weights = [torch.randint(-127, 127, (n, k), device=device, dtype=torch.int8) for _ in range(copies)]
        return [functools.partial(torch._int_mm, xq, w.t()) for w in weights], m_run, "torch._int_mm"
    if precision == "w4a16":
        packed = [
            torch._convert_weight_to_int4pack(torch.randint(0, 255, (n, k // 2), device=device, dtype=torch.uint8), 8)
            for _ in range(copies)
        ]
        scales = torch.rand(k // 128, n, 2, device=device, dtype=torch.bfloat16)
        int4 = [functools.partial(torch._weight_int4pack_mm, x, w, 128, scales) for w in packed]
        return int4, m, "torch._weight_int4pack_mm (tinygemm)"
    if precision == "w4a8":
        from planner.calibrate import kernels

        block_m = kernels.block_m_for(m)
        m_run = -(-m // block_m) * block_m
        xq = torch.randint(-127, 127, (m_run, k), device=device, dtype=torch.int8)
        x_scale = torch.rand(m_run, device=device)
        block_expert = torch.zeros(m_run // block_m, dtype=torch.int32, device=device)
        sets = [kernels.random_w4a8(1, k, n, device) for _ in range(copies)]
        w4a8 = [
            functools.partial(kernels.grouped_gemm, xq, w, block_expert, block_m=block_m, x_scale=x_scale, w_scale=s)
            for w, s in sets
        ]
        return w4a8, m_run, "triton W4A8 (planner.calibrate.kernels)"
    raise ValueError(f"precisions: unknown {precision!r}")


def measure_gemms(
    shapes: list[GemmShape], precisions: list[str], ms: list[int], failures: list[dict[str, str]]
) -> list[dict[str, Any]]:
    points = []
    for shape in shapes:
        for precision in precisions:
            for m in ms:
                weight_bytes = int(shape.n * shape.k * WEIGHT_BITS[precision] / 8)
                try:
                    launches, m_run, path = _gemm_launches(precision, m, shape.n, shape.k, _copies(weight_bytes, m))
                    seconds, mode = time_launches(launches)
                except Exception as exc:
                    failures.append({"what": f"gemm {precision} {shape.name} m={m}", "error": str(exc)[:300]})
                    _sync()
                    continue
                finally:
                    launches = []
                points.append(
                    {
                        "precision": precision,
                        "path": path,
                        "shape": shape.name,
                        "m": m,
                        "m_run": m_run,
                        "n": shape.n,
                        "k": shape.k,
                        "weight_bits": WEIGHT_BITS[precision],
                        "activation_bytes": ACTIVATION_BYTES[precision],
                        "timing": mode,
                        "time_us": round(seconds * 1e6, 3),
                    }
                )
        if DEVICE == "cuda":
            torch.cuda.empty_cache()
    return points


def _route(tokens: int, experts: int, top_k: int, block_m: int) -> tuple[Any, int, int]:
    """Uniform random routing of `tokens` tokens to top_k distinct experts each -> (block_expert, rows, touched)."""
    generator = torch.Generator().manual_seed(tokens)
    choice = torch.stack([torch.randperm(experts, generator=generator)[:top_k] for _ in range(tokens)]).flatten()
    counts = torch.bincount(choice, minlength=experts)
    blocks = (counts + block_m - 1) // block_m
    block_expert = torch.repeat_interleave(torch.arange(experts, dtype=torch.int32), blocks)
    return block_expert.cuda(), int(blocks.sum()) * block_m, int((counts > 0).sum())


def measure_moe(
    spec: Any, precisions: list[str], ms: list[int], failures: list[dict[str, str]]
) -> list[dict[str, Any]]:
    """Grouped expert GEMMs (all experts of one layer resident) for a batch of m tokens."""
    points: list[dict[str, Any]] = []
    if not spec.is_moe:
        return points
    try:
        from planner.calibrate import kernels
    except ImportError as exc:  # no triton (a CPU test run): the planner falls back for grouped GEMMs
        failures.append({"what": "moe grouped GEMMs", "error": str(exc)[:300]})
        return points
    experts, top_k, h, ff = spec.n_routed_experts, spec.experts_per_token, spec.hidden_size, spec.moe_intermediate_size
    for name, n, k in (("moe_gate_up", 2 * ff, h), ("moe_down", h, ff)):
        for precision in precisions:
            try:
                if precision == "bf16":
                    sets = [(torch.randn(experts, k, n, device="cuda", dtype=torch.bfloat16), None) for _ in range(2)]
                else:
                    sets = [kernels.random_w4a8(experts, k, n, "cuda") for _ in range(2)]
            except Exception as exc:
                failures.append({"what": f"moe {precision} {name} weights", "error": str(exc)[:300]})
                continue
            for m in ms:
                try:
                    block_m = kernels.block_m_for(m * top_k / experts)
                    block_expert, rows, touched = _route(m, experts, top_k, block_m)
                    if precision == "bf16":
                        x = torch.randn(rows, k, device="cuda", dtype=torch.bfloat16)
                        launches = [
                            functools.partial(kernels.grouped_gemm, x, w, block_expert, block_m=block_m)
                            for w, _ in sets
                        ]
                    else:
                        xq = torch.randint(-127, 127, (rows, k), device="cuda", dtype=torch.int8)
                        xs = torch.rand(rows, device="cuda")
                        launches = [
                            functools.partial(
                                kernels.grouped_gemm, xq, w, block_expert, block_m=block_m, x_scale=xs, w_scale=s
                            )
                            for w, s in sets
                        ]
                    seconds, mode = time_launches(launches)
                except Exception as exc:
                    failures.append({"what": f"moe {precision} {name} m={m}", "error": str(exc)[:300]})
                    continue
                points.append(
                    {
                        "precision": precision,
                        "path": "triton grouped (vLLM fused-MoE layout)",
                        "shape": name,
                        "m": m,
                        "rows": rows,
                        "experts": experts,
                        "top_k": top_k,
                        "experts_touched": touched,
                        "block_m": block_m,
                        "n": n,
                        "k": k,
                        "weight_bits": WEIGHT_BITS[precision],
                        "activation_bytes": ACTIVATION_BYTES[precision],
                        "timing": mode,
                        "time_us": round(seconds * 1e6, 3),
                    }
                )
            del sets
            torch.cuda.empty_cache()
    return points


def measure_memory(size_bytes: int = 4 << 30) -> dict[str, Any]:
    if DEVICE == "cpu":
        size_bytes = 64 << 20
    a = torch.randn(size_bytes // 4, device=DEVICE)
    b = torch.empty_like(a)

    def timed(work: Callable[[], Any]) -> float:
        work()
        if DEVICE == "cpu":
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
        return _median_s(events)

    copy_s = timed(lambda: b.copy_(a))
    read_s = timed(lambda: torch.sum(a))
    return {
        "bytes": size_bytes,
        "copy_gb_per_s": round(2 * size_bytes / copy_s / 1e9, 1),
        "read_gb_per_s": round(size_bytes / read_s / 1e9, 1),
        "method": "copy: bytes read + written over the median of 10 copies; read: torch.sum",
    }


def measure_launch() -> dict[str, Any]:
    if DEVICE == "cpu":
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
    per_kernel, mode = time_launches([lambda: x.add_(1)] * count, reps=5)
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
            timing = "cuda_graph"
            try:  # engines replay collectives inside CUDA graphs: time them the same way
                graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(graph):
                    for _ in range(10):
                        run()
                replay: Any = graph.replay
                per_replay = 10
            except RuntimeError:
                timing, replay, per_replay = "eager", run, 1
            replay()
            torch.cuda.synchronize()
            events = []
            for _ in range(10):
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                replay()
                end.record()
                events.append((start, end))
            seconds = _median_s(events) / per_replay
            nbytes = elements * 2
            factor = 2 * (world - 1) / world if op == "all_reduce" else (world - 1) / world
            results.append(
                {
                    "op": op,
                    "ranks": world,
                    "bytes": nbytes,
                    "time_us": round(seconds * 1e6, 3),
                    "timing": timing,
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

    world = torch.cuda.device_count() if DEVICE == "cuda" else 0
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


def _resolve_model(value: Any) -> Any:
    return parse_config(value) if isinstance(value, dict) else catalog_model(str(value))


def run(spec: dict[str, Any], out: Path) -> dict[str, Any]:
    global DEVICE
    DEVICE = str(spec.get("device") or "cuda")
    if DEVICE not in ("cuda", "cpu"):
        raise ValueError("device: must be cuda or cpu")
    if DEVICE == "cuda" and not torch.cuda.is_available():
        raise ValueError("device: calibration needs a CUDA GPU (no GPU is visible to torch)")
    began = time.perf_counter()
    out.mkdir(parents=True, exist_ok=True)
    model = _resolve_model(spec["model"])
    precisions = list(spec.get("precisions") or WEIGHT_BITS)
    decode_m = list(spec.get("decode_m") or DECODE_M)
    prefill_m = list(spec.get("prefill_m") or PREFILL_M)
    failures: list[dict[str, str]] = []
    checks: dict[str, Any] = {}
    if DEVICE == "cuda":
        props = torch.cuda.get_device_properties(0)
        gpu = {
            "name": props.name,
            "count": torch.cuda.device_count(),
            "memory_mib": props.total_memory >> 20,
            "sm_count": props.multi_processor_count,
        }
        try:
            from planner.calibrate import kernels

            checks["triton_relative_error"] = kernels.check()
        except Exception as exc:
            failures.append({"what": "triton kernels", "error": str(exc)[:300]})
    else:
        gpu = {"name": f"cpu ({platform.machine()}, a test run)", "count": 0}
    print("calibrate: gemms", flush=True)
    shapes = layer_shapes(model)
    gemm = measure_gemms(shapes, precisions, decode_m + prefill_m, failures)
    print("calibrate: moe", flush=True)
    moe = measure_moe(model, [p for p in precisions if p in ("bf16", "w4a8")], decode_m + prefill_m[:3], failures)
    print("calibrate: memory, launch", flush=True)
    memory = measure_memory()
    launch = measure_launch()
    print("calibrate: collectives", flush=True)
    hidden = model.hidden_size
    sizes = sorted({2**p for p in range(12, 29, 2)} | {m * hidden * 2 for m in decode_m})
    try:
        collectives = measure_collectives(sizes, out)
    except Exception as exc:
        failures.append({"what": "collectives", "error": str(exc)[:300]})
        collectives = []
    profile = {
        "schema": SCHEMA,
        "created_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "gpu": {**gpu, "catalog_key": spec.get("gpu")},
        "versions": versions(),
        "model": {
            "key": model.key,
            "shapes": [{"name": s.name, "n": s.n, "k": s.k, "experts": s.experts} for s in shapes],
        },
        "gemm": gemm,
        "moe": moe,
        "memory": memory,
        "launch": launch,
        "collectives": collectives,
        "checks": checks,
        "failures": failures,
        "elapsed_s": round(time.perf_counter() - began, 1),
        "notes": [
            "GEMM times exclude activation quantization (engines fuse it into the previous kernel).",
            "Each GEMM point is the time per launch inside one CUDA graph cycling several weight copies.",
        ],
    }
    data = json.dumps(profile, indent=1, sort_keys=True).encode()
    # profile.json for people; result.json (+ its checksum, written after it) for the job machinery.
    for name in ("profile.json", "result.json"):
        write_result(out, data, name)
    return profile


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m planner.calibrate")
    commands = parser.add_subparsers(dest="command", required=True)
    run_parser = commands.add_parser("run")
    run_parser.add_argument("--spec", required=True)
    run_parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    try:
        spec = json.loads(Path(args.spec).read_text())
        profile = run(spec, Path(args.out))
    except (OSError, ValueError, KeyError) as exc:
        print(f"calibrate: error: {exc}", file=sys.stderr)
        return 2
    print(
        f"done: {len(profile['gemm'])} gemm points, {len(profile['moe'])} moe points, "
        f"{len(profile['collectives'])} collective points, {len(profile['failures'])} failures",
        flush=True,
    )
    return 0
