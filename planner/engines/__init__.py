"""What each serving engine reserves outside its KV pool, as its own code and startup logs define it.

The same deployment differs up to 2x in KV tokens between engines because of these reserves, so
every figure here belongs to a named engine and version range, and the fitted constants say
which real logs they were read from (planner/validation/README.md lists them). Each engine's profiles
live in its own module (vllm.py, sglang.py, trtllm.py), with the rest of that engine (base.ServingEngine);
registry.py lists the engines.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
from collections.abc import Iterator
from typing import Any

from planner.engines.base import ServingEngine
from planner.engines.profile import BF16_BYTES, FP32_BYTES, GIB, EngineProfile, release_numbers
from planner.engines.registry import ENGINE_CHOICES, ENGINE_NAMES, PROFILED, SERVING_ENGINES, serving_engine
from planner.engines.vllm import CUDA_GRAPH_KIB_PER_KERNEL, V0_PCIE_NON_TORCH_GIB
from planner.specs import ModelSpec

__all__ = [
    "BF16_BYTES",
    "CUDA_GRAPH_KIB_PER_KERNEL",
    "DEFAULT_VERSION",
    "ENGINES",
    "ENGINE_CHOICES",
    "ENGINE_NAMES",
    "FP32_BYTES",
    "GIB",
    "KNOWN_RELEASES",
    "SERVING_ENGINES",
    "V0_PCIE_NON_TORCH_GIB",
    "EngineProfile",
    "ServingEngine",
    "activation_bytes",
    "engine_profile",
    "forward_bytes_per_token",
    "release_numbers",
    "serving_engine",
    "substituted",
]

# The planner's engines: those with memory profiles of their own, by their profile key.
ENGINES: tuple[str, ...] = tuple(PROFILED)
DEFAULT_VERSION: dict[str, str] = {key: str(engine.default_version) for key, engine in PROFILED.items()}
# The release lines (major, minor) each engine's profiles were built for, oldest and newest (each
# engine's module says why). A newer version is refused: planning it under a neighbour's profile would be a
# silent guess. An older one is planned with the oldest profile, said so (EngineProfile.predates_profiles) and
# with wide intervals (planner.intervals): a team on an old release still gets an answer (issue 47).
KNOWN_RELEASES: dict[str, tuple[tuple[int, int], tuple[int, int]]] = {
    key: engine.releases for key, engine in PROFILED.items() if engine.releases is not None
}


# Reserves standing in for a profile's while the validation corpus is scored without the log they
# were read from (planner.validation.leave_one_source_out): {(engine, generation): {field: value}}.
_substitutes: dict[tuple[str, str], dict[str, Any]] = {}
_substituted: dict[tuple[int, str], EngineProfile] = {}  # one object per profile: it keys the memory caches


@contextlib.contextmanager
def substituted(overrides: dict[tuple[str, str], dict[str, Any]]) -> Iterator[None]:
    """Plan with these profile fields replaced (keyed by engine and generation), in this block."""
    previous = dict(_substitutes)
    _substitutes.clear()
    _substitutes.update(overrides)
    _substituted.clear()
    try:
        yield
    finally:
        _substitutes.clear()
        _substitutes.update(previous)
        _substituted.clear()


def engine_profile(name: str = "vllm", version: str | None = None) -> EngineProfile:
    profile = _engine_profile(name, version)
    fields = _substitutes.get((profile.name, profile.generation))
    if not fields:
        return profile
    key = (id(profile), repr(sorted(fields.items())))
    if key not in _substituted:
        _substituted[key] = dataclasses.replace(profile, **fields)
    return _substituted[key]


@functools.lru_cache(maxsize=64)
def _engine_profile(name: str = "vllm", version: str | None = None) -> EngineProfile:
    engine = PROFILED.get(name)
    if engine is None or engine.memory_profile is None:
        raise ValueError(f"engine: must be one of {', '.join(ENGINES)}")
    version = version or DEFAULT_VERSION[name]
    parsed = release_numbers(version)
    oldest, newest = KNOWN_RELEASES[name]
    if parsed[:2] > newest:
        span = f"{oldest[0]}.{oldest[1]} to {newest[0]}.{newest[1]}"
        raise ValueError(
            f"engine_version: {name} {version} is not a release the planner has a memory profile for ({span})"
        )
    if parsed[:2] < oldest:
        # The oldest profile's accounting under the asked version (its release still compares as older: no
        # MXFP4 kernel, V0's graph sizes), marked so the plan says so and widens its intervals.
        oldest_profile = engine.memory_profile(version, (*oldest, 0))
        return dataclasses.replace(oldest_profile, predates_profiles=f"{oldest[0]}.{oldest[1]}")
    return engine.memory_profile(version, parsed)


def forward_bytes_per_token(model: ModelSpec, tp: int, allreduce_copies: int = 0) -> int:
    """Transient activation bytes per token of a prefill forward (BF16): the widest MLP on this rank
    (gate/up output, activation output) plus a few residual-stream copies. Matches vLLM V0's logged
    peak for Llama-3.1-8B (3 x intermediate + 3 x hidden per token)."""
    dense = 3 * model.dense_intermediate_size // tp
    moe = 0
    if model.is_moe:
        moe = model.experts_per_token * (3 * model.moe_intermediate_size // tp + model.hidden_size)
        moe += model.n_routed_experts * FP32_BYTES // BF16_BYTES  # router logits
    # With TP the row-parallel output is all-reduced out of place: its input and result can be more
    # hidden-size copies live at the peak (EngineProfile.tp_allreduce_copies).
    allreduce = allreduce_copies * model.hidden_size if tp > 1 else 0
    return BF16_BYTES * (max(dense, moe) + 3 * model.hidden_size + allreduce)


def activation_bytes(model: ModelSpec, tp: int, profile: EngineProfile, batched_tokens: int, max_num_seqs: int) -> int:
    """Peak activation memory the engine profiles (vLLM's "torch peak increase"). Not divided by TP for the
    sampler part: logits are gathered to the full vocabulary on every rank."""
    forward = batched_tokens * forward_bytes_per_token(model, tp, profile.tp_allreduce_copies)
    sampler = int(max_num_seqs * model.vocab_size * FP32_BYTES * profile.sampler_fp32_copies)
    return max(forward, sampler)
