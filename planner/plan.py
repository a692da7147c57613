"""Plan a deployment: find the parallel layout that fits with the fewest GPUs, then the most throughput.

`plan(request)` is the library entry point behind the CLI and POST /api/v1/planner/plan; its
result's `as_contract()` is the JSON of docs/contracts.md (bytes as integers).
"""

from __future__ import annotations

import dataclasses
import functools
import statistics
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from planner import __version__
from planner.efficiency import eager_prefill_until
from planner.engines import CUDA_GRAPH_KIB_PER_KERNEL, ENGINES, EngineProfile, engine_profile
from planner.hf_config import parse_config
from planner.intervals import TeamEvidence, corrected_profile
from planner.layouts import MAX_DP, MAX_GPUS, candidate_layouts, no_layout
from planner.measured import MeasuredEvidence, corrections
from planner.memory import (
    KV_BYTES,
    PCIE_CLASS_GB_PER_S,
    Layout,
    MemoryBreakdown,
    memory_breakdown,
    weights_total_bytes,
)
from planner.params import ParamBreakdown, count_params
from planner.perf import ARRIVALS, ROCM_GPUS, Throughput, Workload, engine_settings, estimate, stage_kernels
from planner.serving import Launch, serving_argv, serving_commands
from planner.specs import GpuSpec, ModelSpec, PrecisionSpec, gpu, model, precision

if TYPE_CHECKING:
    from planner.calibrate.profile import CalibrationProfile

KEEP_BF16_PARTS = ("attention", "dense_mlp", "shared_experts", "experts")
DEFAULT_KEEP_BF16 = {"mxfp4": frozenset({"attention", "dense_mlp", "shared_experts"})}  # MXFP4 on experts only
AUTO_PRECISION = "auto"  # the checkpoint's own (from quantization_config), else BF16


@dataclass(frozen=True, slots=True)
class PlanRequest:
    model: str | dict[str, Any]  # catalog key or an inline config.json
    precision: str  # a catalog precision or "auto"
    gpu: str | GpuSpec  # catalog key, or a spec read with --gpu-spec
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
    engine: str = "vllm"
    engine_version: str | None = None
    max_num_batched_tokens: int | None = None
    max_num_seqs: int | None = None  # default: the concurrency asked for (the command sets it)
    scheduler_recv_interval: int | None = None  # SGLang --scheduler-recv-interval (default 1)
    # Workload for the throughput estimate (defaults: 1024-token prompts, 1024 generated tokens).
    input_len: int | None = None
    output_len: int | None = None
    cached_prefix_len: int = 0  # leading prompt tokens already in the engine's prefix cache
    calibration: CalibrationProfile | None = None  # measured efficiencies (planner.calibrate)
    arrival: str = "burst"  # how the requests arrive (planner.perf.ARRIVALS)
    request_rate: float | None = None  # requests/s over all replicas, with arrival "poisson"
    range_ratio: float = 1.0  # each request's lengths drawn from [range_ratio x len, len] (planner.perf.Workload)
    num_prompts: int | None = None  # a finite benchmark run's length (planner.perf.Workload); None: endless
    # The team's own startup logs of the cluster planned for (planner.intervals.TeamEvidence): with enough of
    # them, of this GPU, engine and release line, they set the reserve and the memory figures' intervals.
    evidence: TeamEvidence | None = None
    # The team's canary and fleet measurements of TPOT and TTFT on that cluster (planner.measured): with enough of
    # them, of this GPU, engine, release line and replica shape, they correct those figures and their intervals.
    measured: MeasuredEvidence | None = None

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
        for name in ("tp", "pp", "ep"):
            value = getattr(self, name)
            if value is not None and (value < 1 or value & (value - 1)):
                raise ValueError(f"{name}: must be a power of two >= 1")
        if self.dp is not None and self.dp < 1:  # replicas: any number (3 is as good as 4)
            raise ValueError("dp: must be >= 1")
        if self.tp is not None and self.tp > self.gpus_per_node:
            raise ValueError("tp: tensor parallelism stays inside a node (tp <= gpus_per_node)")
        if self.engine not in ENGINES:
            raise ValueError(f"engine: must be one of {', '.join(ENGINES)}")
        engine_profile(self.engine, self.engine_version)  # an unknown release is refused, naming the field
        for name in ("max_num_batched_tokens", "max_num_seqs"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ValueError(f"{name}: must be >= 1")
        for name in ("input_len", "output_len"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ValueError(f"{name}: must be >= 1")
        if self.cached_prefix_len < 0:
            raise ValueError("cached_prefix_len: must be >= 0")
        if self.arrival not in ARRIVALS:
            raise ValueError(f"arrival: must be one of {', '.join(ARRIVALS)}")
        if self.arrival == "poisson" and not (self.request_rate and self.request_rate > 0):
            raise ValueError("request_rate: a Poisson stream needs its rate, in requests/s (> 0)")
        if self.arrival != "poisson" and self.request_rate is not None:
            raise ValueError("request_rate: only with arrival poisson (a closed loop is set by its concurrency)")
        if isinstance(self.range_ratio, bool) or not (
            isinstance(self.range_ratio, int | float) and 0 <= self.range_ratio <= 1
        ):
            raise ValueError(
                "range_ratio: must be from 0 to 1 (lengths drawn from [range_ratio x len, len]; 1: fixed; "
                "0: sglang.bench_serving's default)"
            )
        if self.num_prompts is not None:
            if isinstance(self.num_prompts, bool) or not isinstance(self.num_prompts, int) or self.num_prompts < 1:
                raise ValueError("num_prompts: must be an integer >= 1 (the requests of a finite benchmark run)")
            if self.arrival == "poisson":
                raise ValueError(
                    "num_prompts: a finite run's start-up is planned for a closed loop (arrival burst or spread), "
                    "not a Poisson stream"
                )
        engine_settings(self.engine, self.max_num_batched_tokens, self.scheduler_recv_interval)
        if self.calibration is not None and self.calibration.gpu_key not in (None, self.gpu):
            raise ValueError(f"calibration: profile was measured on {self.calibration.gpu_key}, not {self.gpu}")
        for part in self.keep_bf16:
            if part not in KEEP_BF16_PARTS:
                raise ValueError(f"keep_bf16: unknown part {part!r}; known: {', '.join(KEEP_BF16_PARTS)}")


def check_cached_prefix(cached_prefix_len: int, input_len: int | None) -> None:
    """What the CLI and the plan APIs hold a user's cached prefix to: 0 <= cached < input_len, and an
    input_len to be a prefix of. (The library itself caps the prefix at the prompt less one token: an
    engine recomputes at least the last one.)"""
    if input_len is not None and input_len < 1:
        raise ValueError("input_len: must be >= 1")
    if cached_prefix_len < 0:
        raise ValueError("cached_prefix_len: must be >= 0")
    if cached_prefix_len and input_len is None:
        raise ValueError("cached_prefix_len: needs input_len (the prompt it is a prefix of)")
    if input_len is not None and cached_prefix_len >= input_len:
        raise ValueError(f"cached_prefix_len: must be below input_len ({input_len})")


def _check_served(setup: PlanSetup) -> None:
    """A scheme no kernel of the engine runs is refused, naming `precision`: a plan would give a launch
    command that does not start. What the weights would take is stated (the memory model knows them)."""
    scheme, engine = setup.precision, setup.request.engine
    if scheme.key == "mxfp4" and setup.engine.name == "vllm":
        # vLLM's MXFP4 MoE method (mxfp4.py): from 0.10.1 (gpt-oss), on compute capability 8.0 and newer.
        if setup.engine.release < (0, 10, 1):
            raise ValueError(
                f"engine_version: vLLM {setup.engine.version} has no MXFP4 MoE kernel (it came with 0.10.1); "
                "plan a later release, or another precision"
            )
        if setup.gpu.cuda_sm is not None and setup.gpu.cuda_sm < 80:
            raise ValueError(
                f"precision: vLLM runs mxfp4 on compute capability 8.0 and newer; {setup.gpu.name} is "
                f"{setup.gpu.cuda_sm / 10:.1f}"
            )
    if scheme.engines is None or engine in scheme.engines:
        return
    weights = weights_total_bytes(setup.params, setup.model, scheme, setup.keep_bf16)
    served = ", ".join(scheme.engines) if scheme.engines else "none of " + ", ".join(ENGINES)
    raise ValueError(
        f"precision: {scheme.key} cannot be served by {engine} (engines with a kernel for it: {served}): "
        f"{scheme.note}. Its weights would take {weights / 1e9:.2f} GB ({scheme.bits_per_weight:.3f} "
        "bits/weight); plan the derivative as the engine will run it, or make a 4-bit one (w4a16)"
    )


def _check_fits_context(request: PlanRequest, max_model_len: int) -> None:
    """An engine refuses a request whose prompt plus generated tokens exceed max_model_len."""
    prompt, output = request.input_len, request.output_len
    if prompt is not None and prompt >= max_model_len:
        raise ValueError(f"input_len: a {prompt}-token prompt does not fit max_model_len {max_model_len}")
    if prompt is not None and output is not None and prompt + output > max_model_len:
        raise ValueError(
            f"output_len: {prompt} prompt + {output} generated tokens exceed max_model_len {max_model_len}"
        )


@dataclass(frozen=True, slots=True)
class Candidate:
    layout: Layout
    memory: MemoryBreakdown
    max_concurrency: int
    fits: bool
    reason: str
    throughput: Throughput | None = None
    cuda_graph_sets: int = 0  # graph sets the engine captures at start-up (EngineProfile.cuda_graph_sets)
    cuda_graph_bytes: int = 0  # what they take per GPU, after the KV cache is allocated
    cuda_graphs_fit: bool = True  # whether they fit at the least figure a log gives (else the engine stops)

    @property
    def starts(self) -> bool:
        """Whether the engine starts at all: one max_model_len sequence per replica after weights and reserves
        (vLLM refuses to start otherwise), and room for its CUDA graphs."""
        return self.memory.sequences_per_replica >= 1 and self.cuda_graphs_fit


@dataclass(frozen=True, slots=True)
class PlanSetup:
    """The request resolved against the catalogs: what every candidate layout is evaluated with."""

    request: PlanRequest
    model: ModelSpec
    precision: PrecisionSpec
    gpu: GpuSpec
    engine: EngineProfile
    params: ParamBreakdown
    max_model_len: int
    keep_bf16: frozenset[str]  # parts kept in BF16 (asked, the checkpoint's own, the scheme's default)

    @classmethod
    def resolve(cls, request: PlanRequest) -> PlanSetup:
        spec = _resolve_model(request)
        scheme, keep = _resolve_precision(request, spec)
        device = request.gpu if isinstance(request.gpu, GpuSpec) else gpu(request.gpu)
        engine = engine_profile(request.engine, request.engine_version)
        evidence = request.evidence
        if evidence is not None and evidence.applies(engine, device.key):
            engine = corrected_profile(engine, evidence)  # ahead of the catalog's, per replica shape
        return cls(
            request=request,
            model=spec,
            precision=scheme,
            gpu=device,
            engine=engine,
            params=count_params(spec),
            max_model_len=request.max_model_len or spec.max_position_embeddings or 8192,
            keep_bf16=keep,
        )


@dataclass(frozen=True, slots=True)
class PlanResult(PlanSetup):
    chosen: Candidate
    throughput: Throughput
    serving: dict[str, str]
    notes: tuple[str, ...] = field(default=())
    # Each engine's launch as an argv with its {model} (and {python}) slot: what a launcher runs, where
    # `serving` is the same command for people to read (planner/serving.py).
    serving_argv: dict[str, list[str]] = field(default_factory=dict)

    def fit_margin(self) -> dict[str, int]:
        """How far the plan is from the edge: positive is room to spare, negative is what it lacks.

        `kv_bytes_per_gpu`: the KV pool less what the requested concurrency needs at max_model_len
        (at least one sequence per replica, as the engine needs to start); `sequences`: full-length
        sequences held less those requested."""
        memory, layout = self.chosen.memory, self.chosen.layout
        running = running_sequences(self.request, layout)
        needed = max(1, -(-running // layout.dp)) * memory.kv_bytes_per_sequence_per_gpu
        return {
            "kv_bytes_per_gpu": memory.kv_pool_bytes - needed,
            "sequences": self.chosen.max_concurrency - running,
        }

    def as_contract(self) -> dict[str, Any]:
        from planner.intervals import judge  # the plan's intervals and verdict (issue 47)

        memory, layout = self.chosen.memory, self.chosen.layout
        judged = judge(self)
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
            # Whether the engine starts at all (Candidate.starts). `fits` also asks for the concurrency.
            "starts": self.chosen.starts,
            # fits / tight / does_not_fit: whether it fits at the pessimistic end of the KV interval too.
            "verdict": judged.verdict,
            # Why the chosen layout does not fit, as a sentence ("" when it fits).
            "fit_reason": self.chosen.reason,
            "max_concurrency": self.chosen.max_concurrency,
            "fit_margin": self.fit_margin(),
            "throughput": {
                "decode_tokens_per_s": round(self.throughput.decode_tokens_per_s, 1),
                "tpot_ms": round(self.throughput.tpot_ms, 2),
                "ttft_ms": round(self.throughput.ttft_ms, 1),
            },
            "serving": self.serving,
            "serving_argv": {name: list(argv) for name, argv in self.serving_argv.items()},
            "notes": [*self.notes, *judged.notes],
            # Each figure's 80% interval from the planner's held-out residuals (planner/intervals.py).
            "intervals": judged.intervals,
            "throughput_estimate": self.throughput.as_estimate(),
            "planner_version": __version__,
            "gpu": {"key": self.gpu.key, "name": self.gpu.name, "total_memory_bytes": self.gpu.memory_bytes},
            "engine": {
                "name": self.engine.name,
                "version": self.engine.version,
                "max_num_batched_tokens": memory.max_num_batched_tokens,
                "max_num_seqs": memory.max_num_seqs,
                "block_size": self.engine.block_size_tokens,
                "memory_per_gpu": dict(memory.engine_figures),
            },
        }


def _replicas_share_note(engine: EngineProfile, spec: ModelSpec, layout: Layout) -> str | None:
    """Where the printed command's data parallelism shards weights across the replicas, which the memory
    model (each replica a whole copy over its TP ranks) does not: stated, as the plan is conservative there."""
    if layout.dp <= 1:
        return None
    if engine.name == "vllm" and spec.is_moe and layout.ep == 1:
        what = "vLLM's --data-parallel-size without --enable-expert-parallel shards the experts over all tp x dp GPUs"
    elif engine.name == "sglang":
        what = "SGLang's DP attention (--tp tp x dp --dp dp) shards the MLP and experts over all tp x dp GPUs"
    else:
        return None
    return (
        f"Data parallelism: {what}; this plan sizes each of the {layout.dp} replicas as a whole copy over its "
        f"{layout.tp} TP GPUs, so its weights per GPU are an upper bound and its throughput treats the replicas "
        "as independent."
    )


def _cuda_graph_note(chosen: Candidate) -> str:
    """What the engine's CUDA graphs take, and from where."""
    gib = 1 << 30
    memory = chosen.memory
    headroom = graph_headroom_bytes(memory)
    return (
        f"CUDA graphs: {memory.engine.name} {memory.engine.version} captures {chosen.cuda_graph_sets} graph sets "
        f"for max_num_seqs {memory.max_num_seqs} after allocating the KV cache, about "
        f"{chosen.cuda_graph_bytes / gib:.2f} GiB per GPU ({CUDA_GRAPH_KIB_PER_NODE:.0f} KiB per kernel node: the "
        f"median of {len(CUDA_GRAPH_KIB_PER_KERNEL)} public startup logs, which range from "
        f"{min(CUDA_GRAPH_KIB_PER_KERNEL.values()):g} to {max(CUDA_GRAPH_KIB_PER_KERNEL.values()):g}) out of the "
        f"{headroom / gib:.1f} GiB left outside gpu_memory_utilization and by the profile run"
        + (
            ": at the median figure they would not fit, and the capture may run out of memory (the verdict "
            "takes the least figure); lower gpu_memory_utilization or max_num_seqs to be sure."
            if chosen.cuda_graph_bytes > headroom
            else "."
        )
    )


def _loaded_note(memory: MemoryBreakdown, spec: ModelSpec) -> str:
    """What loading the model takes on one GPU as the engine counts it, and why it is more than the weights."""
    gib = 1 << 30
    engine = memory.engine
    parts = [f"weights {memory.weights_per_gpu_bytes / gib:.2f} GiB"]
    if memory.rope_cache_bytes:
        positions = spec.rope_positions or spec.max_position_embeddings
        parts.append(
            f"the rope's cos/sin cache {memory.rope_cache_bytes / gib:.2f} GiB ({positions:,} positions, "
            f"{'FP32' if engine.rope_cache_value_bytes == 4 else 'in the model dtype'})"
        )
    elif engine.rope_cache_value_bytes and not spec.max_position_embeddings:
        parts.append("no rope cache counted (the config gives no max_position_embeddings)")
    if memory.allocator_slack_bytes:
        parts.append(
            f"PyTorch's caching-allocator rounding of the weight tensors {memory.allocator_slack_bytes / gib:.2f} GiB "
            f"({engine.name} sizes its pool from the free memory after loading, so it counts)"
        )
    return (
        f"Loading takes {memory.loaded_bytes / gib:.2f} GiB per GPU as {engine.name} counts it: "
        + " + ".join(parts)
        + (
            "; all but the weights are in memory_per_gpu.overhead."
            if memory.loaded_bytes > memory.weights_per_gpu_bytes
            else "."
        )
    )


def _serving_path(request: PlanRequest, spec: ModelSpec) -> str:
    """What the launch commands serve: the given path, the config's own name, the catalog's repository."""
    if request.model_path:
        return request.model_path
    if isinstance(request.model, dict) and isinstance(request.model.get("_name_or_path"), str):
        return str(request.model["_name_or_path"])
    return spec.hf_repo or ("MODEL_PATH" if isinstance(request.model, dict) else spec.key)


def _resolve_model(request: PlanRequest) -> ModelSpec:
    if isinstance(request.model, dict):
        return parse_config(request.model)
    return model(request.model)


def _resolve_precision(request: PlanRequest, spec: ModelSpec) -> tuple[PrecisionSpec, frozenset[str]]:
    """The weight scheme and the parts kept in BF16; "auto" takes the checkpoint's own quantization."""
    key = request.precision
    keep = frozenset(request.keep_bf16)
    group_size = request.group_size
    if key == AUTO_PRECISION:
        key = spec.checkpoint_precision or "bf16"
    if key == spec.checkpoint_precision:  # the checkpoint served as it is: its ignore list holds
        keep |= frozenset(spec.checkpoint_keep_bf16)
        if key in ("w4a16", "w4a8", "w2a16"):
            group_size = group_size or spec.checkpoint_group_size
    scheme = precision(key, group_size)
    if spec.checkpoint_zero_point and scheme.key == spec.checkpoint_precision and not scheme.zero_bits:
        scheme = dataclasses.replace(scheme, zero_bits=scheme.scale_bits // 4)  # a 4-bit zero per group
    return scheme, keep | DEFAULT_KEEP_BF16.get(scheme.key, frozenset())


def plan(request: PlanRequest) -> PlanResult:
    """The serving plan of `request`: every candidate layout evaluated by growing GPU count, the
    fewest GPUs that fit chosen on decode speed (or, when none fits, the one closest to fitting), its
    full throughput estimate, the notes that explain both, and the launch command."""
    request.validate()
    setup = PlanSetup.resolve(request)
    _check_served(setup)
    _check_fits_context(request, setup.max_model_len)
    candidates = _candidates(request, setup)
    choice = _choose(request, setup, candidates)
    chosen = choice.chosen
    # Candidates were ranked on the decode step alone; the chosen one gets the full estimate.
    throughput = _throughput(setup, chosen)
    # The team's canary measurements correct the chosen layout's estimate (its replica shape picks them); the
    # note above states the estimate itself, theirs what they made of it.
    measured = corrections(request.measured, setup.engine, setup.gpu.key, chosen.layout.tp * chosen.layout.pp)
    notes = [
        *_setup_notes(setup),
        choice.note,
        *_chosen_notes(setup, chosen, candidates),
        _throughput_note(throughput),
        *measured.notes,
    ]
    throughput = measured.apply(throughput)
    launch = Launch(
        _serving_path(request, setup.model),
        setup.model,
        setup.precision,
        chosen.layout,
        max_model_len=setup.max_model_len,
        gpu_memory_utilization=request.gpu_memory_utilization,
        kv_dtype=request.kv_dtype,
        # What the memory model reserved for: the asked --max-num-seqs, else the concurrency.
        max_num_seqs=chosen.memory.max_num_seqs,
        scheduler_recv_interval=request.scheduler_recv_interval or 1,
        max_num_batched_tokens=chosen.memory.max_num_batched_tokens,
    )
    setup_fields = {f.name: getattr(setup, f.name) for f in dataclasses.fields(PlanSetup)}
    return PlanResult(
        **setup_fields,
        chosen=chosen,
        throughput=throughput,
        serving=serving_commands(launch),
        notes=tuple(notes),
        serving_argv=serving_argv(launch),
    )


def _candidates(request: PlanRequest, setup: PlanSetup) -> list[Candidate]:
    """The layouts evaluated: by growing GPU count, stopping at the first count where something fits
    (the objective is fewest GPUs first, so larger layouts cannot win), and, where the request leaves
    dp open, the fitting ones with fewer replicas."""
    evaluate = functools.partial(_evaluate, setup)
    layouts = candidate_layouts(request, setup.model)
    if not layouts:
        raise ValueError(no_layout(request, setup.model))
    by_count: dict[int, list[Layout]] = {}
    for layout in layouts:
        by_count.setdefault(layout.gpus, []).append(layout)
    candidates: list[Candidate] = []
    for count in sorted(by_count):
        candidates += [evaluate(layout) for layout in by_count[count]]
        if any(c.fits for c in candidates):
            break
    if request.dp is None:
        candidates += _fewer_replicas(evaluate, candidates, request.concurrency)
    return candidates


@dataclass(frozen=True, slots=True)
class _Choice:
    chosen: Candidate
    note: str  # why it was chosen (or, when nothing fits, why nothing does)


def _choose(request: PlanRequest, setup: PlanSetup, candidates: list[Candidate]) -> _Choice:
    """The fewest GPUs that fit, the fastest of those on the decode step; when none fits, the layout
    with the largest KV pool (fewest GPUs on a tie), to say how far it is from fitting."""
    fitting = [c for c in candidates if c.fits]
    if not fitting:
        chosen = max(candidates, key=lambda c: (c.memory.kv_pool_bytes, -c.layout.gpus))
        return _Choice(chosen, _no_fit_note(request, candidates, chosen))
    fewest = min(c.layout.gpus for c in fitting)  # only the fewest GPUs can win: rank those on speed
    ranked = [
        dataclasses.replace(c, throughput=_throughput(setup, c, quick=True)) for c in fitting if c.layout.gpus == fewest
    ]
    chosen = min(ranked, key=_fewest_gpus_then_fastest)
    return _Choice(
        chosen,
        f"Chosen: tp={chosen.layout.tp} pp={chosen.layout.pp} ep={chosen.layout.ep} dp={chosen.layout.dp} "
        f"({chosen.layout.gpus} GPUs): objective = fewest GPUs that fit, then highest decode throughput; "
        f"{len(fitting)} of the {len(candidates)} layouts evaluated fit.",
    )


def _setup_notes(setup: PlanSetup) -> list[str]:
    """What the plan rests on whatever the layout: the engine's memory profile, the weights' precision,
    the profile's weaker reserves, and the model's context and attention."""
    spec, scheme, device, engine = setup.model, setup.precision, setup.gpu, setup.engine
    max_len, keep = setup.max_model_len, setup.keep_bf16
    notes = [
        *spec.notes,
        f"Memory follows {engine.name} {engine.version}: {engine.note}. GPU total is what CUDA reports "
        f"({device.memory_bytes / (1 << 30):.2f} GiB on {device.name}).",
        f"Weights at {scheme.bits_per_weight:.3f} bits/weight ({scheme.key}); embeddings, lm_head, router and norms "
        f"stay BF16{'; also BF16: ' + ', '.join(sorted(keep)) if keep else ''}.",
    ]
    if engine.predates_profiles:
        notes.append(
            f"{engine.name} {engine.version} is older than every memory profile ({engine.predates_profiles} and "
            f"later): planned with the oldest ({engine.name} {engine.predates_profiles}, {engine.generation}), whose "
            "reserves it may not share; every interval is widened (no held-out run of a release this old)."
        )
    # The PCIe reserve's provenance only where the GPUs have no NVLink (it is not read otherwise).
    pcie = device.nvlink_gb_per_s < PCIE_CLASS_GB_PER_S
    provenance = [line for line in engine.provenance if pcie or "over PCIe" not in line]
    if provenance:
        notes.append(
            f"Reserves of the {engine.name} {engine.version} profile weaker than its code: "
            + "; ".join(provenance)
            + "."
        )
    if spec.max_position_embeddings and max_len > spec.max_position_embeddings:
        notes.append(
            f"max_model_len {max_len} exceeds the model's native {spec.max_position_embeddings} positions: "
            "serving it needs RoPE scaling (e.g. YaRN) configured in the engine."
        )
    if spec.attention == "mla":
        notes.append("MLA: every TP rank holds the whole latent KV cache (it is not divided by TP).")
    return notes


def _chosen_notes(setup: PlanSetup, chosen: Candidate, candidates: list[Candidate]) -> list[str]:
    """The chosen layout's memory (loaded, CUDA graphs, what replicas share) and the first rejected ones."""
    notes = [_loaded_note(chosen.memory, setup.model)]
    if chosen.cuda_graph_sets:
        notes.append(_cuda_graph_note(chosen))
    shared = _replicas_share_note(setup.engine, setup.model, chosen.layout)
    if shared:
        notes.append(shared)
    rejected = sorted((c for c in candidates if not c.fits), key=lambda c: c.layout.gpus)[:5]
    for candidate in rejected:
        shape = candidate.layout
        notes.append(f"Rejected tp={shape.tp} pp={shape.pp} ep={shape.ep} dp={shape.dp}: {candidate.reason}")
    return notes


def _throughput_note(throughput: Throughput) -> str:
    """The chosen layout's throughput estimate: the workload, the model and its basis (calibration or
    defaults, single sources), and the floors that bound it where they do."""
    basis = (
        f"calibration profile {throughput.calibration}"
        + (f"; measured there: {', '.join(throughput.measured)}" if throughput.measured else "")
        + (f"; defaults for {', '.join(throughput.fallbacks)}" if throughput.fallbacks else "")
        if throughput.calibration
        else "default efficiencies of catalog/efficiency.yaml (no calibration profile)"
    ) + (
        "; set against one published source only: " + "; ".join(throughput.single_source)
        if throughput.single_source
        else ""
    )
    return (
        f"Throughput (estimate): {throughput.batch} sequences per replica of {throughput.input_len}-token prompts"
        + (
            f" (their first {throughput.cached_prefix_len} tokens in the prefix cache)"
            if throughput.cached_prefix_len
            else ""
        )
        + f" and {throughput.output_len} generated tokens on {throughput.engine} (chunked prefill, "
        f"{throughput.max_num_batched_tokens} tokens a step); per-layer rooflines plus kernel and collective "
        f"overheads, other requests' prefill inside decode steps, {throughput.delivered_fraction:.2f} of "
        f"concurrency / TPOT delivered; basis: {basis}."
        + (
            f" W4A16 on {throughput.engine}'s Marlin kernels: an INT4 GEMM call takes at least "
            f"{throughput.w4a16_gemm_floor_us:g} us however few bytes it reads (set against three published runs), "
            "and in this plan's decode step that floor, not the weights' bytes, bounds some of them."
            if throughput.w4a16_gemm_floor_us
            else ""
        )
        + (
            f" Block-FP8 on {throughput.fp8_release_path}: that release line's kernels (Triton's block-FP8 GEMM and "
            "fused MoE) are planned, slower than later releases' at small batch: a GEMM call takes at least "
            f"{throughput.fp8_gemm_floor_us:g} us however few bytes it reads, and the experts stream their weights at a fraction of the later "
            "kernels' rate (set against one published run; a later release decodes faster)."
            if throughput.fp8_release_path
            else ""
        )
        + (
            f" {throughput.engine} runs prefill steps eagerly here (before {eager_prefill_until(throughput.engine)}, "
            "and later on ROCm, with DP attention or an MoE model on SM100; CUDA graphs for decode only): "
            f"launching the forward's kernels from Python takes {throughput.eager_prefill_ms:.0f} ms, and a step "
            "that prefills takes at least that, however few tokens it holds (set against three published sources)."
            if throughput.eager_prefill_ms
            else ""
        )
        + " Batch-1 upper bound "
        f"{throughput.batch1_tokens_per_s_upper_bound:.0f} tokens/s streams the weights at the HBM peak."
        + (
            f" TTFT is the mean over a run of {throughput.num_prompts} requests whose first wave starts at once "
            f"({throughput.first_wave_ttft_ms:.0f} ms each on average; the steady state after it)."
            if throughput.num_prompts
            else ""
        )
    )


# The figure per kernel node of a captured graph set: the median of the public logs' (engines.py).
CUDA_GRAPH_KIB_PER_NODE = statistics.median(CUDA_GRAPH_KIB_PER_KERNEL.values())


def engine_default_max_num_seqs(engine: str, engine_version: str | None, gpu_spec: str | GpuSpec) -> int:
    """The sequences per replica an engine runs at once when its launch sets none (vLLM V1: 1024 on a GPU
    of 70 GiB or more other than the A100s, else 256; SGLang's and TensorRT-LLM's from their profiles):
    what a serving plan that states no concurrency is launched and planned with."""
    spec = gpu_spec if isinstance(gpu_spec, GpuSpec) else gpu(gpu_spec)
    # The context length moves only V0's step budget (the first of the pair), never its sequences.
    return engine_profile(engine, engine_version).defaults(spec, 8192)[1]


def graph_headroom_bytes(memory: MemoryBreakdown) -> int:
    """What vLLM's graph capture can take: the memory outside gpu_memory_utilization and the profile run's
    activations, freed before the capture."""
    return memory.total_gpu_memory_bytes - memory.capacity_bytes + memory.activations_bytes


def running_sequences(request: PlanRequest, layout: Layout) -> int:
    """Sequences the engine runs at once over all replicas: the concurrency, capped per replica by an
    asked max_num_seqs (the rest wait in the engine's queue, holding no KV cache)."""
    if request.max_num_seqs is None:
        return request.concurrency
    return min(request.concurrency, request.max_num_seqs * layout.dp)


def _evaluate(setup: PlanSetup, layout: Layout) -> Candidate:
    request, max_len = setup.request, setup.max_model_len
    memory = memory_breakdown(
        model=setup.model,
        params=setup.params,
        precision=setup.precision,
        gpu=setup.gpu,
        layout=layout,
        kv_dtype=request.kv_dtype,
        max_model_len=max_len,
        gpu_memory_utilization=request.gpu_memory_utilization,
        keep_bf16=setup.keep_bf16,
        engine=setup.engine,
        max_num_batched_tokens=request.max_num_batched_tokens,
        max_num_seqs=request.max_num_seqs or request.concurrency,
    )
    max_concurrency = memory.sequences_per_replica * layout.dp
    needed = running_sequences(request, layout)
    gib = 1 << 30
    # vLLM (up to 0.17) captures its CUDA graphs after the KV cache is allocated: they take what is left
    # outside gpu_memory_utilization, plus the profile run's activations it freed. The verdict takes the
    # least any log gives per kernel node (the figure is uncertain by a factor of 2-3 either way: the plan's
    # note gives the median and says when that one would not fit).
    sets = setup.engine.cuda_graph_sets(memory.max_num_seqs, memory.max_num_batched_tokens)
    nodes = sets * max(stage_kernels(setup.model, setup.params, layout)) if sets else 0  # each GPU its stage's
    graphs = int(nodes * CUDA_GRAPH_KIB_PER_NODE * 1024)
    least = int(nodes * min(CUDA_GRAPH_KIB_PER_KERNEL.values()) * 1024)
    headroom = graph_headroom_bytes(memory)
    if memory.kv_pool_bytes <= 0:
        reason = (
            f"weights {memory.weights_per_gpu_bytes / gib:.1f} GiB + reserves exceed "
            f"{memory.capacity_bytes / gib:.1f} GiB per GPU"
        )
    elif memory.sequences_per_replica < 1:
        reason = f"KV pool {memory.kv_pool_bytes / gib:.1f} GiB cannot hold one {max_len}-token sequence per replica"
    else:
        causes = []
        if least > headroom:
            causes.append(
                f"its {sets} CUDA graph sets need at least {least / gib:.2f} GiB per GPU (about {graphs / gib:.2f}) "
                f"once the KV cache is allocated, more than the {headroom / gib:.2f} GiB left outside "
                f"gpu_memory_utilization: {setup.engine.name} stops at start-up (lower gpu_memory_utilization or "
                "max_num_seqs; vLLM's --enforce-eager captures none)"
            )
        if max_concurrency < needed:
            causes.append(f"holds {max_concurrency} full-length sequences, fewer than the {needed} requested")
        reason = "; and ".join(causes)
    return Candidate(
        layout=layout,
        memory=memory,
        max_concurrency=max_concurrency,
        fits=not reason,
        reason=reason,
        cuda_graph_sets=sets,
        cuda_graph_bytes=graphs,
        cuda_graphs_fit=least <= headroom,
    )


def _no_fit_note(request: PlanRequest, candidates: list[Candidate], chosen: Candidate) -> str:
    """Why nothing fits, naming what the user pinned: a pinned layout is the only one tried."""
    shape = chosen.layout
    if len(candidates) == 1:
        return (
            f"The pinned layout tp={shape.tp} pp={shape.pp} ep={shape.ep} dp={shape.dp} does not fit: {chosen.reason}."
        )
    pinned = " ".join(f"{name}={getattr(request, name)}" for name in ("tp", "pp", "ep", "dp") if getattr(request, name))
    scope = f"with {pinned} (as pinned) " if pinned else ""
    return f"No layout {scope}of up to {MAX_GPUS} GPUs fits; showing the one closest to fitting."


def _fewer_replicas(
    evaluate: Callable[[Layout], Candidate], candidates: list[Candidate], concurrency: int
) -> list[Candidate]:
    """Replica counts between the powers of two the search tried: a replica that holds some sequences
    but too few, repeated as often as the concurrency needs (3 replicas where 2 hold too few and 4 are
    a GPU more than needed). Only where experts stay inside a replica: its memory then does not depend
    on how many replicas there are."""
    fewest = min((c.layout.gpus for c in candidates if c.fits), default=MAX_GPUS + 1)
    if fewest > MAX_GPUS:
        # Nothing fits: the next power of two of replicas of any shape was tried (tp x pp is a power of
        # two, so it stays within MAX_GPUS when fewer replicas do) and failed on memory, not replicas.
        return []
    seen = {c.layout for c in candidates}
    extra = []
    for candidate in candidates:
        shape, held = candidate.layout, candidate.memory.sequences_per_replica
        if candidate.fits or held < 1 or shape.ep > shape.tp:
            continue
        layout = dataclasses.replace(shape, dp=-(-concurrency // held))
        if layout.dp <= MAX_DP and layout.gpus < fewest and layout not in seen:
            seen.add(layout)
            extra.append(evaluate(layout))
    return extra


def _fewest_gpus_then_fastest(candidate: Candidate) -> tuple[int, float]:
    speed = candidate.throughput.decode_tokens_per_s if candidate.throughput else 0.0
    return candidate.layout.gpus, -speed


def _prefills_eagerly_anyway(setup: PlanSetup, layout: Layout) -> bool:
    """Where SGLang 0.5.10 and later still prefill eagerly (their server_args turn the piecewise CUDA graphs
    off): on ROCm, with DP attention (the printed command's --enable-dp-attention for dp > 1), and on the
    SM100 family with an MoE model, whose FlashInfer TRT-LLM MoE backend it picks there."""
    if setup.request.engine != "sglang":
        return False
    sm100 = setup.gpu.cuda_sm is not None and setup.gpu.cuda_sm // 10 == 10
    return setup.gpu.key in ROCM_GPUS or layout.dp > 1 or (sm100 and setup.model.is_moe)


def _throughput(setup: PlanSetup, candidate: Candidate, quick: bool = False) -> Throughput:
    request, max_len, scheme = setup.request, setup.max_model_len, setup.precision
    output = request.output_len or min(1024, max(1, max_len // 2))
    prompt = request.input_len or min(1024, max(1, max_len - output))
    return estimate(
        model=setup.model,
        params=setup.params,
        precision=scheme,
        gpu=setup.gpu,
        layout=candidate.layout,
        workload=Workload(
            input_len=prompt,
            output_len=output,
            concurrency=request.concurrency,
            cached_prefix_len=request.cached_prefix_len,
            max_num_seqs=request.max_num_seqs,
            arrival=request.arrival,
            request_rate=request.request_rate,
            range_ratio=float(request.range_ratio) + 0.0,  # -0.0 is 0
            num_prompts=request.num_prompts,
        ),
        kv_dtype=request.kv_dtype,
        # The one list of BF16 parts the memory model sized (asked, the checkpoint's own, the
        # scheme's default): recomputing it here left out the checkpoint's (issue 27).
        keep=setup.keep_bf16,
        # The step budget the memory model reserved activations for: the engine's own default for
        # this GPU when the request does not set one (vLLM V1 takes 2048 on an A100, 8192 on an H100).
        engine=engine_settings(
            request.engine,
            candidate.memory.max_num_batched_tokens,
            request.scheduler_recv_interval,
            setup.engine.release,
            eager_prefill=_prefills_eagerly_anyway(setup, candidate.layout),
        ),
        profile=request.calibration,
        quick=quick,
    )
