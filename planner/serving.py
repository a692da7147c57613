"""Launch command lines for the chosen plan, one per engine that has one (planner/engines: each
engine builds its own argv)."""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from planner.engines.base import fill
from planner.engines.registry import SERVING_ENGINES
from planner.memory import Layout
from planner.specs import ModelSpec, PrecisionSpec


@dataclass(frozen=True, slots=True)
class Launch:
    """What every engine's command line is built from."""

    model_path: str
    model: ModelSpec
    precision: PrecisionSpec
    layout: Layout
    max_model_len: int
    gpu_memory_utilization: float
    kv_dtype: str
    max_num_seqs: int
    scheduler_recv_interval: int = 1  # SGLang only
    # The prefill step budget the plan was computed with. Stated on every command: each engine's own
    # default differs (vLLM 2048 on an A100, 8192 on Hopper; SGLang 8192), so leaving it out serves
    # a different step than the one planned.
    max_num_batched_tokens: int | None = None

    @property
    def online_fp8(self) -> bool:
        """FP8 asked of a checkpoint that is not FP8: the engine quantizes it at load."""
        return self.precision.key == "fp8" and self.model.checkpoint_precision != "fp8"


def serving_argv(launch: Launch) -> dict[str, list[str]]:
    """Each engine's launch argv for the plan, by the engine's name, with the {model} and {python}
    slots left for whoever launches it (the eval job fills them on the node)."""
    return {engine.name: engine.plan_argv(launch) for engine in SERVING_ENGINES if engine.plan_argv is not None}


def serving_commands(launch: Launch) -> dict[str, str]:
    """The plan's `serving` block: one launch command per engine, for people to read and paste: the
    argv with the model's path (and `python`) filled in, shell-quoted."""
    return {
        name: shlex.join(fill(argv, model=launch.model_path, python="python"))
        for name, argv in serving_argv(launch).items()
    }
