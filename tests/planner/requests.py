"""The keyword arguments of planner.plan.PlanRequest as a TypedDict, for the tests' shared request dicts
(`PlanRequest(**LLAMA, tp=2)`): a dict annotated with it is checked key by key against the dataclass."""

from __future__ import annotations

from typing import Any, TypedDict, Unpack

from planner.calibrate.profile import CalibrationProfile
from planner.intervals import TeamEvidence
from planner.measured import MeasuredEvidence
from planner.plan import PlanRequest
from planner.specs import GpuSpec


class PlanArgs(TypedDict, total=False):
    model: str | dict[str, Any]
    precision: str
    gpu: str | GpuSpec
    group_size: int | None
    kv_dtype: str
    gpus_per_node: int
    max_model_len: int | None
    concurrency: int
    tp: int | None
    pp: int | None
    ep: int | None
    dp: int | None
    gpu_memory_utilization: float
    keep_bf16: tuple[str, ...]
    model_path: str | None
    engine: str
    engine_version: str | None
    max_num_batched_tokens: int | None
    max_num_seqs: int | None
    scheduler_recv_interval: int | None
    input_len: int | None
    output_len: int | None
    cached_prefix_len: int
    calibration: CalibrationProfile | None
    arrival: str
    request_rate: float | None
    range_ratio: float
    num_prompts: int | None
    evidence: TeamEvidence | None
    measured: MeasuredEvidence | None


def plan_request(*parts: PlanArgs, **overrides: Unpack[PlanArgs]) -> PlanRequest:
    """PlanRequest from shared argument dicts (later ones win) and keyword overrides."""
    merged: PlanArgs = {}
    for part in parts:
        merged.update(part)
    merged.update(overrides)
    return PlanRequest(**merged)
