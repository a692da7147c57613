"""The quantization scheme names, without torch: the web tier validates and lists them, the eval job
(planner/quant/schemes.py, which needs torch) implements them. tests/quant checks the two agree."""

from __future__ import annotations

SCHEME_NAMES: tuple[str, ...] = ("w4a8", "w4a8-sym", "w4a8-fp8", "w8a8", "fp8", "fp8-channel", "w4a16")
