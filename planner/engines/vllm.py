"""vLLM: its memory profiles (V0 before 0.8, V1 from 0.8), its launch and its multi-node launch."""

from __future__ import annotations

import statistics
from typing import TYPE_CHECKING

from planner.engines.base import HOST, MODEL, PORT, SERVED_NAME, ServingEngine
from planner.engines.profile import GIB, EngineProfile

if TYPE_CHECKING:
    from planner.serving import Launch

QUANTIZATION_FLAG = "--quantization"


# vLLM's CUDA graph memory per kernel of each graph set it captures (KiB): a public startup log's
# "Graph capturing finished in N secs, took X GiB" over the sets its release captured
# (EngineProfile.cuda_graph_sets: one piecewise set per capture size, plus one full graph per decode size
# from 0.11) and the planner's kernels per forward on a GPU (perf.stage_kernels, the largest stage's). The
# graphs share one memory pool and are captured largest first, so activations are reused across sizes;
# what grows is each instantiated graph, with its kernel nodes (vLLM's own 0.18 estimator: the first
# capture plus a fixed cost per further size). By source:
CUDA_GRAPH_KIB_PER_KERNEL = {
    "Qwen3-235B-A22B FP8, 8 x L40S TP 8 EP, 0.10.2: 3.45 GiB, 67 sets x 1786 kernels": 30.2,
    "vllm-project/vllm issue (Qwen3-32B FP8, TP 2, ~0.10): 1.30 GiB, 67 sets x 832": 24.5,
    "Qwen2.5-Math-1.5B, TP 1, 0.11.0: 3.49 GiB, 67 + 67 sets x 308": 88.7,
    "Qwen3-30B-A3B FP8 on GB10, 0.13.0 (NGC 26.01): 1.28 GiB, 51 + 35 sets x 720": 21.7,
    "vllm-project/vllm/pull/11349 (Llama-3.2-1B, V0): 0.21 GiB, 35 sets x 176": 35.7,
    "DeepSeek-R1-Distill-Qwen-32B, TP 8 on ROCm, V0: 0.35 GiB, 35 sets x 832": 12.6,
}

# vLLM V0's non-torch memory per GPU with several PCIe-only GPUs, as each log printed it (GiB), by source.
V0_PCIE_NON_TORCH_GIB = {
    "vllm-project/vllm/issues/15815": 0.30,  # 2 x L40S, TP 2, 0.7.1
    "vllm-project/vllm/issues/12663": 0.29,  # 2 x 48 GB cards, TP 2, 0.7
    "vllm-project/vllm/pull/14447": 0.20,  # 16 x RTX 3090, TP 16, V0 of 0.8.3
    "vllm-project/vllm/issues/15340": 0.20,  # 16 x RTX 3090, TP 8 x PP 2, 0.8.1
    "gnosia93/vlm-distillation": 0.36,  # 8 x L40S, TP 8, 0.6.6
}


def memory_profile(version: str, parsed: tuple[int, ...]) -> EngineProfile:
    if parsed < (0, 8):
        return EngineProfile(
            name="vllm",
            version=version,
            generation="v0",
            block_size_tokens=16,
            sampler_fp32_copies=2.0,
            non_torch_single_gpu_bytes=int(0.35 * GIB),  # RTX 3090 log, vLLM 0.6.4
            non_torch_multi_gpu_bytes=int(2.0 * GIB),
            # Over PCIe: the CUDA context and NCCL's PCIe buffers, no NVLink buffers (and no custom
            # all-reduce beyond two PCIe-only GPUs). The median of five V0 logs of four publishers.
            non_torch_multi_gpu_pcie_bytes=int(statistics.median(V0_PCIE_NON_TORCH_GIB.values()) * GIB),
            tp_allreduce_copies=2,
            hybrid_kv_allocator=False,
            note="vLLM V0: pool = total_gpu_memory x gpu_memory_utilization - weights - peak activations "
            "(a max_num_batched_tokens prefill) - non-torch memory; CUDA graphs come out of the headroom",
            provenance=(
                "non-torch memory on one GPU 0.35 GiB: fitted to a single log (RTX 3090, vLLM 0.6.4)",
                "non-torch memory on several GPUs 2.0 GiB: assumed, not checked against a log",
                "non-torch memory on several GPUs over PCIe 0.29 GiB: the median of five logs (0.20-0.36 GiB)",
            ),
        )
    return EngineProfile(
        name="vllm",
        version=version,
        generation="v1",
        block_size_tokens=16,
        sampler_fp32_copies=9.5,  # fitted: Qwen3-235B-FP8 TP4 (0.10) and gpt-oss-120b TP1 (0.10.1) logs
        non_torch_single_gpu_bytes=int(0.15 * GIB),
        non_torch_multi_gpu_bytes=int(2.04 * GIB),  # H200 TP4 debug log, vLLM 0.10
        hybrid_kv_allocator=True,
        note="vLLM V1: Available KV cache memory = total_gpu_memory x gpu_memory_utilization - weights - "
        "torch peak increase (max of a max_num_batched_tokens forward and the dummy sampler over "
        "max_num_seqs rows) - non-torch memory; CUDA graphs are captured after the pool, from the headroom",
        provenance=(
            "non-torch memory on several GPUs 2.04 GiB (NCCL and custom all-reduce buffers): fitted to a "
            "single log (H200 TP4 over NVLink, vLLM 0.10); PCIe and other TP sizes not checked",
            "non-torch memory on one GPU 0.15 GiB: assumed, not checked against a log",
        ),
    )


def plan_argv(launch: Launch) -> list[str]:
    layout = launch.layout
    argv = ["vllm", "serve", MODEL, "--tensor-parallel-size", str(layout.tp)]
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
        argv += [QUANTIZATION_FLAG, "fp8"]
    if launch.kv_dtype == "fp8":
        argv += ["--kv-cache-dtype", "fp8"]
    return argv


def eval_args(seed: int) -> list[str]:
    return ["--host", HOST, "--port", PORT, "--seed", str(seed), "--served-model-name", SERVED_NAME]


def multinode_argv(argv: list[str], nnodes: int, node_rank: str, head: str, port: int) -> list[str]:
    """vLLM's multiprocessing backend across nodes: rank 0 serves the API, the others run --headless."""
    return [*argv, "--distributed-executor-backend", "mp", "--nnodes", str(nnodes), "--node-rank", node_rank,
            "--master-addr", head, "--master-port", str(port)]  # fmt: skip


ENGINE = ServingEngine(
    name="vllm",
    display_name="vLLM",
    aliases=(),
    profile_key="vllm",
    # V0 0.5-0.7 (profile from a 0.6.4 log); V1 0.8-0.17 (logs of 0.9.2 to 0.17.0). An older vLLM reserved
    # far more per GPU than the V0 profile's log, and a newer one may change its accounting.
    releases=((0, 5), (0, 17)),
    default_version="0.11",
    memory_profile=memory_profile,
    plan_argv=plan_argv,
    eval_args=eval_args,
    version_module="vllm",
    logprobs=True,
    served_model_name=SERVED_NAME,
    online_quantization_flag=QUANTIZATION_FLAG,
    multinode_argv=multinode_argv,
    headless_flag="--headless",
)
