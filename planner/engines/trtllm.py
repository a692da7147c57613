"""TensorRT-LLM (`trtllm-serve`): its memory profile and its launch. The service
calls it `tensorrt_llm` (its Python package); the planner's memory profile is keyed `trtllm`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from planner.engines.base import HOST, MODEL, PORT, ServingEngine
from planner.engines.profile import GIB, POOL_OF_FREE, EngineProfile

if TYPE_CHECKING:
    from planner.serving import Launch


def memory_profile(version: str, parsed: tuple[int, ...]) -> EngineProfile:
    return EngineProfile(
        name="trtllm",
        version=version,
        generation=".".join(map(str, parsed[:2])),
        block_size_tokens=32,
        sampler_fp32_copies=0.0,
        non_torch_single_gpu_bytes=int(1.0 * GIB),
        non_torch_multi_gpu_bytes=int(2.0 * GIB),
        rope_cache_value_bytes=0,
        kv_pool=POOL_OF_FREE,
        default_batch=(8192, 2048),
        hybrid_kv_allocator=False,
        note="TensorRT-LLM: KV pool = kv_cache_free_gpu_memory_fraction x (memory free after weights, "
        "activations and runtime buffers); not validated against logs here",
        provenance=("runtime buffers 1.0 GiB on one GPU, 2.0 GiB on several: assumed, not checked against a log",),
    )


def plan_argv(launch: Launch) -> list[str]:
    layout = launch.layout
    argv = ["trtllm-serve", MODEL, "--tp_size", str(layout.tp * layout.dp), "--pp_size", str(layout.pp)]
    if layout.ep > 1:
        argv += ["--ep_size", str(layout.ep)]
    argv += ["--max_seq_len", str(launch.max_model_len), "--max_batch_size", str(launch.max_num_seqs)]
    if launch.max_num_batched_tokens:
        argv += ["--max_num_tokens", str(launch.max_num_batched_tokens)]
    argv += ["--kv_cache_free_gpu_memory_fraction", f"{launch.gpu_memory_utilization:g}"]
    return argv


def eval_args(seed: int) -> list[str]:
    # trtllm-serve takes no seed flag; its chat API logprobs vary by backend and version: treated as
    # absent, never estimated.
    return ["--host", HOST, "--port", PORT]


ENGINE = ServingEngine(
    name="tensorrt_llm",
    display_name="TensorRT-LLM",
    aliases=("trtllm",),
    profile_key="trtllm",
    releases=((0, 17), (1, 2)),  # 0.17, the first with trtllm-serve, to 1.2
    default_version="1.0",
    memory_profile=memory_profile,
    plan_argv=plan_argv,
    eval_args=eval_args,
    version_module="tensorrt_llm",
    logprobs=False,
    served_model_name=None,
    online_quantization_flag=None,  # the plan does not ask it to quantize at load
    multinode_argv=None,  # its MPI launch is not generated here
)
