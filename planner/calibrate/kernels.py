"""Triton kernels the calibration times where torch has no kernel of its own: a grouped (MoE) GEMM
in BF16 and in W4A8 (INT4 weights, symmetric, group 128; INT8 per-token activations; INT8 tensor cores).

The layout follows vLLM's fused-MoE Triton kernel: token rows are gathered per expert and padded to
BLOCK_M, one program computes a BLOCK_M x BLOCK_N tile of one expert; padding blocks exit early.
A dense GEMM is the same kernel with one expert. Packed INT4: byte [e, k, n] for k < K/2 holds weight
row k in its low nibble and row k + K/2 in its high nibble, so unpacking is two shifts, no shuffles.
Imported only on a GPU node (needs triton and torch with CUDA).
"""

from __future__ import annotations

import functools
from typing import Any

import torch
import triton
import triton.language as tl

GROUP = 128


@triton.jit
def _grouped_gemm(
    x_ptr,
    x_scale_ptr,
    w_ptr,
    w_scale_ptr,
    out_ptr,
    block_expert_ptr,
    N,
    K,
    stride_xm,
    stride_we,
    stride_wk,
    stride_wn,
    stride_se,
    stride_sg,
    stride_om,
    W4A8: tl.constexpr,
    GROUP_K: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    expert = tl.load(block_expert_ptr + pid_m)
    if expert < 0:  # a padding block past the last expert's rows
        return
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    n_mask = rn < N
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    w_base = w_ptr + expert.to(tl.int64) * stride_we
    if W4A8:
        half = K // 2
        s_base = w_scale_ptr + expert.to(tl.int64) * stride_se
        for k0 in range(0, half, BLOCK_K):
            a_lo = tl.load(x_ptr + rm[:, None] * stride_xm + (k0 + rk)[None, :])
            a_hi = tl.load(x_ptr + rm[:, None] * stride_xm + (half + k0 + rk)[None, :])
            packed = tl.load(
                w_base + (k0 + rk)[:, None] * stride_wk + rn[None, :] * stride_wn, mask=n_mask[None, :], other=0
            )
            wide = packed.to(tl.int32)  # sign-extended byte; shifts below are arithmetic
            w_lo = ((wide << 28) >> 28).to(tl.int8)
            w_hi = (wide >> 4).to(tl.int8)
            d_lo = tl.dot(a_lo, w_lo, out_dtype=tl.int32)
            d_hi = tl.dot(a_hi, w_hi, out_dtype=tl.int32)
            s_lo = tl.load(s_base + (k0 // GROUP_K) * stride_sg + rn, mask=n_mask, other=0.0)
            s_hi = tl.load(s_base + ((half + k0) // GROUP_K) * stride_sg + rn, mask=n_mask, other=0.0)
            acc += d_lo.to(tl.float32) * s_lo[None, :] + d_hi.to(tl.float32) * s_hi[None, :]
        acc = acc * tl.load(x_scale_ptr + rm)[:, None]
    else:
        for k0 in range(0, K, BLOCK_K):
            a = tl.load(x_ptr + rm[:, None] * stride_xm + (k0 + rk)[None, :])
            w = tl.load(
                w_base + (k0 + rk)[:, None] * stride_wk + rn[None, :] * stride_wn, mask=n_mask[None, :], other=0.0
            )
            acc += tl.dot(a, w)
    tl.store(out_ptr + rm[:, None] * stride_om + rn[None, :], acc.to(tl.bfloat16), mask=n_mask[None, :])


@functools.cache
def _sm_count(device: Any) -> int:
    return int(torch.cuda.get_device_properties(device).multi_processor_count)


def block_m_for(rows_per_expert: float) -> int:
    """vLLM's choice: small tiles when each expert sees few rows (decode), large for prefill."""
    if rows_per_expert <= 16:
        return 16
    if rows_per_expert <= 64:
        return 32 if rows_per_expert <= 32 else 64
    return 64


def grouped_gemm(x: Any, w: Any, block_expert: Any, *, block_m: int, x_scale: Any = None, w_scale: Any = None) -> Any:
    """x [rows, K] (bf16, or int8 with x_scale [rows] fp32), rows a multiple of block_m;
    w [E, K, N] bf16, or [E, K/2, N] int8 packed with w_scale [E, K/GROUP, N] fp32;
    block_expert [rows / block_m] int32 (-1: padding). Returns [rows, N] bf16."""
    w4a8 = x.dtype == torch.int8
    rows, k = x.shape
    n = w.shape[2]
    out = torch.empty(rows, n, device=x.device, dtype=torch.bfloat16)
    block_n = 128 if n >= 1024 else 64
    # Decode shapes give few tiles: narrow them until the grid covers the SMs twice over.
    while block_n > 32 and rows // block_m * triton.cdiv(n, block_n) < 2 * _sm_count(x.device):
        block_n //= 2
    block_k = 128 if w4a8 else 64
    grid = (rows // block_m, triton.cdiv(n, block_n))
    _grouped_gemm[grid](
        x,
        x_scale if w4a8 else x,
        w,
        w_scale if w4a8 else w,
        out,
        block_expert,
        n,
        k,
        x.stride(0),
        w.stride(0),
        w.stride(1),
        w.stride(2),
        w_scale.stride(0) if w4a8 else 0,
        w_scale.stride(1) if w4a8 else 0,
        out.stride(0),
        W4A8=w4a8,
        GROUP_K=GROUP,
        BLOCK_M=block_m,
        BLOCK_N=block_n,
        BLOCK_K=block_k,
        num_warps=4,
        num_stages=4,
    )
    return out


def pack_int4(q: Any) -> Any:
    """q [E, K, N] int8 in [-8, 7] -> [E, K/2, N] int8 (rows k and k + K/2 share a byte)."""
    half = q.shape[1] // 2
    return ((q[:, half:] << 4) | (q[:, :half] & 0xF)).to(torch.int8)


def random_w4a8(experts: int, k: int, n: int, device: str) -> tuple[Any, Any]:
    q = torch.randint(-8, 8, (experts, k, n), dtype=torch.int8, device=device)
    scale = torch.rand(experts, k // GROUP, n, device=device) * 0.01 + 0.001
    return pack_int4(q), scale


def dequant_w4a8(packed: Any, scale: Any) -> Any:
    """Reference: [E, K/2, N] packed + scales -> [E, K, N] float32."""
    low = (packed << 4) >> 4
    high = packed >> 4
    q = torch.cat([low, high], dim=1).float()
    return q * scale.repeat_interleave(GROUP, dim=1)


def quantize_rows_int8(x: Any) -> tuple[Any, Any]:
    scale = x.abs().amax(dim=1).float().clamp(min=1e-6) / 127
    return (x.float() / scale[:, None]).round().clamp(-128, 127).to(torch.int8), scale


def check(device: str = "cuda") -> dict[str, float]:
    """Relative error of both kernel paths against float32 references on fresh random data."""
    torch.manual_seed(1)
    errors = {}
    experts, k, n, block_m = 3, 512, 384, 16
    rows = experts * block_m
    block_expert = torch.tensor([0, 2, 1, -1], dtype=torch.int32, device=device)
    x = torch.randn(rows + block_m, k, device=device, dtype=torch.bfloat16)
    w = torch.randn(experts, k, n, device=device, dtype=torch.bfloat16) / k**0.5
    out = grouped_gemm(x, w, block_expert, block_m=block_m)[:rows]
    ref = torch.cat(
        [x[i * block_m : (i + 1) * block_m].float() @ w[e].float() for i, e in enumerate(block_expert.tolist()[:3])]
    )
    errors["bf16"] = float((out.float() - ref).norm() / ref.norm())
    packed, scale = random_w4a8(experts, k, n, device)
    xq, xs = quantize_rows_int8(x)
    out = grouped_gemm(xq, packed, block_expert, block_m=block_m, x_scale=xs, w_scale=scale)[:rows]
    wf = dequant_w4a8(packed, scale)
    ref = torch.cat(
        [
            (xq[i * block_m : (i + 1) * block_m].float() * xs[i * block_m : (i + 1) * block_m, None]) @ wf[e]
            for i, e in enumerate(block_expert.tolist()[:3])
        ]
    )
    errors["w4a8"] = float((out.float() - ref).norm() / ref.norm())
    return errors
