"""SGLang: its memory profile, its launch and its multi-node launch."""

from __future__ import annotations

from typing import TYPE_CHECKING

from planner.engines.base import HOST, MODEL, PORT, PYTHON, SERVED_NAME, ServingEngine
from planner.engines.profile import GIB, POOL_OF_STATIC_FRACTION, EngineProfile

if TYPE_CHECKING:
    from planner.serving import Launch

QUANTIZATION_FLAG = "--quantization"
KV_DTYPES = {"fp8": "fp8_e4m3"}  # the planner's KV dtype -> SGLang's --kv-cache-dtype


def memory_profile(version: str, parsed: tuple[int, ...]) -> EngineProfile:
    return EngineProfile(
        name="sglang",
        version=version,
        generation=".".join(map(str, parsed[:2])),
        block_size_tokens=1,
        sampler_fp32_copies=0.0,
        non_torch_single_gpu_bytes=int(1.0 * GIB),
        # fitted: Qwen3-235B-FP8 TP4 H100 log (its pool less the weights, their allocator rounding of 0.27
        # GiB per GPU and the FP32 rope cache of 0.02 GiB: 2.06 GiB before those were counted as weights)
        non_torch_multi_gpu_bytes=int(1.77 * GIB),
        # 4 x L4 over PCIe, SGLang 0.4.3 (QwQ-32B): 22.05 GiB per GPU, 21.63 GiB free before the weights;
        # the pool is 0.85 of the free memory less the weights (2.84 GiB), i.e. 0.36 GiB below 0.85 of
        # the total: the CUDA context and NCCL's PCIe buffers, nothing like the 1.77 GiB over NVLink.
        non_torch_multi_gpu_pcie_bytes=int(0.36 * GIB),
        weights_by_free_memory=True,
        kv_pool=POOL_OF_STATIC_FRACTION,
        default_batch=(8192, 4096),
        rope_cache_value_bytes=4,
        hybrid_kv_allocator=False,
        note="SGLang: KV pool = total x mem_fraction_static - weights - memory in use before the pool "
        "(context, NCCL); activations and CUDA graphs live in the remaining 1 - mem_fraction_static",
        provenance=(
            "memory before the pool on several GPUs 1.77 GiB: fitted to a single log (H100 TP4, Qwen3-235B-FP8)",
            "memory before the pool on several GPUs over PCIe 0.36 GiB: fitted to a single log (4 x L4, QwQ-32B)",
            "memory before the pool on one GPU 1.0 GiB: assumed, not checked against a log",
        ),
    )


def plan_argv(launch: Launch) -> list[str]:
    layout = launch.layout
    argv = [PYTHON, "-m", "sglang.launch_server", "--model-path", MODEL]
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
        argv += [QUANTIZATION_FLAG, "fp8"]
    if launch.kv_dtype in KV_DTYPES:
        argv += ["--kv-cache-dtype", KV_DTYPES[launch.kv_dtype]]
    if launch.scheduler_recv_interval > 1:
        argv += ["--scheduler-recv-interval", str(launch.scheduler_recv_interval)]
    return argv


def eval_args(seed: int) -> list[str]:
    return ["--host", HOST, "--port", PORT, "--random-seed", str(seed), "--served-model-name", SERVED_NAME]


def multinode_argv(argv: list[str], nnodes: int, node_rank: str, head: str, port: int) -> list[str]:
    return [*argv, "--nnodes", str(nnodes), "--node-rank", node_rank, "--dist-init-addr", f"{head}:{port}"]


ENGINE = ServingEngine(
    name="sglang",
    display_name="SGLang",
    aliases=(),
    profile_key="sglang",
    releases=((0, 4), (0, 5)),  # logs of 0.4.9 to 0.5.7
    default_version="0.5",
    memory_profile=memory_profile,
    plan_argv=plan_argv,
    eval_args=eval_args,
    version_module="sglang",
    logprobs=True,
    served_model_name=SERVED_NAME,
    online_quantization_flag=QUANTIZATION_FLAG,
    multinode_argv=multinode_argv,
)
