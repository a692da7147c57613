"""The serving engines, in the order they are offered. Adding one: its module beside these (a
ServingEngine), its line here, its catalog data (catalog/efficiency.yaml; the precisions it has kernels
for, catalog/precisions.yaml) and its tests."""

from __future__ import annotations

from planner.engines import sglang, transformers, trtllm, vllm
from planner.engines.base import ServingEngine

SERVING_ENGINES: tuple[ServingEngine, ...] = (vllm.ENGINE, sglang.ENGINE, trtllm.ENGINE, transformers.ENGINE)
DEFAULT_ENGINE = vllm.ENGINE.name
ENGINE_NAMES: tuple[str, ...] = tuple(engine.name for engine in SERVING_ENGINES)
# (name, display name): the service's choices (requests, the gate, the wizard, the eval API).
ENGINE_CHOICES: tuple[tuple[str, str], ...] = tuple((engine.name, engine.display_name) for engine in SERVING_ENGINES)
# The engines with memory profiles of their own, by the planner's key (vllm, sglang, trtllm).
PROFILED: dict[str, ServingEngine] = {e.profile_key: e for e in SERVING_ENGINES if e.profile_key is not None}

_BY_NAME = {spelling: engine for engine in SERVING_ENGINES for spelling in (engine.name, *engine.aliases)}


def serving_engine(name: str) -> ServingEngine:
    """The engine by its name or an alias (`trtllm` is TensorRT-LLM)."""
    engine = _BY_NAME.get(name)
    if engine is None:
        raise ValueError(f"engine: {name!r} is not one of {', '.join(ENGINE_NAMES)}")
    return engine
