"""Input of POST /api/v1/planner/plan (docs/contracts.md); shared by the API and stored plans."""

from __future__ import annotations

import re
import uuid
from typing import Any

from rest_framework import serializers

from governance.core.serializers import EngineVersionField, JsonObjectField, KeyOrObjectField, StrictSerializer
from planner.calibrate.profile import CalibrationProfile
from planner.engines import ENGINES, engine_profile
from planner.hf_config import parse_config
from planner.perf import ARRIVALS
from planner.plan import AUTO_PRECISION, KEEP_BF16_PARTS, PlanRequest, check_cached_prefix
from planner.specs import GPU_OPTIONAL_FIELDS, GPU_REQUIRED_FIELDS, GpuSpec, gpu_from_dict, gpus, precisions

# Bounds of the planner's inputs (issue 18): beyond them a request is a mistake or an attack, and
# the layout search would run for minutes. The config's own fields are bounded in planner/hf_config.py.
MAX_MODEL_LEN = 1 << 28  # tokens (the longest published context is 10M)
MAX_GROUP_SIZE = 4096
MAX_TP, MAX_PP, MAX_EP, MAX_DP = 64, 256, 1024, 4096
MAX_NUM_SEQS = 100_000
MAX_SCHEDULER_RECV_INTERVAL = 10_000  # decode steps (InferenceX's SGLang scripts use 10 and 30)


# A GPU key as the gate and the launch commands carry it: a custom GPU's key is a plain name.
GPU_KEY = re.compile(r"^[a-z0-9][a-z0-9._-]{0,39}$")
GPU_SPEC_HELP = (
    "a GPU outside the catalog, the fields of the planner CLI's --gpu-spec: required "
    f"{', '.join(GPU_REQUIRED_FIELDS)}; optional key, {', '.join(GPU_OPTIONAL_FIELDS)} (cuda_sm: the CUDA "
    "compute capability x 10, e.g. 90 for an H100: vLLM's MXFP4 expert padding depends on it)"
)


def gpu_spec_validate(attrs: dict[str, Any]) -> None:
    """A catalog `gpu`, or a `gpu_spec` checked as --gpu-spec checks its file; the spec's key then
    becomes `gpu` (what the gate compares a rollout with). The key may not be a catalog key: a
    made-up "h200" would pass for the real one at the gate."""
    spec = attrs.get("gpu_spec")
    if spec is None:
        if not attrs.get("gpu"):
            raise serializers.ValidationError({"gpu": ["required (or gpu_spec, a GPU outside the catalog)"]})
        return
    if not isinstance(spec, dict):
        raise serializers.ValidationError({"gpu_spec": [f"must be a JSON object: {GPU_SPEC_HELP}"]})
    key = spec.get("key", "custom")
    if not isinstance(key, str) or not GPU_KEY.match(key):
        raise serializers.ValidationError(
            {"gpu_spec": ["key: lower-case letters, digits, '.', '_' and '-', up to 40 characters"]}
        )
    if key in gpus():
        raise serializers.ValidationError(
            {"gpu_spec": [f"key: {key!r} is a catalog GPU; give the custom GPU a key of its own, or use gpu"]}
        )
    try:
        gpu_from_dict(spec)
    except ValueError as exc:
        raise serializers.ValidationError({"gpu_spec": [str(exc)]}) from None
    if attrs.get("gpu") not in (None, "", key):
        raise serializers.ValidationError({"gpu": [f"must be the gpu_spec's key {key!r}, or left out"]})
    attrs["gpu_spec"] = {**spec, "key": key}
    attrs["gpu"] = key


def config_errors(config: dict[str, Any]) -> dict[str, list[str]] | None:
    """Parse an inline config.json the way the planner will: its errors named by config field."""
    try:
        parse_config(config)
    except ValueError as exc:
        text = str(exc)
        field, _, message = text.partition(": ")
        if message and " " not in field.strip():
            return {field: [message]}
        return {"model": [text]}
    return None


class PlanInputSerializer(StrictSerializer):
    # A JSON body's values are not coerced: `false` is not a range_ratio of 0, "8" is not a tp of 8.
    strict_types = True

    model = KeyOrObjectField(help_text="catalog key (string) or an inline Hugging Face config.json (object)")
    precision = serializers.ChoiceField(choices=[*sorted(precisions()), AUTO_PRECISION])
    group_size = serializers.IntegerField(required=False, allow_null=True, min_value=1, max_value=MAX_GROUP_SIZE)
    kv_dtype = serializers.ChoiceField(choices=["bf16", "fp8"], default="bf16")
    gpu = serializers.ChoiceField(choices=sorted(gpus()), required=False, help_text="catalog key (or gpu_spec)")
    gpu_spec = JsonObjectField(required=False, help_text=GPU_SPEC_HELP)
    gpus_per_node = serializers.IntegerField(default=8, min_value=1, max_value=16)
    max_model_len = serializers.IntegerField(required=False, allow_null=True, min_value=16, max_value=MAX_MODEL_LEN)
    concurrency = serializers.IntegerField(default=1, min_value=1, max_value=100_000)
    tp = serializers.IntegerField(required=False, allow_null=True, min_value=1, max_value=MAX_TP)
    pp = serializers.IntegerField(required=False, allow_null=True, min_value=1, max_value=MAX_PP)
    ep = serializers.IntegerField(required=False, allow_null=True, min_value=1, max_value=MAX_EP)
    dp = serializers.IntegerField(required=False, allow_null=True, min_value=1, max_value=MAX_DP)
    gpu_memory_utilization = serializers.FloatField(default=0.9, min_value=0.1, max_value=0.99)
    keep_bf16 = serializers.ListField(child=serializers.ChoiceField(choices=KEEP_BF16_PARTS), required=False)
    model_path = serializers.CharField(required=False, max_length=300)
    engine = serializers.ChoiceField(choices=ENGINES, default="vllm")
    engine_version = EngineVersionField(required=False, allow_null=True)
    max_num_batched_tokens = serializers.IntegerField(
        required=False, allow_null=True, min_value=1, max_value=MAX_MODEL_LEN
    )
    max_num_seqs = serializers.IntegerField(required=False, allow_null=True, min_value=1, max_value=MAX_NUM_SEQS)
    scheduler_recv_interval = serializers.IntegerField(
        required=False,
        allow_null=True,
        min_value=1,
        max_value=MAX_SCHEDULER_RECV_INTERVAL,
        help_text="SGLang --scheduler-recv-interval: new requests are taken in once every N decode steps (default 1)",
    )
    # Throughput estimate inputs (issue 17): the workload, and whose calibration profile to use.
    input_len = serializers.IntegerField(required=False, allow_null=True, min_value=1, max_value=10_000_000)
    output_len = serializers.IntegerField(required=False, allow_null=True, min_value=1, max_value=10_000_000)
    cached_prefix_len = serializers.IntegerField(
        required=False,
        min_value=0,
        max_value=10_000_000,
        help_text="leading prompt tokens already in the engine's prefix cache (not prefilled again); "
        "below input_len, which it needs",
    )
    arrival = serializers.ChoiceField(
        choices=ARRIVALS,
        default="burst",
        help_text="how the requests arrive: burst (a closed loop sent at once, waves aligned: vllm bench "
        "serve's default), spread (one at a time) or poisson (an open loop at request_rate)",
    )
    request_rate = serializers.FloatField(
        required=False,
        allow_null=True,
        min_value=1e-6,
        max_value=1e6,
        help_text="with arrival poisson: requests/s over all replicas (concurrency: the most in flight)",
    )
    range_ratio = serializers.FloatField(
        required=False,
        min_value=0.0,
        max_value=1.0,
        help_text="each request's input and output lengths drawn uniformly from [range_ratio x len, len], as "
        "sglang.bench_serving --random-range-ratio draws them (default 1: fixed lengths; 0: that client's own "
        "default, prompts from 1 token)",
    )
    cluster = serializers.CharField(
        required=False,
        allow_null=True,
        max_length=36,
        help_text="cluster code: its latest calibration profile for this GPU is used",
    )

    def validate_cluster(self, value: str | None) -> str | None:
        if value is None:
            return None
        try:
            return str(uuid.UUID(value))
        except ValueError:
            raise serializers.ValidationError("must be a cluster code (UUID)") from None

    def validate_model(self, value: Any) -> Any:
        if not isinstance(value, str | dict):
            raise serializers.ValidationError("must be a catalog key or a config.json object")
        return value

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        gpu_spec_validate(attrs)
        # Here rather than in validate_model: the errors are named by config field at the top level.
        if isinstance(attrs.get("model"), dict) and (errors := config_errors(attrs["model"])):
            raise serializers.ValidationError(errors)
        poisson, rate = attrs.get("arrival") == "poisson", attrs.get("request_rate")
        if poisson != (rate is not None):  # here, not only in the planner: a stored plan would fail in the worker
            raise serializers.ValidationError(
                {"request_rate": ["needed with arrival poisson, and only with it (requests/s)"]}
            )
        interval = attrs.get("scheduler_recv_interval")
        if interval is not None and interval > 1 and attrs.get("engine", "vllm") != "sglang":
            # Here, not only in the planner: a stored plan would otherwise fail in the worker.
            raise serializers.ValidationError(
                {"scheduler_recv_interval": ["an SGLang option (--scheduler-recv-interval): set engine to sglang"]}
            )
        try:
            check_cached_prefix(attrs.get("cached_prefix_len") or 0, attrs.get("input_len"))
            # An engine release the planner has no profile for: refused here, not in the worker.
            engine_profile(attrs.get("engine", "vllm"), attrs.get("engine_version"))
        except ValueError as exc:
            field, _, message = str(exc).partition(": ")
            raise serializers.ValidationError({field: [message]}) from None
        return attrs


def plan_request_from(data: dict[str, Any], calibration: CalibrationProfile | None = None) -> PlanRequest:
    gpu: str | GpuSpec = gpu_from_dict(data["gpu_spec"]) if data.get("gpu_spec") else data["gpu"]
    return PlanRequest(
        model=data["model"],
        precision=data["precision"],
        gpu=gpu,
        group_size=data.get("group_size"),
        kv_dtype=data.get("kv_dtype", "bf16"),
        gpus_per_node=data.get("gpus_per_node", 8),
        max_model_len=data.get("max_model_len"),
        concurrency=data.get("concurrency", 1),
        tp=data.get("tp"),
        pp=data.get("pp"),
        ep=data.get("ep"),
        dp=data.get("dp"),
        gpu_memory_utilization=data.get("gpu_memory_utilization", 0.9),
        keep_bf16=tuple(data.get("keep_bf16") or ()),
        model_path=data.get("model_path"),
        engine=data.get("engine", "vllm"),
        engine_version=data.get("engine_version"),
        max_num_batched_tokens=data.get("max_num_batched_tokens"),
        max_num_seqs=data.get("max_num_seqs"),
        scheduler_recv_interval=data.get("scheduler_recv_interval"),
        input_len=data.get("input_len"),
        output_len=data.get("output_len"),
        cached_prefix_len=data.get("cached_prefix_len") or 0,
        arrival=data.get("arrival") or "burst",
        request_rate=data.get("request_rate"),
        range_ratio=1.0 if data.get("range_ratio") is None else data["range_ratio"],
        calibration=calibration,
    )
