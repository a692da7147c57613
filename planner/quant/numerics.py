"""The numerics of each scheme, as pure tensor functions (fake-quant: quantize, then dequantize).

Conventions (documented because the field disagrees):
- INT4 asymmetric, group g along the input dim: scale = (max - min) / 15,
  zero = clamp(round(-min / scale), 0, 15), q = clamp(round(w / scale) + zero, 0, 15),
  w ~ (q - zero) * scale.
- INT4 symmetric: scale = absmax / 7 (AutoAWQ's form, not compressed-tensors' absmax / 7.5),
  q = clamp(round(w / scale), -8, 7).
- INT8 per output channel, symmetric: scale = absmax / 127.
- Activations INT8 per token, symmetric: scale_t = absmax(x_t) / 127, q in [-128, 127].
- FP8 e4m3: scale so the block's absmax maps to 448, cast to float8_e4m3fn; block 128x128 or per channel.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

FP8_MAX = 448.0
EPS = 1e-12


@dataclass(frozen=True, slots=True)
class Int4Groups:
    q: torch.Tensor  # integer codes (int8 storage), shape [out, in]
    scale: torch.Tensor  # [out, in // group]
    zero: torch.Tensor | None  # [out, in // group], asymmetric only
    group_size: int

    def dequantize(self) -> torch.Tensor:
        out, columns = self.q.shape
        q = self.q.float().reshape(out, columns // self.group_size, self.group_size)
        if self.zero is not None:
            q = q - self.zero.float().unsqueeze(-1)
        return (q * self.scale.float().unsqueeze(-1)).reshape(out, columns)


def quantize_int4_groups(weight: torch.Tensor, group_size: int = 128, symmetric: bool = False) -> Int4Groups:
    out, columns = weight.shape
    if columns % group_size:
        raise ValueError(f"group_size: input dim {columns} is not a multiple of {group_size}")
    w = weight.float().reshape(out, columns // group_size, group_size)
    if symmetric:
        scale = w.abs().amax(dim=-1).clamp_min(EPS) / 7
        q = torch.clamp(torch.round(w / scale.unsqueeze(-1)), -8, 7)
        return Int4Groups(q=q.reshape(out, columns).to(torch.int8), scale=scale, zero=None, group_size=group_size)
    low, high = w.amin(dim=-1), w.amax(dim=-1)
    scale = ((high - low) / 15).clamp_min(EPS)
    zero = torch.clamp(torch.round(-low / scale), 0, 15)
    q = torch.clamp(torch.round(w / scale.unsqueeze(-1)) + zero.unsqueeze(-1), 0, 15)
    return Int4Groups(q=q.reshape(out, columns).to(torch.int8), scale=scale, zero=zero, group_size=group_size)


def quantize_int8_per_channel(weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(int8 codes [out, in], scale [out]) with scale = absmax / 127 per output channel."""
    scale = weight.float().abs().amax(dim=1).clamp_min(EPS) / 127
    q = torch.clamp(torch.round(weight.float() / scale.unsqueeze(1)), -127, 127).to(torch.int8)
    return q, scale


def quantize_int8_per_token(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(int8 codes, scale [..., 1]) with scale_t = absmax(x_t) / 127 per token (last dim)."""
    scale = x.float().abs().amax(dim=-1, keepdim=True).clamp_min(EPS) / 127
    q = torch.clamp(torch.round(x.float() / scale), -128, 127).to(torch.int8)
    return q, scale


def fake_int8_per_token(x: torch.Tensor) -> torch.Tensor:
    q, scale = quantize_int8_per_token(x)
    return (q.float() * scale).to(x.dtype)


def _fp8_cast(x: torch.Tensor) -> torch.Tensor:
    return x.to(torch.float8_e4m3fn).float()


def fake_fp8_per_token(x: torch.Tensor) -> torch.Tensor:
    scale = x.float().abs().amax(dim=-1, keepdim=True).clamp_min(EPS) / FP8_MAX
    return (_fp8_cast(x.float() / scale) * scale).to(x.dtype)


def fake_fp8_weight(weight: torch.Tensor, block: int | None = 128) -> torch.Tensor:
    """FP8 e4m3 with one scale per block x block tile (block=None: per output channel)."""
    w = weight.float()
    if block is None:
        scale = w.abs().amax(dim=1, keepdim=True).clamp_min(EPS) / FP8_MAX
        return _fp8_cast(w / scale) * scale
    out, columns = w.shape
    pad_rows, pad_cols = (-out) % block, (-columns) % block
    padded = torch.nn.functional.pad(w, (0, pad_cols, 0, pad_rows))
    tiles = padded.reshape(padded.shape[0] // block, block, padded.shape[1] // block, block)
    scale = tiles.abs().amax(dim=(1, 3), keepdim=True).clamp_min(EPS) / FP8_MAX
    result = (_fp8_cast(tiles / scale) * scale).reshape(padded.shape)
    return result[:out, :columns]


def fake_int8_weight(weight: torch.Tensor) -> torch.Tensor:
    q, scale = quantize_int8_per_channel(weight)
    return q.float() * scale.unsqueeze(1)
