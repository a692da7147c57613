"""What a serving engine is, whole: its names, its memory profile, how it is launched for a plan and for
an eval, its online quantization and its multi-node launch. One module per engine fills this in
(planner/engines/vllm.py, sglang.py, trtllm.py, transformers.py); planner/engines/registry.py lists them,
and every list of engines (the planner's, the service's choices, the API's, the wizard's, the eval job's)
is read from there.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from planner.engines.profile import EngineProfile
    from planner.serving import Launch

# Slots in a launch argv: the checkpoint's path (the plan's model path, or the artifact's location on
# the cluster) and the Python that runs a `python -m` engine. The plan's display string fills them in;
# the eval job fills them on the node. Never a shell string: an argv is passed as a list throughout.
MODEL = "{model}"
PYTHON = "{python}"
# What the eval job fills in besides: the listening address and port.
HOST = "{host}"
PORT = "{port}"
SERVED_NAME = "candidate"  # the model name an eval asks for (one model per engine process)

Release = tuple[int, int]
# (argv, nodes, node rank, head address, port) -> the argv of one node of a multi-node launch
MultinodeArgv = Callable[[list[str], int, str, str, int], list[str]]


@dataclass(frozen=True, slots=True)
class ServingEngine:
    """One serving engine. `name` is what a deployment request, the gate, an eval run and the plan's
    `serving` block call it; `aliases` are other spellings accepted for it (the planner's `trtllm`)."""

    name: str
    display_name: str  # as people write it: "vLLM", "SGLang"
    aliases: tuple[str, ...]
    # The planner's memory accounting. `profile_key`: the key of its own memory profiles (the planner's
    # `engine` input and the plan's `engine.name`); None when it has none, and then `planned_as` names
    # the engine whose profile stands in for it, a stated assumption (`stand_in_note` says why).
    profile_key: str | None
    releases: tuple[Release, Release] | None  # the oldest and newest release line a profile exists for
    default_version: str | None  # planned when the request names no version
    memory_profile: Callable[[str, tuple[int, ...]], EngineProfile] | None
    # The plan's launch command for this engine, an argv with MODEL (and PYTHON) slots; None: the engine
    # is not among the plan's `serving` commands.
    plan_argv: Callable[[Launch], list[str]] | None
    # What the eval job appends to the plan's argv to serve it: address, port, seed, served model name.
    eval_args: Callable[[int], list[str]] | None
    version_module: str  # `import <module>; print(<module>.__version__)` reports the version served
    logprobs: bool  # the chat API returns token logprobs (token-level metrics need them)
    served_model_name: str | None  # the model name the eval asks for; None: the engine's default
    # The flag (followed by its method) with which the engine quantizes BF16 weights at load; None: none.
    online_quantization_flag: str | None
    multinode_argv: MultinodeArgv | None  # None: no multi-node launch here
    headless_flag: str | None = None  # added on the ranks after the first (they serve no API)
    health_path: str = "/health"
    planned_as: str | None = None
    stand_in_note: str = ""

    @property
    def planner_key(self) -> str:
        """The memory profile the capacity planner judges this engine by: its own, or its stand-in's."""
        key = self.profile_key or self.planned_as
        if key is None:
            raise ValueError(f"engine: {self.name} has no memory profile and no stand-in")
        return key

    def version_argv(self) -> tuple[str, ...]:
        module = self.version_module
        return (PYTHON, "-c", f"import {module}; print({module}.__version__)")


def fill(argv: list[str], **slots: str) -> list[str]:
    """The argv with its slots ({model}, {python}, …) replaced by the values given."""
    values = {"{" + key + "}": value for key, value in slots.items()}
    return [values.get(part, part) for part in argv]
