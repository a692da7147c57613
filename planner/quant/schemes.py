"""The project's scheme names (quantization-eval reference) and how each treats weights and activations."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from functools import partial
from typing import Any

import torch

from planner.quant import numerics


@dataclass(frozen=True, slots=True)
class Scheme:
    name: str
    weights: str  # int4 | int8 | fp8 | none
    activations: str  # int8 | fp8 | none
    group_size: int | None = 128
    symmetric: bool = False
    fp8_block: int | None = 128

    def as_config(self) -> dict[str, Any]:
        return asdict(self)

    def weight_fn(self) -> Callable[[torch.Tensor], torch.Tensor]:
        if self.weights == "int4":
            return lambda w: numerics.quantize_int4_groups(w, self.group_size or 128, self.symmetric).dequantize()
        if self.weights == "int8":
            return numerics.fake_int8_weight
        if self.weights == "fp8":
            return partial(numerics.fake_fp8_weight, block=self.fp8_block)
        return lambda w: w.float()

    def activation_fn(self) -> Callable[[torch.Tensor], torch.Tensor] | None:
        return {"int8": numerics.fake_int8_per_token, "fp8": numerics.fake_fp8_per_token}.get(self.activations)


SCHEMES: dict[str, Scheme] = {
    "w4a8": Scheme("w4a8", "int4", "int8"),
    "w4a8-sym": Scheme("w4a8-sym", "int4", "int8", symmetric=True),
    "w4a8-fp8": Scheme("w4a8-fp8", "int4", "fp8"),
    "w8a8": Scheme("w8a8", "int8", "int8", group_size=None),
    "fp8": Scheme("fp8", "fp8", "fp8", group_size=None),
    "fp8-channel": Scheme("fp8-channel", "fp8", "fp8", group_size=None, fp8_block=None),
    "w4a16": Scheme("w4a16", "int4", "none"),
}


def scheme(name: str, group_size: int | None = None) -> Scheme:
    try:
        base = SCHEMES[name]
    except KeyError:
        raise ValueError(f"scheme: unknown {name!r}; known: {', '.join(SCHEMES)}") from None
    if group_size is not None:
        if base.weights != "int4":
            raise ValueError("group_size: only the INT4 schemes take a group size")
        return Scheme(base.name, base.weights, base.activations, group_size, base.symmetric, base.fp8_block)
    return base
