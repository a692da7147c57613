"""Direct measurement of one decode step of Qwen3-30B-A3B's layers on one GPU (random weights, real shapes).

    python bench/decode_step_gpu.py --out DIR [--batches 1,8,32,128] [--context 1024]

48 layers of GQA attention (32 q / 4 kv heads, head_dim 128, q/k norm, RoPE, SDPA over a KV cache of
--context tokens) and a 128-expert top-8 MoE, then the final norm and lm_head, captured in one CUDA
graph per batch size (engines decode under CUDA graphs) and timed over replays. BF16: cuBLAS for the
attention projections, a grouped Triton GEMM (vLLM's fused-MoE layout) for the experts. W4A8: the same
grouped kernel with INT4 g128 weights and INT8 per-token activations for every projection; the
router, norms and lm_head stay BF16 as in the planner's scheme. Writes DIR/decode_step.json; the
planner comparison is bench/decode_step_compare.py (CPU).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

os.environ["NCCL_NVLS_ENABLE"] = "0"
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch
import torch.nn.functional as F

from planner.calibrate import kernels

LAYERS, HIDDEN, HEADS, KV_HEADS, HEAD_DIM = 48, 2048, 32, 4, 128
EXPERTS, TOP_K, MOE_FF, VOCAB = 128, 8, 768, 151936
QKV = (HEADS + 2 * KV_HEADS) * HEAD_DIM


GLUE: dict[str, str] = {}


def glue(function: Any) -> Any:
    """torch.compile the elementwise and routing glue between GEMMs (engines fuse it into a few
    kernels); falls back to eager, and records which, if compilation fails on this machine."""
    compiled: Any = None
    name = function.__name__

    def call(*args: Any) -> Any:
        nonlocal compiled
        if COMPILE and GLUE.get(name) != "eager":
            try:
                if compiled is None:
                    compiled = torch.compile(function, dynamic=True)
                result = compiled(*args)
                GLUE[name] = "torch.compile"
                return result
            except Exception as exc:
                GLUE[name] = "eager"
                print(f"glue {name}: eager ({str(exc)[:200]})", flush=True)
        return function(*args)

    return call


COMPILE = False
DEVICE = "cuda"


def rmsnorm(x: Any, weight: Any) -> Any:
    variance = x.float().pow(2).mean(-1, keepdim=True)
    return (x.float() * torch.rsqrt(variance + 1e-6)).to(x.dtype) * weight


def rotate(x: Any, cos: Any, sin: Any) -> Any:
    first, second = x[..., : HEAD_DIM // 2], x[..., HEAD_DIM // 2 :]
    return x * cos + torch.cat((-second, first), dim=-1) * sin


@glue
def norm(x: Any, weight: Any) -> Any:
    return rmsnorm(x, weight)


@glue
def act(gate_up: Any) -> Any:
    return F.silu(gate_up[:, :MOE_FF]) * gate_up[:, MOE_FF:]


@glue
def norm_quant(x: Any, weight: Any) -> tuple[Any, Any, Any]:
    h = rmsnorm(x, weight)
    scale = h.abs().amax(dim=1).float().clamp(min=1e-6) / 127
    return h, (h.float() / scale[:, None]).round().clamp(-128, 127).to(torch.int8), scale


@glue
def qk_rope(qkv: Any, q_norm: Any, k_norm: Any, cos: Any, sin: Any) -> tuple[Any, Any, Any]:
    batch = qkv.shape[0]
    q = qkv[:, : HEADS * HEAD_DIM].view(batch, HEADS, 1, HEAD_DIM)
    k = qkv[:, HEADS * HEAD_DIM : (HEADS + KV_HEADS) * HEAD_DIM].view(batch, KV_HEADS, 1, HEAD_DIM)
    v = qkv[:, (HEADS + KV_HEADS) * HEAD_DIM :].view(batch, KV_HEADS, 1, HEAD_DIM)
    return rotate(rmsnorm(q, q_norm), cos, sin), rotate(rmsnorm(k, k_norm), cos, sin), v


@glue
def route(h: Any, router: Any, block_m: int, max_rows: int) -> tuple[Any, Any, Any, Any, Any]:
    batch = h.shape[0]
    probs = torch.softmax((h @ router.t()).float(), dim=-1)
    weights, ids = torch.topk(probs, TOP_K, dim=-1)
    weights = weights / weights.sum(-1, keepdim=True)
    flat = ids.flatten()
    counts = torch.zeros(EXPERTS, dtype=torch.long, device=h.device).scatter_add_(0, flat, torch.ones_like(flat))
    padded = (counts + block_m - 1) // block_m * block_m
    padded_start = torch.cumsum(padded, 0) - padded
    start = torch.cumsum(counts, 0) - counts
    order = torch.argsort(flat, stable=True)
    experts_sorted = flat[order]
    dest = padded_start[experts_sorted] + torch.arange(batch * TOP_K, device=h.device) - start[experts_sorted]
    token = order // TOP_K
    gathered = torch.zeros(max_rows, HIDDEN, device=h.device, dtype=h.dtype)
    gathered[dest] = h[token]
    block_ends = torch.cumsum(padded // block_m, 0)
    block_expert = torch.searchsorted(block_ends, torch.arange(max_rows // block_m, device=h.device), right=True)
    block_expert = torch.where(block_expert < EXPERTS, block_expert, -1).to(torch.int32)
    return gathered, block_expert, dest, token, weights.flatten()[order]


@glue
def act_quant(gate_up: Any) -> tuple[Any, Any, Any]:
    act = F.silu(gate_up[:, :MOE_FF]) * gate_up[:, MOE_FF:]
    scale = act.abs().amax(dim=1).float().clamp(min=1e-6) / 127
    return act, (act.float() / scale[:, None]).round().clamp(-128, 127).to(torch.int8), scale


@glue
def combine(down: Any, dest: Any, weights: Any, token: Any, h: Any) -> Any:
    routed = down[dest] * weights[:, None].to(down.dtype)
    return torch.zeros_like(h).index_add_(0, token, routed)


class Projection:
    """One weight [K -> N] in the chosen precision."""

    def __init__(self, k: int, n: int, w4a8: bool, experts: int = 1) -> None:
        self.w4a8, self.experts, self.n = w4a8, experts, n
        if w4a8:
            self.weight, self.scale = kernels.random_w4a8(experts, k, n, DEVICE)
        elif experts == 1:
            self.weight = torch.randn(n, k, device=DEVICE, dtype=torch.bfloat16) / k**0.5  # cuBLAS: x @ w.T
        else:
            self.weight = torch.randn(experts, k, n, device=DEVICE, dtype=torch.bfloat16) / k**0.5

    def dense(self, x: Any, quantized: tuple[Any, Any] | None = None) -> Any:
        if not self.w4a8:
            return x @ self.weight.t()
        rows = x.shape[0]
        if quantized is not None:
            padded = -(-rows // 16) * 16
            xq = F.pad(quantized[0], (0, 0, 0, padded - rows))
            xs = F.pad(quantized[1], (0, padded - rows))
            block_expert = torch.zeros(padded // 16, dtype=torch.int32, device=DEVICE)
            return kernels.grouped_gemm(xq, self.weight, block_expert, block_m=16, x_scale=xs, w_scale=self.scale)[
                :rows
            ]
        block_m = 16 if rows <= 16 else (32 if rows <= 32 else 64)
        padded = -(-rows // block_m) * block_m
        xq, xs = kernels.quantize_rows_int8(F.pad(x, (0, 0, 0, padded - rows)))
        block_expert = torch.zeros(padded // block_m, dtype=torch.int32, device=DEVICE)
        return kernels.grouped_gemm(xq, self.weight, block_expert, block_m=block_m, x_scale=xs, w_scale=self.scale)[
            :rows
        ]

    def grouped(self, x: Any, block_expert: Any, block_m: int, quantized: tuple[Any, Any] | None = None) -> Any:
        if not self.w4a8:
            return kernels.grouped_gemm(x, self.weight, block_expert, block_m=block_m)
        xq, xs = quantized if quantized is not None else kernels.quantize_rows_int8(x)
        return kernels.grouped_gemm(xq, self.weight, block_expert, block_m=block_m, x_scale=xs, w_scale=self.scale)


class Layer:
    def __init__(self, w4a8: bool) -> None:
        self.ln1 = torch.ones(HIDDEN, device=DEVICE, dtype=torch.bfloat16)
        self.ln2 = torch.ones(HIDDEN, device=DEVICE, dtype=torch.bfloat16)
        self.q_norm = torch.ones(HEAD_DIM, device=DEVICE, dtype=torch.bfloat16)
        self.k_norm = torch.ones(HEAD_DIM, device=DEVICE, dtype=torch.bfloat16)
        self.qkv = Projection(HIDDEN, QKV, w4a8)
        self.o = Projection(HEADS * HEAD_DIM, HIDDEN, w4a8)
        self.router = torch.randn(EXPERTS, HIDDEN, device=DEVICE, dtype=torch.bfloat16) / HIDDEN**0.5
        self.gate_up = Projection(HIDDEN, 2 * MOE_FF, w4a8, EXPERTS)
        self.down = Projection(MOE_FF, HIDDEN, w4a8, EXPERTS)


def moe(layer: Layer, h: Any, block_m: int, max_rows: int) -> Any:
    """Route, gather per expert (static shapes, no host sync), two grouped GEMMs, weighted combine."""
    gathered, block_expert, dest, token, weights = route(h, layer.router, block_m, max_rows)
    quantized = None
    if layer.gate_up.w4a8:
        quantized = kernels.quantize_rows_int8(gathered)
    gate_up = layer.gate_up.grouped(gathered, block_expert, block_m, quantized)
    if layer.down.w4a8:
        activated, act_q, act_scale = act_quant(gate_up)
        down = layer.down.grouped(activated, block_expert, block_m, (act_q, act_scale))
    else:
        down = layer.down.grouped(act(gate_up), block_expert, block_m)
    return combine(down, dest, weights, token, h)


def step(
    layers: list[Layer],
    caches: list[tuple[Any, Any]],
    x: Any,
    embed: Any,
    final_norm: Any,
    cos: Any,
    sin: Any,
    block_m: int,
    max_rows: int,
) -> Any:
    batch = x.shape[0]
    context = caches[0][0].shape[2]
    for layer, (k_cache, v_cache) in zip(layers, caches, strict=True):
        if layer.qkv.w4a8:
            h, hq, hs = norm_quant(x, layer.ln1)
            qkv = layer.qkv.dense(h, (hq, hs))
        else:
            qkv = layer.qkv.dense(norm(x, layer.ln1))
        q, k, v = qk_rope(qkv, layer.q_norm, layer.k_norm, cos, sin)
        k_cache[:, :, context - 1 : context] = k
        v_cache[:, :, context - 1 : context] = v
        attention = F.scaled_dot_product_attention(q, k_cache, v_cache, enable_gqa=True)
        x = x + layer.o.dense(attention.reshape(batch, HEADS * HEAD_DIM))
        x = x + moe(layer, norm(x, layer.ln2), block_m, max_rows)
    return rmsnorm(x, final_norm) @ embed.t()


def measure(w4a8: bool, batches: list[int], context: int) -> list[dict[str, Any]]:
    torch.manual_seed(0)
    layers = [Layer(w4a8) for _ in range(LAYERS)]
    embed = torch.randn(VOCAB, HIDDEN, device=DEVICE, dtype=torch.bfloat16) / HIDDEN**0.5
    final_norm = torch.ones(HIDDEN, device=DEVICE, dtype=torch.bfloat16)
    results = []
    for batch in batches:
        caches = [
            (
                torch.randn(batch, KV_HEADS, context, HEAD_DIM, device=DEVICE, dtype=torch.bfloat16),
                torch.randn(batch, KV_HEADS, context, HEAD_DIM, device=DEVICE, dtype=torch.bfloat16),
            )
            for _ in range(LAYERS)
        ]
        x = torch.randn(batch, HIDDEN, device=DEVICE, dtype=torch.bfloat16)
        angle = torch.rand(batch, 1, 1, HEAD_DIM // 2, device=DEVICE)
        cos = torch.cat([angle.cos()] * 2, -1).to(torch.bfloat16)
        sin = torch.cat([angle.sin()] * 2, -1).to(torch.bfloat16)
        block_m = kernels.block_m_for(batch * TOP_K / EXPERTS)
        max_rows = -(-(batch * TOP_K + min(EXPERTS, batch * TOP_K) * (block_m - 1)) // block_m) * block_m

        def run() -> Any:
            return step(layers, caches, x, embed, final_norm, cos, sin, block_m, max_rows)  # noqa: B023

        run()
        torch.cuda.synchronize()
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as profiler:
            run()
            torch.cuda.synchronize()
        kernel_count = sum(1 for e in profiler.events() if e.device_type == torch.autograd.DeviceType.CUDA)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            run()
        graph.replay()
        samples = []
        for _ in range(20):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            graph.replay()
            end.record()
            samples.append((start, end))
        torch.cuda.synchronize()
        step_ms = statistics.median(s.elapsed_time(e) for s, e in samples)
        eager_began = time.perf_counter()
        for _ in range(3):
            run()
        torch.cuda.synchronize()
        eager_ms = (time.perf_counter() - eager_began) / 3 * 1e3
        results.append(
            {
                "precision": "w4a8" if w4a8 else "bf16",
                "batch": batch,
                "context": context,
                "step_ms": round(step_ms, 3),
                "decode_tokens_per_s": round(batch / step_ms * 1e3, 1),
                "eager_step_ms": round(eager_ms, 3),
                "gpu_kernels_per_step": kernel_count,
            }
        )
        print(json.dumps(results[-1]), flush=True)
        caches.clear()
        torch.cuda.empty_cache()
    return results


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--batches", default="1,8,32,128")
    parser.add_argument("--context", type=int, default=1024)
    parser.add_argument("--compile", action="store_true", help="torch.compile the glue between GEMMs")
    args = parser.parse_args()
    global COMPILE
    COMPILE = args.compile
    batches = [int(b) for b in args.batches.split(",")]
    errors = kernels.check()
    print("kernel check (relative error):", errors, flush=True)
    results = measure(False, batches, args.context) + measure(True, batches, args.context)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "decode_step.json").write_text(
        json.dumps(
            {
                "model": "qwen3-30b-a3b",
                "gpu": torch.cuda.get_device_name(0),
                "torch": torch.__version__,
                "cuda": torch.version.cuda,
                "kernel_relative_error": errors,
                "glue": GLUE or "eager",
                "results": results,
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
