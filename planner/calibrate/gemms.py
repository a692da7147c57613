"""GEMM and grouped-MoE timings at the model's shapes, per weight format's kernel path."""

from __future__ import annotations

import functools
import math
from typing import Any

import torch

from planner.calibrate import timing
from planner.calibrate.shapes import PREFILL_M, GemmShape
from planner.calibrate.timing import Launches

WEIGHT_BITS = {"bf16": 16.0, "fp8": 8.0, "int8": 8.0, "w4a16": 4.25, "w4a8": 4.25}
ACTIVATION_BYTES = {"bf16": 2, "fp8": 1, "int8": 1, "w4a16": 2, "w4a8": 1}
ROTATE_BYTES = 512 << 20  # weights cycled per timed graph: several times the L2, so HBM is what is timed


def _copies(weight_bytes: int, m: int) -> int:
    if m >= PREFILL_M[0] or timing.DEVICE == "cpu":
        return 2
    return max(2, min(32, math.ceil(ROTATE_BYTES / max(weight_bytes, 1))))


def _gemm_launches(precision: str, m: int, n: int, k: int, copies: int) -> tuple[Launches, int, str]:
    """(launches over `copies` weight sets, M actually run, kernel path) for one precision."""
    device = timing.DEVICE
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
                    seconds, mode = timing.time_launches(launches)
                except Exception as exc:
                    failures.append({"what": f"gemm {precision} {shape.name} m={m}", "error": str(exc)[:300]})
                    timing.sync()
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
        if timing.DEVICE == "cuda":
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
                    seconds, mode = timing.time_launches(launches)
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
