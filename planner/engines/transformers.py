"""`transformers serve` (CPU): the engine of the embedded default's and CI's evals. It has no memory
profile here: a request naming it is planned under vLLM's (a stated stand-in), and the plan prints no
launch command for it.
"""

from __future__ import annotations

from planner.engines.base import HOST, MODEL, PORT, PYTHON, ServingEngine


def eval_argv(*, device: str = "cpu", dtype: str = "float32", seed: int = 0) -> list[str]:
    """The eval job's launch: the model as its argument (tests/quant/test_engine_commands.py checks the
    flags against the installed CLI)."""
    argv = [PYTHON, "-m", "transformers.cli.transformers", "serve", MODEL, "--host", HOST, "--port", PORT]
    return [*argv, "--device", device, "--dtype", dtype, "--default-seed", str(seed)]


ENGINE = ServingEngine(
    name="transformers",
    display_name="Transformers (transformers serve)",
    aliases=(),
    profile_key=None,
    planned_as="vllm",
    stand_in_note="transformers serve preallocates no KV pool and captures no CUDA graphs; vLLM's "
    "accounting, which reserves both, stands in for it (not checked against a log)",
    releases=None,
    default_version=None,
    memory_profile=None,
    plan_argv=None,
    eval_args=None,  # its argv is whole (eval_argv): it serves no plan command
    version_module="transformers",
    logprobs=False,  # transformers serve refuses `logprobs` (UNUSED_CHAT_COMPLETION_FIELDS)
    served_model_name=MODEL,
    online_quantization_flag=None,
    multinode_argv=None,
)
