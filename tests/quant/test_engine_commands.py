"""The engine commands an eval launches for a Kimi K2 W4A8 plan on two 8xH200 nodes, pinned flag by flag.

Each flag below is one the engine documents (checked against their docs when written):
- vLLM `vllm serve`: --tensor-parallel-size, --pipeline-parallel-size, --max-model-len,
  --gpu-memory-utilization, --max-num-seqs, --host, --port, --seed, --served-model-name, and for
  several nodes --distributed-executor-backend mp, --nnodes, --node-rank, --master-addr,
  --master-port, --headless (ranks above 0 run no API server).
- SGLang `python -m sglang.launch_server`: --model-path, --tp, --pp-size, --context-length,
  --mem-fraction-static, --max-running-requests, --host, --port, --random-seed,
  --served-model-name, and for several nodes --nnodes, --node-rank, --dist-init-addr HOST:PORT.
- `transformers serve` (transformers 5.24.0 `Serve`): the model as its argument, --host, --port,
  --device, --dtype, --default-seed.
"""

from __future__ import annotations

import shlex
import subprocess
import sys

import pytest

from planner.engines.base import fill
from planner.evaljob.engines import (
    multinode_command,
    multinode_script,
    plan_argv_of_command,
    plan_launch,
    transformers_launch,
)
from planner.evaljob.served import substitute
from planner.plan import PlanRequest, plan

MODEL = "/models/kimi-k2-w4a8"


@pytest.fixture(scope="module")
def kimi_plan() -> dict:
    request = PlanRequest(
        model="kimi-k2", precision="w4a8", gpu="h200", tp=8, pp=2, max_model_len=32768, concurrency=64, model_path=MODEL
    )
    return plan(request).as_contract()


def resolved(argv: list[str]) -> list[str]:
    return substitute(argv, {"{model}": MODEL, "{port}": "8000", "{host}": "127.0.0.1", "{python}": "python3"})


def test_the_kimi_k2_w4a8_plan_spans_two_nodes(kimi_plan: dict) -> None:
    assert kimi_plan["fits"]
    assert kimi_plan["parallel"]["nodes"] == 2


def test_vllm_single_allocation_two_node_launch_is_pinned(kimi_plan: dict) -> None:
    launch = plan_launch("vllm", kimi_plan["serving_argv"]["vllm"])
    argv = resolved(list(launch.argv))
    assert shlex.join(argv) == (
        "vllm serve /models/kimi-k2-w4a8 --tensor-parallel-size 8 --pipeline-parallel-size 2 --max-model-len 32768 "
        "--gpu-memory-utilization 0.9 --max-num-seqs 64 --max-num-batched-tokens 8192 --host 127.0.0.1 --port 8000 --seed 0 "
        "--served-model-name candidate"
    )
    assert launch.health_path == "/health"
    assert launch.logprobs
    script = multinode_script("vllm", argv, nnodes=2, gpus_per_node=8)
    assert 'HEAD=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)' in script
    assert "srun --nodes=2 --ntasks=2 --ntasks-per-node=1 --gpus-per-node=8 --overlap --kill-on-bad-exit=1" in script
    assert (
        "--distributed-executor-backend mp --nnodes 2 --node-rank $SLURM_NODEID --master-addr $HEAD "
        "--master-port 29500" in script
    )
    assert '[ "$SLURM_NODEID" != 0 ] && echo --headless' in script
    subprocess.run(["bash", "-n", "-c", script], check=True)


def test_sglang_two_node_launch_is_pinned(kimi_plan: dict) -> None:
    launch = plan_launch("sglang", kimi_plan["serving_argv"]["sglang"])
    argv = resolved(list(launch.argv))
    assert shlex.join(argv) == (
        "python3 -m sglang.launch_server --model-path /models/kimi-k2-w4a8 --tp 8 --pp-size 2 --context-length 32768 "
        "--mem-fraction-static 0.9 --max-running-requests 64 --chunked-prefill-size 8192 --host 127.0.0.1 --port 8000 --random-seed 0 "
        "--served-model-name candidate"
    )
    script = multinode_script("sglang", argv, nnodes=2, gpus_per_node=8)
    assert "--nnodes 2 --node-rank $SLURM_NODEID --dist-init-addr ${HEAD}:29500" in script
    assert "--headless" not in script
    subprocess.run(["bash", "-n", "-c", script], check=True)


def test_transformers_serve_command_matches_its_cli() -> None:
    argv = resolved(list(transformers_launch().argv))
    assert argv == [
        "python3", "-m", "transformers.cli.transformers", "serve", MODEL, "--host", "127.0.0.1", "--port", "8000",
        "--device", "cpu", "--dtype", "float32", "--default-seed", "0",
    ]  # fmt: skip
    helped = subprocess.run(
        [sys.executable, "-m", "transformers.cli.transformers", "serve", "--help"],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
        env={"COLUMNS": "200", "PATH": "/usr/bin:/bin"},
    )
    for flag in ("--host", "--port", "--device", "--dtype", "--default-seed"):
        assert flag in helped.stdout, (flag, helped.stdout[-2000:], helped.stderr[-2000:])


def test_a_plan_command_with_shell_metacharacters_is_refused() -> None:
    with pytest.raises(ValueError, match="not allowed"):
        plan_launch("vllm", ["vllm", "serve", "{model}", "--max-model-len", "1;rm"])
    with pytest.raises(ValueError, match="model slot"):
        plan_launch("vllm", ["vllm", "serve", "/m"])
    with pytest.raises(ValueError, match="not the launch command"):
        plan_argv_of_command("vllm", "python -m other /m")
    with pytest.raises(ValueError, match="no multi-node"):
        multinode_command("tensorrt_llm", ["trtllm-serve", "/m"], nnodes=2, gpus_per_node=8)


@pytest.mark.parametrize("engine", ["vllm", "sglang", "tensorrt_llm"])
def test_the_plans_command_is_its_argv_for_people_and_an_old_plans_command_launches_the_same(
    kimi_plan: dict, engine: str
) -> None:
    """The `serving` string is the argv with the model's path filled in, shell-quoted (never parsed
    back); a plan stored before plans carried their argv launches exactly what the argv would."""
    argv = kimi_plan["serving_argv"][engine]
    assert kimi_plan["serving"][engine] == shlex.join(fill(argv, model=MODEL, python="python"))
    assert plan_argv_of_command(engine, kimi_plan["serving"][engine]) == argv
