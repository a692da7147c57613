"""Launch command lines for the chosen plan: vLLM, SGLang and TensorRT-LLM."""

from __future__ import annotations

import shlex

from planner.memory import Layout
from planner.specs import ModelSpec, PrecisionSpec

SGLANG_KV = {"fp8": "fp8_e4m3"}


def vllm_command(
    model_path: str,
    model: ModelSpec,
    precision: PrecisionSpec,
    layout: Layout,
    *,
    max_model_len: int,
    gpu_memory_utilization: float,
    kv_dtype: str,
    max_num_seqs: int,
) -> str:
    argv = ["vllm", "serve", model_path, "--tensor-parallel-size", str(layout.tp)]
    if layout.pp > 1:
        argv += ["--pipeline-parallel-size", str(layout.pp)]
    if layout.dp > 1:
        argv += ["--data-parallel-size", str(layout.dp)]
    if layout.ep > 1:
        argv += ["--enable-expert-parallel"]
    argv += ["--max-model-len", str(max_model_len), "--gpu-memory-utilization", f"{gpu_memory_utilization:g}"]
    argv += ["--max-num-seqs", str(max_num_seqs)]
    if precision.key == "fp8" and model.checkpoint_precision != "fp8":
        argv += ["--quantization", "fp8"]  # online FP8 of a BF16 checkpoint
    if kv_dtype == "fp8":
        argv += ["--kv-cache-dtype", "fp8"]
    return shlex.join(argv)


def sglang_command(
    model_path: str,
    model: ModelSpec,
    precision: PrecisionSpec,
    layout: Layout,
    *,
    max_model_len: int,
    gpu_memory_utilization: float,
    kv_dtype: str,
    max_num_seqs: int,
) -> str:
    argv = ["python", "-m", "sglang.launch_server", "--model-path", model_path, "--tp", str(layout.tp * layout.dp)]
    if layout.pp > 1:
        argv += ["--pp-size", str(layout.pp)]
    if layout.dp > 1:
        argv += ["--dp", str(layout.dp), "--enable-dp-attention"]
    if layout.ep > 1:
        argv += ["--ep-size", str(layout.ep)]
    # SGLang's static fraction covers weights + KV; its activation reserve is the remainder.
    argv += ["--context-length", str(max_model_len), "--mem-fraction-static", f"{gpu_memory_utilization:g}"]
    argv += ["--max-running-requests", str(max_num_seqs)]
    if precision.key == "fp8" and model.checkpoint_precision != "fp8":
        argv += ["--quantization", "fp8"]
    if kv_dtype in SGLANG_KV:
        argv += ["--kv-cache-dtype", SGLANG_KV[kv_dtype]]
    return shlex.join(argv)


def trtllm_command(
    model_path: str, layout: Layout, *, max_model_len: int, gpu_memory_utilization: float, max_num_seqs: int
) -> str:
    argv = ["trtllm-serve", model_path, "--tp_size", str(layout.tp * layout.dp), "--pp_size", str(layout.pp)]
    if layout.ep > 1:
        argv += ["--ep_size", str(layout.ep)]
    argv += ["--max_seq_len", str(max_model_len), "--max_batch_size", str(max_num_seqs)]
    argv += ["--kv_cache_free_gpu_memory_fraction", f"{gpu_memory_utilization:g}"]
    return shlex.join(argv)
