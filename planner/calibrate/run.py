"""python -m planner.calibrate run --spec spec.json --out DIR

Runs on a GPU node. The spec names the model whose shapes to time (catalog key or an inline
config.json) and the catalog key of the GPU; every figure is written with the shape it was
measured at. Writes DIR/profile.json atomically with DIR/profile.json.sha256. A path that fails
(an op torch lacks on this GPU, say) is recorded under `failures` and the run goes on.

Optional spec keys: "steps" (a subset of STEPS; default all), "precisions", "decode_m", "prefill_m"
(GEMMs), "collective_ranks" (default 2, 4 and 8 where the node has the GPUs; 2 processes on a CPU),
"collective_bytes" ([low, high] of the message ladder; default 4 KiB-256 MiB, 4-64 KiB on a CPU),
"collective_warmup" and "collective_reps" (default 5 and 20; 2 and 5 on a CPU).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import platform
import time
from pathlib import Path
from typing import Any

# NVLink multicast (NVLS) can take a shared host's GPUs out of service; never let NCCL use it.
os.environ.update({"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"})

import torch

from planner.calibrate import collectives as collective
from planner.calibrate import timing
from planner.calibrate.gemms import WEIGHT_BITS, measure_gemms, measure_moe
from planner.calibrate.ladder import Settings, ladder, message_span, wanted_ranks
from planner.calibrate.shapes import DECODE_M, PREFILL_M, layer_shapes
from planner.calibrate.system import machine, measure_launch, measure_memory, versions
from planner.calibrate.timing import time_launches
from planner.cluster.base import job_main, write_result
from planner.hf_config import parse_config
from planner.specs import model as catalog_model

__all__ = ["main", "measure_gemms", "measure_launch", "measure_memory", "measure_moe"]
__all__ += ["STEPS", "run", "time_launches", "versions"]

SCHEMA = "planner.calibration/1"
STEPS = ("gemm", "moe", "memory", "launch", "collectives")
GEMM_NOTES = (
    "GEMM times exclude activation quantization (engines fuse it into the previous kernel).",
    "Each GEMM point is the time per launch inside one CUDA graph cycling several weight copies.",
)


def _resolve_model(value: Any) -> Any:
    return parse_config(value) if isinstance(value, dict) else catalog_model(str(value))


def run(spec: dict[str, Any], out: Path) -> dict[str, Any]:
    timing.DEVICE = str(spec.get("device") or "cuda")
    if timing.DEVICE not in ("cuda", "cpu"):
        raise ValueError("device: must be cuda or cpu")
    if timing.DEVICE == "cuda" and not torch.cuda.is_available():
        raise ValueError("device: calibration needs a CUDA GPU (no GPU is visible to torch)")
    steps = list(spec.get("steps") or STEPS)
    unknown = sorted(set(steps) - set(STEPS))
    if unknown:
        raise ValueError(f"steps: unknown {', '.join(unknown)}; one of {', '.join(STEPS)}")
    began = time.perf_counter()
    out.mkdir(parents=True, exist_ok=True)
    model = _resolve_model(spec["model"])
    precisions = list(spec.get("precisions") or WEIGHT_BITS)
    decode_m = list(spec.get("decode_m") or DECODE_M)
    prefill_m = list(spec.get("prefill_m") or PREFILL_M)
    failures: list[dict[str, str]] = []
    checks: dict[str, Any] = {}
    if timing.DEVICE == "cuda":
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
    wanted = wanted_ranks(spec.get("collective_ranks"), timing.DEVICE)
    ranks = collective.rank_counts(timing.DEVICE, wanted)
    low, high = message_span(spec.get("collective_bytes"), timing.DEVICE)
    # The model's decode messages (tokens x hidden x BF16) join the ladder: the sizes a plan reads.
    sizes = ladder(low, high, [m * model.hidden_size * 2 for m in decode_m])
    settings = Settings.for_device(timing.DEVICE, spec.get("collective_warmup"), spec.get("collective_reps"))
    shapes = layer_shapes(model)
    gemm: list[dict[str, Any]] = []
    moe: list[dict[str, Any]] = []
    if "gemm" in steps:
        print("calibrate: gemms", flush=True)
        gemm = measure_gemms(shapes, precisions, decode_m + prefill_m, failures)
    if "moe" in steps:
        print("calibrate: moe", flush=True)
        moe_precisions = [p for p in precisions if p in ("bf16", "w4a8")]
        moe = measure_moe(model, moe_precisions, decode_m + prefill_m[:3], failures)
    print("calibrate: memory, launch", flush=True)
    memory = measure_memory() if "memory" in steps else {"method": "not measured (steps)"}
    launch = measure_launch() if "launch" in steps else {"method": "not measured (steps)"}
    collectives: list[dict[str, Any]] = []
    notes: list[str] = []
    if "collectives" in steps and ranks:
        measured = collective.measure(sizes, ranks, settings)
        collectives, notes = measured.points, measured.notes
        failures.extend(measured.failures)
    elif "collectives" in steps:
        notes.append("Collectives not measured: no rank count to measure (collective_ranks, or GPUs visible).")
    skipped = sorted(set(wanted) - set(ranks))
    if "collectives" in steps and timing.DEVICE == "cuda" and skipped:
        counts = ", ".join(str(r) for r in skipped)
        notes.append(f"Collectives not measured at {counts} ranks: {torch.cuda.device_count()} GPUs visible.")
    profile = {
        "schema": SCHEMA,
        "created_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "gpu": {**gpu, "catalog_key": spec.get("gpu")},
        "machine": machine(),
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
        "notes": [*(GEMM_NOTES if gemm or moe else ()), *notes],
    }
    data = json.dumps(profile, indent=1, sort_keys=True).encode()
    # profile.json for people; result.json (+ its checksum, written after it) for the job machinery.
    for name in ("profile.json", "result.json"):
        write_result(out, data, name)
    return profile


def _done(profile: dict[str, Any]) -> str:
    return (
        f"{len(profile['gemm'])} gemm points, {len(profile['moe'])} moe points, "
        f"{len(profile['collectives'])} collective points, {len(profile['failures'])} failures"
    )


def main(argv: list[str] | None = None) -> int:
    return job_main("planner.calibrate", run, _done, argv)
