"""Launch command lines for the chosen plan: vLLM, SGLang and TensorRT-LLM."""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from planner.memory import Layout
from planner.specs import ModelSpec, PrecisionSpec

SGLANG_KV = {"fp8": "fp8_e4m3"}


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


def vllm_command(launch: Launch) -> str:
    layout = launch.layout
    argv = ["vllm", "serve", launch.model_path, "--tensor-parallel-size", str(layout.tp)]
    if layout.pp > 1:
        argv += ["--pipeline-parallel-size", str(layout.pp)]
    if layout.dp > 1:
        argv += ["--data-parallel-size", str(layout.dp)]
    if layout.ep > 1:
        argv += ["--enable-expert-parallel"]
    argv += ["--max-model-len", str(launch.max_model_len)]
    argv += ["--gpu-memory-utilization", f"{launch.gpu_memory_utilization:g}"]
    argv += ["--max-num-seqs", str(launch.max_num_seqs)]
    if launch.max_num_batched_tokens:
        argv += ["--max-num-batched-tokens", str(launch.max_num_batched_tokens)]
    if launch.online_fp8:
        argv += ["--quantization", "fp8"]
    if launch.kv_dtype == "fp8":
        argv += ["--kv-cache-dtype", "fp8"]
    return shlex.join(argv)


def sglang_command(launch: Launch) -> str:
    layout = launch.layout
    argv = ["python", "-m", "sglang.launch_server", "--model-path", launch.model_path]
    argv += ["--tp", str(layout.tp * layout.dp)]
    if layout.pp > 1:
        argv += ["--pp-size", str(layout.pp)]
    if layout.dp > 1:
        argv += ["--dp", str(layout.dp), "--enable-dp-attention"]
    if layout.ep > 1:
        argv += ["--ep-size", str(layout.ep)]
    # SGLang's static fraction covers weights + KV; its activation reserve is the remainder.
    argv += ["--context-length", str(launch.max_model_len)]
    argv += ["--mem-fraction-static", f"{launch.gpu_memory_utilization:g}"]
    argv += ["--max-running-requests", str(launch.max_num_seqs)]
    if launch.max_num_batched_tokens:  # SGLang's chunk of prompt tokens per step
        argv += ["--chunked-prefill-size", str(launch.max_num_batched_tokens)]
    if launch.online_fp8:
        argv += ["--quantization", "fp8"]
    if launch.kv_dtype in SGLANG_KV:
        argv += ["--kv-cache-dtype", SGLANG_KV[launch.kv_dtype]]
    if launch.scheduler_recv_interval > 1:
        argv += ["--scheduler-recv-interval", str(launch.scheduler_recv_interval)]
    return shlex.join(argv)


def trtllm_command(launch: Launch) -> str:
    layout = launch.layout
    argv = ["trtllm-serve", launch.model_path, "--tp_size", str(layout.tp * layout.dp), "--pp_size", str(layout.pp)]
    if layout.ep > 1:
        argv += ["--ep_size", str(layout.ep)]
    argv += ["--max_seq_len", str(launch.max_model_len), "--max_batch_size", str(launch.max_num_seqs)]
    if launch.max_num_batched_tokens:
        argv += ["--max_num_tokens", str(launch.max_num_batched_tokens)]
    argv += ["--kv_cache_free_gpu_memory_fraction", f"{launch.gpu_memory_utilization:g}"]
    return shlex.join(argv)


def serving_commands(launch: Launch) -> dict[str, str]:
    """The plan's `serving` block: one launch command per engine."""
    return {"vllm": vllm_command(launch), "sglang": sglang_command(launch), "tensorrt_llm": trtllm_command(launch)}
