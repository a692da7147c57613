"""Typed, frozen descriptions of models, GPUs and weight precisions, loaded from the catalog files.

Every loader validates its input and raises ValueError naming the entry and field.
"""

from __future__ import annotations

import difflib
import functools
import inspect
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, TypeVar

import yaml

CATALOG_DIR = Path(__file__).resolve().parent / "catalog"
MIB = 1 << 20
LINEAR_STATE = -1  # kv_window of a linear-attention layer: no KV per token, a fixed state per sequence


@dataclass(frozen=True, slots=True)
class VisionSpec:
    hidden_size: int
    num_layers: int
    intermediate_size: int


@dataclass(frozen=True, slots=True, eq=False)  # identity hash: specs key the planner's caches
class ModelSpec:
    """A decoder as served. MoE fields are zero for dense models; MLA fields zero for GQA."""

    key: str
    architecture: str
    num_layers: int
    hidden_size: int
    vocab_size: int
    num_attention_heads: int
    num_kv_heads: int
    head_dim: int
    attention: str = "gqa"  # gqa | mla
    q_lora_rank: int = 0
    kv_lora_rank: int = 0
    qk_nope_head_dim: int = 0
    qk_rope_head_dim: int = 0
    v_head_dim: int = 0
    qk_norm: bool = False
    attention_bias: bool = False
    attention_sinks: bool = False
    sliding_window: int = 0  # tokens a sliding-window layer keeps
    sliding_window_every: int = 0  # every Nth layer is full attention, the others windowed (0: none)
    chunked_attention_size: int = 0  # Llama 4 chunked (local) attention
    global_attention_every: int = 0  # with chunked attention: every Nth layer is global
    layer_windows: tuple[int, ...] = ()  # per layer: tokens it keeps (0: whole context); overrides the two above
    # Hybrid attention (Qwen3-Next): these layers are Gated DeltaNet linear attention, a fixed state per
    # sequence (a causal conv's last inputs and a heads x key dim x value dim recurrence) and no KV per token.
    linear_layers: tuple[int, ...] = ()
    linear_key_heads: int = 0
    linear_value_heads: int = 0
    linear_key_head_dim: int = 0
    linear_value_head_dim: int = 0
    linear_conv_kernel: int = 0
    attention_output_gate: bool = False  # Qwen3-Next: q_proj also yields a per-head output gate
    dense_intermediate_size: int = 0
    moe_intermediate_size: int = 0
    n_routed_experts: int = 0
    n_shared_experts: int = 0
    experts_per_token: int = 0
    first_k_dense_layers: int = 0
    moe_layer_step: int = 1  # MoE on every Nth layer (after the dense-first ones)
    dense_layers: tuple[int, ...] = ()  # further layers with a dense MLP (Qwen's mlp_only_layers)
    shared_expert_intermediate_size: int = 0  # 0: the routed experts' size
    expert_bias: bool = False
    norms_per_layer: int = 2  # Gemma 2/3 add pre/post feed-forward norms: 4
    tie_word_embeddings: bool = False
    max_position_embeddings: int = 0
    rotary_fraction: float = 1.0  # partial_rotary_factor: the share of each head the rope rotates
    rope_positions: int = (
        0  # positions the rope's cos/sin cache covers when scaling sets them (0: max_position_embeddings)
    )
    vision: VisionSpec | None = None
    checkpoint_precision: str | None = None
    checkpoint_group_size: int | None = None
    checkpoint_zero_point: bool = False  # AWQ / asymmetric INT4: a zero point per group
    checkpoint_keep_bf16: tuple[str, ...] = ()  # parts the checkpoint's quantization leaves in BF16
    hf_repo: str | None = None  # Hugging Face repository the serving command loads
    notes: tuple[str, ...] = ()  # what parsing a config.json assumed
    published: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    @property
    def is_moe(self) -> bool:
        return self.n_routed_experts > 0

    def is_moe_layer(self, index: int) -> bool:
        """Layer `index` (0-based) has routed experts: honours dense-first layers and interleave."""
        if not self.is_moe or index < self.first_k_dense_layers or index in self.dense_layers:
            return False
        return (index - self.first_k_dense_layers + 1) % self.moe_layer_step == 0

    @property
    def moe_layers(self) -> int:
        return sum(1 for i in range(self.num_layers) if self.is_moe_layer(i))

    def kv_window(self, index: int) -> int | None:
        """Tokens layer `index` keeps in its KV cache (None: the whole context; LINEAR_STATE: none, a
        linear-attention layer keeps a fixed state per sequence instead)."""
        if self.linear_layers and index in self.linear_layers:
            return LINEAR_STATE
        if self.layer_windows:
            return self.layer_windows[index] or None
        if self.sliding_window and self.sliding_window_every and (index % self.sliding_window_every) == 0:
            return self.sliding_window
        chunked = self.chunked_attention_size and self.global_attention_every
        if chunked and (index + 1) % self.global_attention_every != 0:
            return self.chunked_attention_size
        return None

    def linear_state_elements(self, tp: int) -> int:
        """Elements of one linear-attention layer's state per sequence on one TP rank (heads split by
        TP): the causal conv keeps its last kernel - 1 inputs of the q, k and v channels, the recurrence a
        key dim x value dim matrix per value head."""
        channels = (
            2 * self.linear_key_heads * self.linear_key_head_dim + self.linear_value_heads * self.linear_value_head_dim
        )
        conv = -(-channels // tp) * max(self.linear_conv_kernel - 1, 0)
        recurrent = -(-self.linear_value_heads // tp) * self.linear_key_head_dim * self.linear_value_head_dim
        return conv + recurrent

    def validate(self) -> None:
        where = f"model {self.key!r}"
        for name in ("num_layers", "hidden_size", "vocab_size", "num_attention_heads", "num_kv_heads", "head_dim"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{where}: {name} must be positive")
        if self.attention not in ("gqa", "mla"):
            raise ValueError(f"{where}: attention must be 'gqa' or 'mla'")
        if self.attention == "mla" and (self.kv_lora_rank <= 0 or self.qk_rope_head_dim <= 0):
            raise ValueError(f"{where}: MLA needs kv_lora_rank and qk_rope_head_dim")
        if self.num_attention_heads % self.num_kv_heads:
            raise ValueError(f"{where}: num_attention_heads must be a multiple of num_kv_heads")
        if self.is_moe and not (0 < self.experts_per_token <= self.n_routed_experts):
            raise ValueError(f"{where}: experts_per_token must be in 1..n_routed_experts")
        if self.is_moe and self.moe_intermediate_size <= 0:
            raise ValueError(f"{where}: moe_intermediate_size must be positive for an MoE model")
        if not self.is_moe and self.dense_intermediate_size <= 0:
            raise ValueError(f"{where}: dense_intermediate_size must be positive for a dense model")
        if self.linear_layers:
            for name in ("linear_key_heads", "linear_value_heads", "linear_key_head_dim", "linear_value_head_dim"):
                if getattr(self, name) <= 0:
                    raise ValueError(f"{where}: {name} must be positive for linear-attention layers")
            if not all(0 <= i < self.num_layers for i in self.linear_layers):
                raise ValueError(f"{where}: linear_layers must be layer indices")
        if self.layer_windows and len(self.layer_windows) != self.num_layers:
            raise ValueError(f"{where}: layer_windows must list one window per layer")
        has_dense_layers = self.first_k_dense_layers or self.dense_layers or (self.is_moe and self.moe_layer_step > 1)
        if has_dense_layers and self.dense_intermediate_size <= 0:
            raise ValueError(f"{where}: dense layers need dense_intermediate_size")


@dataclass(frozen=True, slots=True)
class GpuSpec:
    key: str
    name: str
    memory_mib: int  # what CUDA reports as total memory (engines budget against this figure)
    hbm_bandwidth_gb_per_s: float
    bf16_tflops: float
    fp8_tflops: float | None
    int8_tops: float | None
    nvlink_gb_per_s: float
    nvlink_domain: int
    nvidia_smi_memory_mib: int | None = None
    # CUDA compute capability x 10 (80 Ampere, 89 Ada, 90 Hopper, 100 Blackwell); None: not NVIDIA, or not
    # given. Engines pick kernels (and the weight layouts those kernels need) by it.
    cuda_sm: int | None = None

    @property
    def memory_bytes(self) -> int:
        return self.memory_mib * MIB

    def peak_tflops(self, compute: str) -> float:
        """Dense peak for the scheme's math; falls back to BF16 where the GPU lacks the format."""
        if compute == "fp8" and self.fp8_tflops:
            return self.fp8_tflops
        if compute == "int8" and self.int8_tops:
            return self.int8_tops
        return self.bf16_tflops


@dataclass(frozen=True, slots=True, eq=False)
class PrecisionSpec:
    key: str
    weight_bits: int
    scale_bits: int
    zero_bits: int
    group_size: int | None
    compute: str
    activation_bits: int
    vllm_quantization: str | None
    note: str = ""
    # The serving engines (planner.engines.ENGINES) with a kernel for this scheme; None: every engine.
    engines: tuple[str, ...] | None = None

    def with_group_size(self, group_size: int | None) -> PrecisionSpec:
        if group_size is None:
            return self
        if group_size <= 0 or group_size & (group_size - 1):
            raise ValueError("group_size must be a positive power of two")
        if self.weight_bits not in (2, 4) or self.key in ("mxfp4", "nvfp4"):
            raise ValueError(f"group_size applies to the INT4 and INT2 schemes (w4a16, w4a8, w2a16), not {self.key}")
        return PrecisionSpec(**{**{f.name: getattr(self, f.name) for f in fields(self)}, "group_size": group_size})

    @property
    def bits_per_weight(self) -> float:
        """Weight bits plus the amortised scale and zero-point bits of its group."""
        if not self.group_size:
            return float(self.weight_bits)
        return self.weight_bits + (self.scale_bits + self.zero_bits) / self.group_size


_Spec = TypeVar("_Spec")


def _build(cls: Callable[..., _Spec], key: str, data: dict[str, Any], kind: str) -> _Spec:
    names = set(inspect.signature(cls).parameters) - {"key"}  # a dataclass's fields, as __init__ takes them
    unknown = set(data) - names
    if unknown:
        raise ValueError(f"{kind} {key!r}: unknown fields {sorted(unknown)}")
    try:
        return cls(key=key, **data)
    except TypeError as exc:
        raise ValueError(f"{kind} {key!r}: {exc}") from None


@functools.cache
def models() -> dict[str, ModelSpec]:
    raw = yaml.safe_load((CATALOG_DIR / "models.yaml").read_text(encoding="utf-8"))
    result = {}
    for key, data in raw.items():
        data = dict(data)
        if data.get("vision"):
            data["vision"] = VisionSpec(**data["vision"])
        for name in ("layer_windows", "linear_layers", "dense_layers", "checkpoint_keep_bf16", "notes"):
            if name in data:
                data[name] = tuple(data[name])
        spec = _build(ModelSpec, key, data, "model")
        spec.validate()
        result[key] = spec
    return result


@functools.cache
def gpus() -> dict[str, GpuSpec]:
    raw = yaml.safe_load((CATALOG_DIR / "gpus.yaml").read_text(encoding="utf-8"))
    return {key: _gpu(key, data) for key, data in raw.items()}


# A GPU spec's fields: these four are required, the rest optional (defaults in _gpu).
GPU_REQUIRED_FIELDS = ("name", "memory_mib", "hbm_bandwidth_gb_per_s", "bf16_tflops")
GPU_OPTIONAL_FIELDS = (
    "fp8_tflops",
    "int8_tops",
    "nvlink_gb_per_s",
    "nvlink_domain",
    "nvidia_smi_memory_mib",
    "cuda_sm",
)
# Upper bounds, generous against any accelerator announced (the largest carry ~288 GiB and ~8 TB/s):
# a spec beyond them is a typo (GiB given as MiB * 1024) or an attack, not a GPU.
GPU_BOUNDS: dict[str, float] = {
    "memory_mib": 16 * 1024 * 1024,
    "nvidia_smi_memory_mib": 16 * 1024 * 1024,
    "hbm_bandwidth_gb_per_s": 1_000_000,
    "bf16_tflops": 1_000_000,
    "fp8_tflops": 1_000_000,
    "int8_tops": 1_000_000,
    "nvlink_gb_per_s": 1_000_000,
    "nvlink_domain": 1024,
    "cuda_sm": 200,
}


def _gpu(key: str, data: Any) -> GpuSpec:
    if not isinstance(data, dict):
        raise ValueError(f"gpu {key!r}: must be a mapping of fields")
    # Name every expected field when one is wrong: a spec file is written by hand.
    expected = f"required: {', '.join(GPU_REQUIRED_FIELDS)}; optional: {', '.join(GPU_OPTIONAL_FIELDS)}"
    unknown = sorted(set(data) - set(GPU_REQUIRED_FIELDS) - set(GPU_OPTIONAL_FIELDS))
    if unknown:
        raise ValueError(f"gpu {key!r}: unknown fields {unknown} ({expected})")
    missing = sorted(set(GPU_REQUIRED_FIELDS) - set(data))
    if missing:
        raise ValueError(f"gpu {key!r}: missing required fields {missing} ({expected})")
    data = {"nvlink_gb_per_s": 32, "nvlink_domain": 8, "fp8_tflops": None, "int8_tops": None, **data}
    spec = _build(GpuSpec, key, data, "gpu")
    if not isinstance(spec.name, str) or not 0 < len(spec.name) <= 120:
        raise ValueError(f"gpu {key!r}: name must be a text of 1 to 120 characters")
    for name, bound in GPU_BOUNDS.items():
        value = getattr(spec, name)
        if value is None and name not in (*GPU_REQUIRED_FIELDS, "nvlink_gb_per_s", "nvlink_domain"):
            continue
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= bound:
            raise ValueError(f"gpu {key!r}: {name} must be a positive number up to {bound:,.0f}")
    for name in ("memory_mib", "nvlink_domain", "nvidia_smi_memory_mib", "cuda_sm"):
        if getattr(spec, name) is not None and not isinstance(getattr(spec, name), int):
            raise ValueError(f"gpu {key!r}: {name} must be a whole number")
    if spec.cuda_sm is not None and spec.cuda_sm < 30:
        # 9 for Hopper (the major version alone) would read as a GPU older than any engine supports
        raise ValueError(f"gpu {key!r}: cuda_sm is the compute capability x 10 (80 A100, 89 L40S, 90 H100, 100 B200)")
    return spec


def gpu_from_file(path: str | Path) -> GpuSpec:
    """A GPU outside the catalog, from a JSON file with the catalog's fields (`key` optional).

    Required: name, memory_mib (CUDA-reported total), hbm_bandwidth_gb_per_s, bf16_tflops.
    """
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ValueError(f"gpu_spec: cannot read {path}: {exc}") from None
    return gpu_from_dict(data, default_key=Path(path).stem)


def gpu_from_dict(data: Any, default_key: str = "custom") -> GpuSpec:
    """A GPU outside the catalog from a JSON object with the catalog's fields (`key` optional): what
    --gpu-spec reads from a file, and what the service stores with a request's serving plan."""
    if not isinstance(data, dict):
        raise ValueError("gpu_spec: must be a JSON object")
    data = dict(data)
    key = str(data.pop("key", default_key))
    return _gpu(key, data)


@functools.cache
def precisions() -> dict[str, PrecisionSpec]:
    raw = yaml.safe_load((CATALOG_DIR / "precisions.yaml").read_text(encoding="utf-8"))
    result = {}
    for key, data in raw.items():
        if data.get("engines") is not None:
            from planner.engines import ENGINES  # planner.engines imports this module

            unknown = sorted(set(data["engines"]) - set(ENGINES))
            if unknown:
                raise ValueError(f"precision {key!r}: engines {unknown} are not among {', '.join(ENGINES)}")
            data = {**data, "engines": tuple(data["engines"])}
        spec = _build(PrecisionSpec, key, data, "precision")
        if spec.compute not in ("bf16", "fp8", "int8"):
            raise ValueError(f"precision {key!r}: compute must be bf16, fp8 or int8")
        result[key] = spec
    return result


# Release suffixes of a repository name that say nothing of the architecture (a date like -2507 too).
_RELEASE_SUFFIX = re.compile(r"-(instruct|chat|it|base|hf|fp8|bf16|\d{4})$")


def closest_models(key: str, limit: int = 3) -> list[str]:
    """Catalog model keys closest in spelling to `key` (best first): `llama-3.3-70b` is meant as the
    Llama 3.1 70B entry, the same architecture. A Hugging Face repository name is read without its
    organisation and release suffixes (`Qwen/Qwen3-30B-A3B-Instruct-2507`). Empty when nothing is near."""
    name = key.strip().lower().rsplit("/", 1)[-1]
    while (shorter := _RELEASE_SUFFIX.sub("", name)) != name and shorter:
        name = shorter
    return difflib.get_close_matches(name, sorted(models()), n=limit, cutoff=0.75)


def model(key: str) -> ModelSpec:
    try:
        return models()[key]
    except KeyError:
        near = closest_models(key)
        hint = f"closest: {', '.join(near)}; " if near else ""
        raise ValueError(f"model: unknown key {key!r}; {hint}known: {', '.join(sorted(models()))}") from None


def gpu(key: str) -> GpuSpec:
    try:
        return gpus()[key]
    except KeyError:
        raise ValueError(f"gpu: unknown key {key!r}; known: {', '.join(sorted(gpus()))}") from None


def precision(key: str, group_size: int | None = None) -> PrecisionSpec:
    try:
        spec = precisions()[key]
    except KeyError:
        raise ValueError(f"precision: unknown key {key!r}; known: {', '.join(sorted(precisions()))}") from None
    try:
        return spec.with_group_size(group_size)
    except ValueError as exc:
        raise ValueError(f"group_size: {exc}") from None
