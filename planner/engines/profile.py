"""An engine generation's memory accounting (EngineProfile) and the release numbers every engine's
versions are compared by. Each engine's own profiles live in its module (planner/engines/vllm.py, …)."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from planner.specs import GpuSpec

GIB = 1 << 30
POOL_OF_CAPACITY = "capacity"
POOL_OF_STATIC_FRACTION = "static_fraction"
POOL_OF_FREE = "free"
FP32_BYTES = 4
BF16_BYTES = 2


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
    # How the KV pool is sized from gpu_memory_utilization (planner/memory.py): POOL_OF_CAPACITY (vLLM:
    # total x utilization less weights, activations and reserves), POOL_OF_STATIC_FRACTION (SGLang: the
    # static fraction holds weights and KV, activations live outside it) or POOL_OF_FREE (TensorRT-LLM:
    # the fraction of what is free after weights, activations and reserves).
    kv_pool: str = POOL_OF_CAPACITY
    # (max_num_batched_tokens, max_num_seqs) the engine defaults to; None: vLLM's, which depend on the
    # GPU and the generation (defaults()).
    default_batch: tuple[int, int] | None = None
    # The oldest release line with a profile ("0.5") when the asked version is older than every profile: it
    # is planned with that profile's accounting, says so, and its intervals are wide (planner.intervals).
    predates_profiles: str = ""
    # What the team's own startup logs say the engine keeps outside its pool less than this profile does (bytes
    # per GPU; negative: more), planner.intervals.TeamEvidence: taken off the non-torch reserve, then off the
    # activations, neither below zero (planner.memory.memory_breakdown).
    reserve_correction_bytes: int = 0  # of one-GPU replicas (the team's logs of such)
    reserve_correction_multi_gpu_bytes: int = 0  # of replicas over several GPUs (the team's logs of such)

    def defaults(self, gpu: GpuSpec, max_model_len: int) -> tuple[int, int]:
        """(max_num_batched_tokens, max_num_seqs) the engine picks for `serve` when the user does not."""
        if self.default_batch is not None:
            return self.default_batch
        if self.name == "vllm" and self.generation == "v0":
            # V0 prefills whole prompts unless the context exceeds 32k (then chunks of 512 by default).
            return (max(max_model_len, 2048) if max_model_len <= 32768 else 512), 256
        if self.name == "vllm":
            large = gpu.memory_bytes >= 70 * GIB and "a100" not in gpu.key and "a800" not in gpu.key
            return (8192, 1024) if large else (2048, 256)
        if self.default_batch is None:
            raise ValueError(f"engine: the {self.name} profile states no default batch")
        return self.default_batch

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
