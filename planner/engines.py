"""What each serving engine reserves outside its KV pool, as its own code and startup logs define it.

The same deployment differs up to 2x in KV tokens between engines because of these reserves, so
every figure here belongs to a named engine and version range, and the fitted constants say
which real logs they were read from (planner/validation/README.md lists them).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import re
import statistics
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from planner.specs import GpuSpec, ModelSpec

GIB = 1 << 30
ENGINES = ("vllm", "sglang", "trtllm")
DEFAULT_VERSION = {"vllm": "0.11", "sglang": "0.5", "trtllm": "1.0"}
# The release lines (major, minor) each engine's profiles below were built for, oldest and newest. A
# version outside them is refused: an older vLLM reserved far more per GPU than the V0 profile's 0.6.4
# log, and a newer one may change its accounting, so planning it under a neighbour's profile would be a
# silent guess. vLLM 0.5-0.7: V0 (profile from a 0.6.4 log); 0.8-0.17: V1 (logs of 0.9.2 to 0.17.0).
# SGLang 0.4-0.5 (logs of 0.4.9 to 0.5.7). TensorRT-LLM 0.17 (the first with trtllm-serve) to 1.2.
KNOWN_RELEASES: dict[str, tuple[tuple[int, int], tuple[int, int]]] = {
    "vllm": ((0, 5), (0, 17)),
    "sglang": ((0, 4), (0, 5)),
    "trtllm": ((0, 17), (1, 2)),
}
FP32_BYTES = 4
BF16_BYTES = 2


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


@dataclass(frozen=True, slots=True, eq=False)  # identity hash: profiles key the memory caches (one per version)
class EngineProfile:
    """One engine generation's memory accounting. Byte figures are per GPU."""

    name: str  # vllm | sglang | trtllm
    version: str
    generation: str  # vllm: "v0" (before 0.8) or "v1"; others: their version line
    block_size_tokens: int
    # vLLM profiles a forward of max_num_batched_tokens, then a dummy sampler over max_num_seqs rows of
    # fp32 logits (full vocabulary on every TP rank); the torch peak is the larger of the two.
    sampler_fp32_copies: float
    non_torch_single_gpu_bytes: int  # CUDA context, cuBLAS workspaces
    non_torch_multi_gpu_bytes: int  # plus NCCL and custom all-reduce buffers when GPUs talk over NVLink
    hybrid_kv_allocator: bool  # sliding-window layers charged their window, not the whole context
    note: str
    # Where each reserve comes from, when it is weaker than the engine's own code: a figure read off a
    # single startup log (it may be that run's, not the engine's), or one no log has checked yet.
    provenance: tuple[str, ...] = ()
    # Several GPUs with no NVLink between them (PCIe cards: L4, L40S, A10, RTX): NCCL over PCIe keeps small
    # buffers, and neither the custom all-reduce's IPC buffers nor NVLink SHARP's exist. None: the NVLink
    # figure (not checked over PCIe).
    non_torch_multi_gpu_pcie_bytes: int | None = None
    # The pool is sized from the device's free memory after loading (SGLang): the caching allocator's
    # rounding of the weight tensors (planner/allocator.py) counts as weights. vLLM counts the tensors'
    # bytes (torch's allocated bytes), so that rounding comes out of its unused headroom instead.
    weights_by_free_memory: bool = False
    # Bytes per value of the rotary embedding's cos/sin cache (max_position_embeddings x rotary dims),
    # built on the GPU when the model is: vLLM keeps it in the model's dtype, SGLang in FP32 (the
    # FlashInfer rope kernel it calls takes an FP32 cache). 0: not modelled (TensorRT-LLM).
    rope_cache_value_bytes: int = 2
    # Hidden-size copies per token the profiled forward adds with TP > 1: the out-of-place all-reduce's
    # input and result. vLLM V0: 2, from three logs at TP 2 and 16 (tests/planner/test_validation.py);
    # 0 elsewhere: V1's compiled forward is not checked by a log where the forward binds.
    tp_allreduce_copies: int = 0

    def defaults(self, gpu: GpuSpec, max_model_len: int) -> tuple[int, int]:
        """(max_num_batched_tokens, max_num_seqs) the engine picks for `serve` when the user does not."""
        if self.name == "vllm" and self.generation == "v0":
            # V0 prefills whole prompts unless the context exceeds 32k (then chunks of 512 by default).
            return (max(max_model_len, 2048) if max_model_len <= 32768 else 512), 256
        if self.name == "vllm":
            large = gpu.memory_bytes >= 70 * GIB and "a100" not in gpu.key and "a800" not in gpu.key
            return (8192, 1024) if large else (2048, 256)
        if self.name == "sglang":
            return 8192, 4096
        return 8192, 2048

    @property
    def release(self) -> tuple[int, ...]:
        """The version as numbers, (0, 10, 1): releases compare in order."""
        return release_numbers(self.version)

    def cuda_graph_sets(self, max_num_seqs: int, max_num_batched_tokens: int) -> int:
        """Graph sets vLLM captures at start-up: one per capture size (V0 and V1's piecewise mode) plus, from
        0.11 (FULL_AND_PIECEWISE), one full graph per decode size up to max_num_seqs. Read from the 0.8.5,
        0.10.2, 0.11.0, 0.12.0 and 0.17.0 wheels (config: _set_cudagraph_sizes, cudagraph_dispatcher).
        0 for the other engines: SGLang's decode graphs live inside its 1 - mem_fraction_static, and
        TensorRT-LLM's are opt-in."""
        if self.name != "vllm":
            return 0
        return _vllm_graph_sets(self.release, max_num_seqs, max_num_batched_tokens)

    def mxfp4_padding(self, gpu: GpuSpec) -> tuple[int, int]:
        """(hidden size multiple, per-partition intermediate size multiple) the MXFP4 MoE loader pads each
        expert to, as this release picks its kernel on this GPU (gpt-oss: hidden 2880, intermediate 2880).

        Read from vLLM's mxfp4.py of the 0.10.1, 0.10.2, 0.11.0, 0.12.0 and 0.14.1 wheels (later releases
        of the profile, to 0.17, are taken to pick alike). The Marlin MoE kernel needs n % 256 and k % 128:
        the hidden size to 256, the intermediate to 128 per TP rank (gpt-oss-120b: 2880 -> 3072 and 2944,
        1.35 GiB more per GPU than the hidden padding alone: the gap of the 0.10.1 log `vllm-23278-…`).
        vLLM 0.10-0.11 take Marlin on every NVIDIA GPU in a default install (the Triton kernels and
        FlashInfer were extras). From 0.12 (Triton kernels shipped, FlashInfer a dependency): FlashInfer
        on the SM100 family (both to 256); Triton on Hopper, whose create_weights pads the intermediate
        to 64 and keeps the hidden size, but whose swizzled Hopper layout takes what a 3072 hidden would by
        the 0.14.1 log `vllm-33155-…` (64.38 GiB; that 256 is read off the log, not derived); Marlin
        elsewhere (Ampere, Ada, SM110 and SM12x). Other engines and GPUs without a CUDA capability: the
        hidden size to 256 (not read from their code)."""
        if self.name != "vllm" or gpu.cuda_sm is None:
            return 256, 1
        if self.release[:2] >= (0, 12):
            if 90 <= gpu.cuda_sm < 100:
                return 256, 64
            if 100 <= gpu.cuda_sm < 110:
                return 256, 256
        return 256, 128

    def non_torch_bytes(self, gpus: int, *, pcie: bool = False) -> int:
        if gpus <= 1:
            return self.non_torch_single_gpu_bytes
        if pcie and self.non_torch_multi_gpu_pcie_bytes is not None:
            return self.non_torch_multi_gpu_pcie_bytes
        return self.non_torch_multi_gpu_bytes


@functools.lru_cache(maxsize=1024)  # a layout search asks for every candidate
def _vllm_graph_sets(release: tuple[int, ...], max_num_seqs: int, max_num_batched_tokens: int) -> int:
    """EngineProfile.cuda_graph_sets for a vLLM release."""
    if release < (0, 8):  # V0: sizes up to max_num_seqs padded as a batch is (1, 2, 4, then by 8), at most 256
        top = max_num_seqs if max_num_seqs <= 2 else 4 if max_num_seqs <= 4 else -(-max_num_seqs // 8) * 8
        return sum(1 for size in (1, 2, 4, *range(8, 257, 8)) if size <= min(top, 256))
    top = 512 if release < (0, 10) else min(2 * max_num_seqs, 512)  # 0.8-0.9 ignore max_num_seqs
    top = min(top, max_num_batched_tokens)
    if release < (0, 12):
        sizes = [size for size in (1, 2, 4, *range(8, 513, 8)) if size <= top]
    else:
        sizes = [size for size in (1, 2, 4, *range(8, 256, 8), *range(256, 513, 16)) if size <= top]
    full = sum(1 for size in sizes if size <= max_num_seqs) if release >= (0, 11) else 0
    return len(sizes) + full


@functools.lru_cache(maxsize=256)  # a layout search asks for the release of every candidate
def release_numbers(version: str) -> tuple[int, ...]:
    match = re.match(r"^v?([0-9]+)\.([0-9]+)(?:\.([0-9]+))?", version.strip())  # ASCII digits only
    if not match:
        raise ValueError(f"engine_version: {version!r} is not a version like 0.10.1")
    return tuple(int(part) for part in match.groups(default="0"))


# Reserves standing in for a profile's while the validation corpus is scored without the log they
# were read from (planner.validation.leave_one_source_out): {(engine, generation): {field: value}}.
_substitutes: dict[tuple[str, str], dict[str, Any]] = {}
_substituted: dict[tuple[int, str], EngineProfile] = {}  # one object per profile: it keys the memory caches


@contextlib.contextmanager
def substituted(overrides: dict[tuple[str, str], dict[str, Any]]) -> Iterator[None]:
    """Plan with these profile fields replaced (keyed by engine and generation), in this block."""
    previous = dict(_substitutes)
    _substitutes.clear()
    _substitutes.update(overrides)
    _substituted.clear()
    try:
        yield
    finally:
        _substitutes.clear()
        _substitutes.update(previous)
        _substituted.clear()


def engine_profile(name: str = "vllm", version: str | None = None) -> EngineProfile:
    profile = _engine_profile(name, version)
    fields = _substitutes.get((profile.name, profile.generation))
    if not fields:
        return profile
    key = (id(profile), repr(sorted(fields.items())))
    if key not in _substituted:
        _substituted[key] = dataclasses.replace(profile, **fields)
    return _substituted[key]


@functools.lru_cache(maxsize=64)
def _engine_profile(name: str = "vllm", version: str | None = None) -> EngineProfile:
    if name not in ENGINES:
        raise ValueError(f"engine: must be one of {', '.join(ENGINES)}")
    version = version or DEFAULT_VERSION[name]
    parsed = release_numbers(version)
    oldest, newest = KNOWN_RELEASES[name]
    if not oldest <= parsed[:2] <= newest:
        span = f"{oldest[0]}.{oldest[1]} to {newest[0]}.{newest[1]}"
        raise ValueError(
            f"engine_version: {name} {version} is not a release the planner has a memory profile for ({span})"
        )
    if name == "vllm":
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
    if name == "sglang":
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
    return EngineProfile(
        name="trtllm",
        version=version,
        generation=".".join(map(str, parsed[:2])),
        block_size_tokens=32,
        sampler_fp32_copies=0.0,
        non_torch_single_gpu_bytes=int(1.0 * GIB),
        non_torch_multi_gpu_bytes=int(2.0 * GIB),
        rope_cache_value_bytes=0,
        hybrid_kv_allocator=False,
        note="TensorRT-LLM: KV pool = kv_cache_free_gpu_memory_fraction x (memory free after weights, "
        "activations and runtime buffers); not validated against logs here",
        provenance=("runtime buffers 1.0 GiB on one GPU, 2.0 GiB on several: assumed, not checked against a log",),
    )


def forward_bytes_per_token(model: ModelSpec, tp: int, allreduce_copies: int = 0) -> int:
    """Transient activation bytes per token of a prefill forward (BF16): the widest MLP on this rank
    (gate/up output, activation output) plus a few residual-stream copies. Matches vLLM V0's logged
    peak for Llama-3.1-8B (3 x intermediate + 3 x hidden per token)."""
    dense = 3 * model.dense_intermediate_size // tp
    moe = 0
    if model.is_moe:
        moe = model.experts_per_token * (3 * model.moe_intermediate_size // tp + model.hidden_size)
        moe += model.n_routed_experts * FP32_BYTES // BF16_BYTES  # router logits
    # With TP the row-parallel output is all-reduced out of place: its input and result can be more
    # hidden-size copies live at the peak (EngineProfile.tp_allreduce_copies).
    allreduce = allreduce_copies * model.hidden_size if tp > 1 else 0
    return BF16_BYTES * (max(dense, moe) + 3 * model.hidden_size + allreduce)


def activation_bytes(model: ModelSpec, tp: int, profile: EngineProfile, batched_tokens: int, max_num_seqs: int) -> int:
    """Peak activation memory the engine profiles (vLLM's "torch peak increase"). Not divided by TP for the
    sampler part: logits are gathered to the full vocabulary on every rank."""
    forward = batched_tokens * forward_bytes_per_token(model, tp, profile.tp_allreduce_copies)
    sampler = int(max_num_seqs * model.vocab_size * FP32_BYTES * profile.sampler_fp32_copies)
    return max(forward, sampler)
