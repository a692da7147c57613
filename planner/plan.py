"""Plan a deployment: find the parallel layout that fits with the fewest GPUs, then the most throughput.

`plan(request)` is the library entry point behind the CLI and POST /api/v1/planner/plan; its
result's `as_contract()` is the JSON of DESIGN.md (bytes as integers).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any

from planner import __version__
from planner.hf_config import parse_config
from planner.memory import KV_BYTES, VLLM, Layout, MemoryBreakdown, memory_breakdown
from planner.params import ParamBreakdown, count_params
from planner.perf import Throughput, estimate
from planner.serving import sglang_command, trtllm_command, vllm_command
from planner.specs import GpuSpec, ModelSpec, PrecisionSpec, gpu, model, precision

KEEP_BF16_PARTS = ("attention", "dense_mlp", "shared_experts", "experts")
DEFAULT_KEEP_BF16 = {"mxfp4": frozenset({"attention", "dense_mlp", "shared_experts"})}  # MXFP4 on experts only
MAX_GPUS = 256
HF_REPOS = {
    "deepseek-v3": "deepseek-ai/DeepSeek-V3", "kimi-k2": "moonshotai/Kimi-K2-Instruct",
    "qwen3-235b-a22b": "Qwen/Qwen3-235B-A22B", "qwen3-30b-a3b": "Qwen/Qwen3-30B-A3B",
    "mixtral-8x7b": "mistralai/Mixtral-8x7B-Instruct-v0.1", "mixtral-8x22b": "mistralai/Mixtral-8x22B-Instruct-v0.1",
    "llama-4-scout": "meta-llama/Llama-4-Scout-17B-16E-Instruct",
    "llama-4-maverick": "meta-llama/Llama-4-Maverick-17B-128E-Instruct",
    "gpt-oss-120b": "openai/gpt-oss-120b", "gpt-oss-20b": "openai/gpt-oss-20b", "glm-4.5": "zai-org/GLM-4.5",
}  # fmt: skip


@dataclass(frozen=True, slots=True)
class PlanRequest:
    model: str | dict[str, Any]  # catalog key or an inline config.json
    precision: str
    gpu: str
    group_size: int | None = None
    kv_dtype: str = "bf16"
    gpus_per_node: int = 8
    max_model_len: int | None = None
    concurrency: int = 1
    tp: int | None = None
    pp: int | None = None
    ep: int | None = None
    dp: int | None = None
    gpu_memory_utilization: float = 0.9
    keep_bf16: tuple[str, ...] = ()
    model_path: str | None = None

    def validate(self) -> None:
        if self.kv_dtype not in KV_BYTES:
            raise ValueError(f"kv_dtype: must be one of {', '.join(KV_BYTES)}")
        if not 0.1 <= self.gpu_memory_utilization <= 0.99:
            raise ValueError("gpu_memory_utilization: must be between 0.1 and 0.99")
        if self.gpus_per_node not in (1, 2, 4, 8, 16):
            raise ValueError("gpus_per_node: must be 1, 2, 4, 8 or 16")
        if self.concurrency < 1:
            raise ValueError("concurrency: must be >= 1")
        if self.max_model_len is not None and self.max_model_len < 16:
            raise ValueError("max_model_len: must be >= 16")
        for name in ("tp", "pp", "ep", "dp"):
            value = getattr(self, name)
            if value is not None and (value < 1 or value & (value - 1)):
                raise ValueError(f"{name}: must be a power of two >= 1")
        if self.tp is not None and self.tp > self.gpus_per_node:
            raise ValueError("tp: tensor parallelism stays inside a node (tp <= gpus_per_node)")
        for part in self.keep_bf16:
            if part not in KEEP_BF16_PARTS:
                raise ValueError(f"keep_bf16: unknown part {part!r}; known: {', '.join(KEEP_BF16_PARTS)}")


@dataclass(frozen=True, slots=True)
class Candidate:
    layout: Layout
    memory: MemoryBreakdown
    max_concurrency: int
    fits: bool
    reason: str
    throughput: Throughput | None = None


@dataclass(frozen=True, slots=True)
class PlanResult:
    request: PlanRequest
    model: ModelSpec
    precision: PrecisionSpec
    gpu: GpuSpec
    params: ParamBreakdown
    max_model_len: int
    chosen: Candidate
    throughput: Throughput
    serving: dict[str, str]
    notes: tuple[str, ...] = field(default=())

    def as_contract(self) -> dict[str, Any]:
        memory, layout = self.chosen.memory, self.chosen.layout
        return {
            "model": self.model.key,
            "precision": self.precision.key,
            "params": {"total": self.params.total, "active_per_token": self.params.active_per_token},
            "weights": {"total_bytes": memory.weights_total_bytes, "per_gpu_bytes": memory.weights_per_gpu_bytes},
            "kv_cache": {
                "bytes_per_token": memory.kv_bytes_per_token,
                "bytes_per_token_per_gpu": memory.kv_bytes_per_token_per_gpu,
                "capacity_tokens": memory.kv_capacity_tokens,
            },
            "parallel": {
                "tp": layout.tp,
                "pp": layout.pp,
                "ep": layout.ep,
                "dp": layout.dp,
                "gpus": layout.gpus,
                "nodes": -(-layout.gpus // self.request.gpus_per_node),
            },
            "memory_per_gpu": {
                "weights": memory.weights_per_gpu_bytes,
                "kv_cache": max(memory.kv_pool_bytes, 0),
                "activations": memory.activations_bytes,
                "overhead": memory.overhead_bytes,
                "total": memory.total_bytes,
                "capacity": memory.capacity_bytes,
            },
            "fits": self.chosen.fits,
            "max_concurrency": self.chosen.max_concurrency,
            "throughput": {
                "decode_tokens_per_s": round(self.throughput.decode_tokens_per_s, 1),
                "tpot_ms": round(self.throughput.tpot_ms, 2),
                "ttft_ms": round(self.throughput.ttft_ms, 1),
            },
            "serving": self.serving,
            "notes": list(self.notes),
            "planner_version": __version__,
        }


def _powers(limit: int) -> list[int]:
    values, value = [], 1
    while value <= limit:
        values.append(value)
        value *= 2
    return values


def candidate_layouts(request: PlanRequest, spec: ModelSpec) -> list[Layout]:
    layouts = []
    for tp in [request.tp] if request.tp else _powers(request.gpus_per_node):
        for pp in [request.pp] if request.pp else _powers(16):
            if pp > 1 and tp < request.gpus_per_node and request.pp is None:
                continue  # PP carries the cross-node split: fill a node with TP first
            for dp in [request.dp] if request.dp else _powers(32):
                if tp * pp * dp > MAX_GPUS or pp > spec.num_layers:
                    continue
                ep_options = [1] if not spec.is_moe else sorted({1, tp, tp * dp})
                for ep in [request.ep] if request.ep else ep_options:
                    layout = Layout(tp=tp, pp=pp, ep=ep, dp=dp)
                    try:
                        layout.validate(spec)
                    except ValueError:
                        continue
                    if ep > request.gpus_per_node and ep > tp:
                        continue  # EP stays inside the NVLink domain
                    layouts.append(layout)
    return layouts


def _resolve_model(request: PlanRequest) -> ModelSpec:
    if isinstance(request.model, dict):
        return parse_config(request.model)
    return model(request.model)


def plan(request: PlanRequest) -> PlanResult:
    request.validate()
    spec = _resolve_model(request)
    scheme = precision(request.precision, request.group_size)
    device = gpu(request.gpu)
    params = count_params(spec)
    max_len = request.max_model_len or spec.max_position_embeddings or 8192
    keep = frozenset(request.keep_bf16) | DEFAULT_KEEP_BF16.get(scheme.key, frozenset())
    evaluate = functools.partial(_evaluate, spec, params, scheme, device, request, max_len, keep)
    layouts = candidate_layouts(request, spec)
    if not layouts:
        raise ValueError("tp/pp/ep/dp: no valid layout for these fixed values")
    # Evaluate by growing GPU count and stop at the first count where something fits: the
    # objective is fewest GPUs first, so larger layouts cannot win.
    candidates: list[Candidate] = []
    for count in sorted({layout.gpus for layout in layouts}):
        candidates += [evaluate(layout) for layout in layouts if layout.gpus == count]
        if any(c.fits for c in candidates):
            break
    fitting = [c for c in candidates if c.fits]
    notes = [
        "Memory follows vLLM V1's convention: pool = HBM x gpu_memory_utilization - weights - peak activations "
        f"(prefill chunk {VLLM.prefill_chunk_tokens} tokens) - CUDA context, NCCL and CUDA-graph reserves; "
        "SGLang and TensorRT-LLM reserve differently.",
        f"Weights at {scheme.bits_per_weight:.3f} bits/weight ({scheme.key}); embeddings, lm_head, router and norms "
        f"stay BF16{'; also BF16: ' + ', '.join(sorted(keep)) if keep else ''}.",
    ]
    if spec.max_position_embeddings and max_len > spec.max_position_embeddings:
        notes.append(
            f"max_model_len {max_len} exceeds the model's native {spec.max_position_embeddings} positions: "
            "serving it needs RoPE scaling (e.g. YaRN) configured in the engine."
        )
    if spec.attention == "mla":
        notes.append("MLA: every TP rank holds the whole latent KV cache (it is not divided by TP).")
    if fitting:
        for candidate in fitting:
            object.__setattr__(
                candidate, "throughput", _throughput(spec, params, scheme, device, request, max_len, candidate)
            )
        chosen = min(fitting, key=lambda c: (c.layout.gpus, -c.throughput.decode_tokens_per_s))  # type: ignore[union-attr]
        notes.append(
            f"Chosen: tp={chosen.layout.tp} pp={chosen.layout.pp} ep={chosen.layout.ep} dp={chosen.layout.dp} "
            f"({chosen.layout.gpus} GPUs): objective = fewest GPUs that fit, then highest decode throughput; "
            f"{len(fitting)} of the {len(candidates)} layouts evaluated fit."
        )
    else:
        chosen = max(candidates, key=lambda c: (c.memory.kv_pool_bytes, -c.layout.gpus))
        notes.append(f"No layout of up to {MAX_GPUS} GPUs fits; showing the one closest to fitting.")
    rejected = sorted((c for c in candidates if not c.fits), key=lambda c: c.layout.gpus)[:5]
    for candidate in rejected:
        l = candidate.layout  # noqa: E741
        notes.append(f"Rejected tp={l.tp} pp={l.pp} ep={l.ep} dp={l.dp}: {candidate.reason}")
    throughput = chosen.throughput or _throughput(spec, params, scheme, device, request, max_len, chosen)
    notes.append(
        f"Throughput: roofline with {int(0.7 * 100)}% HBM / 50% compute efficiency plus launch and collective "
        f"latency, at {throughput.batch} sequences per replica mid-way through {max_len}-token contexts; "
        f"batch-1 figure {throughput.batch1_tokens_per_s_upper_bound:.0f} tokens/s is an upper bound, not an expectation."
    )
    path = request.model_path or (HF_REPOS.get(spec.key, spec.key))
    utilization, seqs = request.gpu_memory_utilization, max(request.concurrency, 1)
    serving = {
        "vllm": vllm_command(
            path,
            spec,
            scheme,
            chosen.layout,
            kv_dtype=request.kv_dtype,
            max_model_len=max_len,
            gpu_memory_utilization=utilization,
            max_num_seqs=seqs,
        ),
        "sglang": sglang_command(
            path,
            spec,
            scheme,
            chosen.layout,
            kv_dtype=request.kv_dtype,
            max_model_len=max_len,
            gpu_memory_utilization=utilization,
            max_num_seqs=seqs,
        ),
        "tensorrt_llm": trtllm_command(
            path, chosen.layout, max_model_len=max_len, gpu_memory_utilization=utilization, max_num_seqs=seqs
        ),
    }
    return PlanResult(
        request=request,
        model=spec,
        precision=scheme,
        gpu=device,
        params=params,
        max_model_len=max_len,
        chosen=chosen,
        throughput=throughput,
        serving=serving,
        notes=tuple(notes),
    )


def _evaluate(
    spec: ModelSpec,
    params: ParamBreakdown,
    scheme: PrecisionSpec,
    device: GpuSpec,
    request: PlanRequest,
    max_len: int,
    keep: frozenset[str],
    layout: Layout,
) -> Candidate:
    memory = memory_breakdown(
        model=spec,
        params=params,
        precision=scheme,
        gpu=device,
        layout=layout,
        kv_dtype=request.kv_dtype,
        max_model_len=max_len,
        gpu_memory_utilization=request.gpu_memory_utilization,
        keep_bf16=keep,
    )
    max_concurrency = memory.sequences_per_replica * layout.dp
    gib = 1 << 30
    if memory.kv_pool_bytes <= 0:
        reason = (f"weights {memory.weights_per_gpu_bytes / gib:.1f} GiB + reserves exceed "
                  f"{memory.capacity_bytes / gib:.1f} GiB per GPU")  # fmt: skip
    elif memory.sequences_per_replica < 1:
        reason = f"KV pool {memory.kv_pool_bytes / gib:.1f} GiB cannot hold one {max_len}-token sequence per replica"
    elif max_concurrency < request.concurrency:
        reason = f"holds {max_concurrency} full-length sequences, fewer than the {request.concurrency} requested"
    else:
        reason = ""
    return Candidate(layout=layout, memory=memory, max_concurrency=max_concurrency, fits=not reason, reason=reason)


def _throughput(
    spec: ModelSpec,
    params: ParamBreakdown,
    scheme: PrecisionSpec,
    device: GpuSpec,
    request: PlanRequest,
    max_len: int,
    candidate: Candidate,
) -> Throughput:
    return estimate(
        model=spec,
        params=params,
        precision=scheme,
        gpu=device,
        layout=candidate.layout,
        concurrency=request.concurrency,
        max_model_len=max_len,
        kv_bytes_per_token_per_gpu=candidate.memory.kv_bytes_per_token_per_gpu,
    )
