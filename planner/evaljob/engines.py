"""The engine an eval serves through, as the job launches it: argv (placeholders, never a shell
string), health path, version command, whether it returns logprobs; and the multi-node launch.

GPU engines take the launch command the capacity planner generated for the plan (its `serving`
block), with the checkpoint path swapped for the artifact's location on the cluster and the
listening address, port and seed added, so the eval serves exactly the configuration that ships.
`transformers serve` (CPU) is the embedded default's and CI's engine.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from typing import Any

ENGINES = ("transformers", "vllm", "sglang", "tensorrt_llm")
SERVED_NAME = "candidate"  # the model name the eval asks for (one model per engine process)
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


def _version(module: str) -> tuple[str, ...]:
    return ("{python}", "-c", f"import {module}; print({module}.__version__)")


def _checked(argv: list[str], field: str) -> tuple[str, ...]:
    for part in argv:
        if not _ARG.fullmatch(part):
            raise ValueError(f"{field}: argument {part!r} is not allowed in an engine command")
    return tuple(argv)


def transformers_launch(*, device: str = "cpu", dtype: str = "float32", seed: int = 0) -> EngineLaunch:
    argv = ["{python}", "-m", "transformers.cli.transformers", "serve", "{model}"]
    argv += ["--host", "{host}", "--port", "{port}", "--device", device, "--dtype", dtype, "--default-seed", str(seed)]
    # transformers serve refuses `logprobs` (UNUSED_CHAT_COMPLETION_FIELDS): token metrics are absent.
    return EngineLaunch("transformers", _checked(argv, "engine"), _version("transformers"), "/health", False, "{model}")


def _replace_model(argv: list[str], engine: str) -> list[str]:
    if engine == "vllm":  # vllm serve <model> ...
        if argv[:2] != ["vllm", "serve"] or len(argv) < 3:
            raise ValueError("serving.vllm: expected 'vllm serve <model> …'")
        return [*argv[:2], "{model}", *argv[3:]]
    if engine == "sglang":  # python -m sglang.launch_server --model-path <model> ...
        if "--model-path" not in argv:
            raise ValueError("serving.sglang: expected '--model-path <model>'")
        index = argv.index("--model-path") + 1
        argv = [*argv[:index], "{model}", *argv[index + 1 :]]
        return ["{python}", *argv[1:]] if argv[0] in ("python", "python3") else argv
    if engine == "tensorrt_llm":  # trtllm-serve <model> ...
        if argv[:1] != ["trtllm-serve"] or len(argv) < 2:
            raise ValueError("serving.tensorrt_llm: expected 'trtllm-serve <model> …'")
        return [argv[0], "{model}", *argv[2:]]
    raise ValueError(f"engine: {engine!r} is not one of {', '.join(ENGINES)}")


def plan_launch(engine: str, plan_command: str, *, seed: int = 0) -> EngineLaunch:
    """The planner's launch command for `engine`, made servable by the eval job on one node."""
    argv = _replace_model(shlex.split(plan_command), engine)
    if engine == "vllm":
        argv += ["--host", "{host}", "--port", "{port}", "--seed", str(seed), "--served-model-name", SERVED_NAME]
        return EngineLaunch(engine, _checked(argv, "serving.vllm"), _version("vllm"), "/health", True, SERVED_NAME)
    if engine == "sglang":
        argv += ["--host", "{host}", "--port", "{port}", "--random-seed", str(seed)]
        argv += ["--served-model-name", SERVED_NAME]
        return EngineLaunch(engine, _checked(argv, "serving.sglang"), _version("sglang"), "/health", True, SERVED_NAME)
    argv += ["--host", "{host}", "--port", "{port}"]
    # trtllm-serve's chat API logprobs vary by backend and version: treated as absent, never estimated.
    return EngineLaunch(
        engine, _checked(argv, "serving.tensorrt_llm"), _version("tensorrt_llm"), "/health", False, None
    )


def split_online_quantization(argv: list[str]) -> tuple[list[str], list[str]]:
    """(argv without, the flags) of the quantization the engine applies at load (`--quantization fp8`
    on BF16 weights, which the planner emits for an online-FP8 plan). The eval of such a plan serves
    one artifact twice: the baseline without the flags, the candidate with them."""
    if "--quantization" not in argv:
        return argv, []
    index = argv.index("--quantization")
    if index + 1 >= len(argv):
        raise ValueError("engine: --quantization without a method")
    return argv[:index] + argv[index + 2 :], argv[index : index + 2]


def multinode_argv(name: str, argv: list[str], *, nnodes: int, node_rank: str, head: str, port: int) -> list[str]:
    """The engine's own multi-node launch on one node of the allocation (rank and head address filled
    in on each node from Slurm's variables: `node_rank` and `head` are shell words there)."""
    if name == "vllm":
        # vLLM's multiprocessing backend across nodes: rank 0 serves the API, the others run --headless.
        return [*argv, "--distributed-executor-backend", "mp", "--nnodes", str(nnodes), "--node-rank", node_rank,
                "--master-addr", head, "--master-port", str(port)]  # fmt: skip
    if name == "sglang":
        return [*argv, "--nnodes", str(nnodes), "--node-rank", node_rank, "--dist-init-addr", f"{head}:{port}"]
    raise ValueError(f"engine: {name} has no multi-node launch here (use vllm or sglang)")


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
    if name == "vllm":
        words += ' $( [ "$SLURM_NODEID" != 0 ] && echo --headless )'
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
