"""The engine an eval serves through, as the job launches it: argv (placeholders, never a shell
string), health path, version command, whether it returns logprobs; and the multi-node launch.

GPU engines take the launch argv the capacity planner generated for the plan (its `serving_argv`,
with a {model} slot the job fills with the artifact's location on the cluster), with the listening
address, port and seed added, so the eval serves exactly the configuration that ships. Every engine's
flags come from its module in planner/engines. `transformers serve` (CPU) is the embedded default's
and CI's engine.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from typing import Any

from planner.engines.base import MODEL, PYTHON, SERVED_NAME, ServingEngine  # noqa: F401  (SERVED_NAME: re-exported)
from planner.engines.registry import ENGINE_NAMES, serving_engine
from planner.engines.transformers import eval_argv as transformers_argv

ENGINES = ENGINE_NAMES
# What may appear in a generated argv: flags, numbers, paths, placeholders. No shell metacharacters.
_ARG = re.compile(r"^[A-Za-z0-9_.:/=,+{}-]{1,400}$")


@dataclass(frozen=True, slots=True)
class EngineLaunch:
    name: str
    argv: tuple[str, ...]  # {python}, {model}, {port}, {host} are filled in by the job
    version_argv: tuple[str, ...]
    health_path: str
    logprobs: bool  # the engine returns token logprobs through the chat API
    served_model_name: str | None

    def as_spec(self, health_timeout_s: int, expected_version: str | None = None) -> dict[str, Any]:
        return {
            "name": self.name,
            "argv": list(self.argv),
            "version_argv": list(self.version_argv),
            "health_path": self.health_path,
            "health_timeout_s": health_timeout_s,
            "logprobs": self.logprobs,
            "served_model_name": self.served_model_name,
            "expected_version": expected_version,
        }


def _checked(argv: list[str], field: str) -> tuple[str, ...]:
    for part in argv:
        if not _ARG.fullmatch(part):
            raise ValueError(f"{field}: argument {part!r} is not allowed in an engine command")
    return tuple(argv)


def _launch(engine: ServingEngine, argv: list[str], field: str) -> EngineLaunch:
    return EngineLaunch(
        engine.name,
        _checked(argv, field),
        engine.version_argv(),
        engine.health_path,
        engine.logprobs,
        engine.served_model_name,
    )


def transformers_launch(*, device: str = "cpu", dtype: str = "float32", seed: int = 0) -> EngineLaunch:
    engine = serving_engine("transformers")
    return _launch(engine, transformers_argv(device=device, dtype=dtype, seed=seed), "engine")


def plan_launch(engine_name: str, plan_argv: list[str], *, seed: int = 0) -> EngineLaunch:
    """The planner's launch argv for the engine (the plan's `serving_argv`, with its {model} slot),
    made servable by the eval job on one node: the engine's own address, port, seed and name flags added."""
    engine = serving_engine(engine_name)
    field = f"serving_argv.{engine.name}"
    if engine.eval_args is None or engine.plan_argv is None:
        raise ValueError(f"engine: {engine.name} serves no plan command")
    if not isinstance(plan_argv, list) or not all(isinstance(part, str) for part in plan_argv):
        raise ValueError(f"{field}: expected a list of strings")
    if plan_argv.count(MODEL) != 1:
        raise ValueError(f"{field}: expected the model slot {MODEL} once")
    return _launch(engine, [*plan_argv, *engine.eval_args(seed)], field)


def plan_argv_of_command(engine_name: str, command: str) -> list[str]:
    """The argv of a plan stored before plans carried `serving_argv` (its `serving` string only): the
    command split, with the model's path swapped for the slot where the engine's own argv puts it."""
    engine = serving_engine(engine_name)
    argv = shlex.split(command)
    if engine.name == "vllm" and argv[:2] == ["vllm", "serve"] and len(argv) >= 3:
        return [*argv[:2], MODEL, *argv[3:]]
    if engine.name == "sglang" and "--model-path" in argv[:-1]:
        index = argv.index("--model-path") + 1
        argv = [*argv[:index], MODEL, *argv[index + 1 :]]
        return [PYTHON, *argv[1:]] if argv[0] in ("python", "python3") else argv
    if engine.name == "tensorrt_llm" and argv[:1] == ["trtllm-serve"] and len(argv) >= 2:
        return [argv[0], MODEL, *argv[2:]]
    raise ValueError(f"serving.{engine.name}: not the launch command the planner writes for {engine.display_name}")


def split_online_quantization(engine_name: str, argv: list[str]) -> tuple[list[str], list[str]]:
    """(argv without, the flags) of the quantization the engine applies at load (`--quantization fp8`
    on BF16 weights, which the planner emits for an online-FP8 plan). The eval of such a plan serves
    one artifact twice: the baseline without the flags, the candidate with them."""
    flag = serving_engine(engine_name).online_quantization_flag
    if flag is None or flag not in argv:
        return argv, []
    index = argv.index(flag)
    if index + 1 >= len(argv):
        raise ValueError(f"engine: {flag} without a method")
    return argv[:index] + argv[index + 2 :], argv[index : index + 2]


def multinode_argv(name: str, argv: list[str], *, nnodes: int, node_rank: str, head: str, port: int) -> list[str]:
    """The engine's own multi-node launch on one node of the allocation (rank and head address filled
    in on each node from Slurm's variables: `node_rank` and `head` are shell words there)."""
    engine = serving_engine(name)
    if engine.multinode_argv is None:
        able = [n for n in ENGINE_NAMES if serving_engine(n).multinode_argv is not None]
        raise ValueError(f"engine: {name} has no multi-node launch here (use {' or '.join(able)})")
    return engine.multinode_argv(argv, nnodes, node_rank, head, port)


def multinode_script(name: str, argv: list[str], *, nnodes: int, gpus_per_node: int, dist_port: int = 29500) -> str:
    """Run inside ONE Slurm allocation of `nnodes` nodes (the eval job's own): `srun` starts one engine
    process per node, rank = SLURM_NODEID, head = the allocation's first host; rank 0 serves the API on
    the node where the eval job runs, so the job still talks to 127.0.0.1. `argv` is fully resolved."""
    if nnodes < 1 or gpus_per_node < 0:
        raise ValueError("nnodes: at least 1; gpus_per_node: not negative")
    _checked(argv, "engine")
    ranked = multinode_argv(name, argv, nnodes=nnodes, node_rank="$SLURM_NODEID", head="$HEAD", port=dist_port)
    # Only the two variables this function put there stay unquoted (expanded on each node).
    words = " ".join(
        part if part in ("$SLURM_NODEID", "$HEAD") or part.startswith("$HEAD:") else shlex.quote(part)
        for part in ranked
    )
    words = words.replace("$HEAD:", "${HEAD}:")
    headless = serving_engine(name).headless_flag
    if headless:
        words += f' $( [ "$SLURM_NODEID" != 0 ] && echo {shlex.quote(headless)} )'
    # ranks > 0 may not bind the API port on other hosts; the head's answers the job
    lines = [
        "set -euo pipefail",
        'HEAD=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)',
        "export HEAD",
        # --overlap: the engine's step shares the allocation with the batch step (the eval client)
        f"exec srun --nodes={int(nnodes)} --ntasks={int(nnodes)} --ntasks-per-node=1 "
        + (f"--gpus-per-node={int(gpus_per_node)} " if gpus_per_node else "")
        + f"--overlap --kill-on-bad-exit=1 --export=ALL bash -c {shlex.quote(words)}",
    ]
    return "\n".join(lines) + "\n"


def multinode_command(name: str, argv: list[str], **layout: int) -> list[str]:
    """What the eval job starts as its engine when the plan spans nodes: bash running the script."""
    return ["bash", "-c", multinode_script(name, argv, **layout)]
