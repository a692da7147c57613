"""The validation corpus: real engine startup logs (corpus.yaml) and the plan's error on each figure.

`python -m planner.validation` prints every case and the median / max error per figure.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from planner.checklog import BOUNDS, FigureCheck, compare, parse_log
from planner.engines import V0_PCIE_NON_TORCH_GIB, engine_profile
from planner.plan import PlanRequest, plan
from planner.specs import gpu

CORPUS = Path(__file__).resolve().parent / "corpus.yaml"


@dataclass(frozen=True, slots=True)
class CaseResult:
    case_id: str
    source: str
    checks: tuple[FigureCheck, ...]
    outside: str | None  # the cause, when the corpus says a bounded figure is outside its bound

    def out_of_bounds(self) -> list[FigureCheck]:
        return [
            check
            for check in self.checks
            if check.name in BOUNDS and check.error is not None and abs(check.error) > BOUNDS[check.name]
        ]


def load_corpus() -> list[dict[str, Any]]:
    cases = yaml.safe_load(CORPUS.read_text(encoding="utf-8"))
    if not isinstance(cases, list):
        raise ValueError("corpus.yaml must be a list of cases")
    return cases


def run_case(case: dict[str, Any]) -> CaseResult:
    log = parse_log(case["log"])
    settings = dict(case.get("settings") or {})
    engine = engine_profile(case.get("engine", "vllm"), case.get("engine_version"))
    # The logged run used the engine's own defaults wherever the thread names no flag.
    default_tokens, default_seqs = engine.defaults(gpu(case["gpu"]), settings.get("max_model_len", 8192))
    request = PlanRequest(
        model=case["model"],
        precision=case["precision"],
        gpu=case["gpu"],
        tp=settings.get("tp", 1),
        pp=settings.get("pp", 1),
        ep=1,
        dp=1,
        gpu_memory_utilization=settings.get("gpu_memory_utilization", 0.9),
        max_model_len=settings.get("max_model_len"),
        max_num_batched_tokens=settings.get("max_num_batched_tokens", default_tokens),
        max_num_seqs=settings.get("max_num_seqs", default_seqs),
        engine=case.get("engine", "vllm"),
        engine_version=case.get("engine_version"),
    )
    result = plan(request)
    checks = compare(log, result)
    if case.get("given_pool"):
        # The tokens the logged pool holds (bytes per token, layer split and blocks), and figures before
        # the pool (the weights) as planned.
        pool = log.figures["available_kv_cache_memory"]
        memory = result.chosen.memory
        block = result.engine.block_size_tokens
        tokens = int(pool // memory.kv_bytes_per_token_per_gpu) // block * block
        checks = [check for check in checks if check.name not in ("available_kv_cache_memory", "gpu_kv_cache_tokens")]
        checks.append(FigureCheck("gpu_kv_cache_tokens", tokens, log.figures["gpu_kv_cache_tokens"]))
    return CaseResult(case_id=case["id"], source=case["source"], checks=tuple(checks), outside=case.get("outside"))


def run_corpus() -> list[CaseResult]:
    return [run_case(case) for case in load_corpus()]


def error_table(results: list[CaseResult]) -> str:
    """Median and max |error| per figure over the corpus, in Markdown."""
    errors: dict[str, list[float]] = {}
    for result in results:
        for check in result.checks:
            if check.error is not None:
                errors.setdefault(check.name, []).append(abs(check.error))
    lines = ["| figure | cases | median error | max error |", "|---|---|---|---|"]
    for name, values in sorted(errors.items()):
        lines.append(f"| {name} | {len(values)} | {statistics.median(values):.1%} | {max(values):.1%} |")
    return "\n".join(lines)


def case_table(results: list[CaseResult]) -> str:
    lines = ["| case | figure | plan | log | error |", "|---|---|---|---|---|"]
    for result in results:
        for check in result.checks:
            tokens = check.name.endswith("tokens")
            unit: Callable[[float], str] = (lambda v: f"{v:,.0f}") if tokens else (lambda v: f"{v / (1 << 30):.2f} GiB")
            error = f"{check.error:+.1%}" if check.error is not None else "-"
            lines.append(
                f"| {result.case_id} | {check.name} | {unit(check.planned)} | {unit(check.logged)} | {error} |"
            )
    return "\n".join(lines)


# Leave-one-source-out (issue 31). Reserves of planner/engines.py read off this corpus's own logs
# (README: "What was fitted on which case"): each with the source it came from, and what stands in
# for it when that source's cases are scored without it. Reserves backed by two sources (vLLM V1's
# sampler copies: the PR 21429 and issue 23278 logs) keep their value: the other source backs it.
GIB = 1 << 30
FITTED_RESERVES: tuple[tuple[str, str, str, str, str], ...] = (
    # (engine, generation, field, the source it was read from, the profile [and field] whose figure stands
    # in, or "median of the others" for a reserve read off several sources)
    ("vllm", "v0", "non_torch_single_gpu_bytes", "vllm/issues/10517", "vllm 0.11"),
    ("vllm", "v1", "non_torch_multi_gpu_bytes", "vllm/pull/21429", "vllm 0.6"),
    ("sglang", "0.4", "non_torch_multi_gpu_bytes", "vllm/issues/21348", "vllm 0.11"),
    # vLLM V0 over PCIe: the median of the other logs' figures (engines.V0_PCIE_NON_TORCH_GIB).
    ("vllm", "v0", "non_torch_multi_gpu_pcie_bytes", "vllm/issues/15815", "median of the others"),
    # Over PCIe the same cause as one GPU's: the CUDA context, with no NVLink buffers (the RTX 3090's, vLLM 0.6.4).
    (
        "sglang",
        "0.4",
        "non_torch_multi_gpu_pcie_bytes",
        "didier-durand/llms-in-clouds",
        "vllm 0.6 non_torch_single_gpu_bytes",
    ),
)


@dataclass(frozen=True, slots=True)
class HeldOut:
    source: str
    results: tuple[CaseResult, ...]
    stand_ins: tuple[str, ...]  # "field of engine generation: fitted -> stand-in"


def _source_key(source: str) -> str:
    """The issue or pull request a case's source names (cases from one thread are one source)."""
    return source.split(" ", 1)[0].removeprefix("https://github.com/")


def leave_one_source_out() -> list[HeldOut]:
    """Each source's cases planned with the reserves read off its own logs replaced by another
    profile's figure for the same cause (the engine still in the code's arithmetic)."""
    from planner.engines import engine_profile, substituted

    cases = load_corpus()
    held = []
    for source in sorted({_source_key(case["source"]) for case in cases}):
        overrides: dict[tuple[str, str], dict[str, Any]] = {}
        stand_ins = []
        for engine, generation, name, fitted_on, stand_in in FITTED_RESERVES:
            if fitted_on not in source:
                continue
            if stand_in == "median of the others":  # a reserve read off several sources' logs
                others = [gib for key, gib in V0_PCIE_NON_TORCH_GIB.items() if key not in source]
                value = int(statistics.median(others) * GIB)
                stand_in = "the other sources' median,"
            else:
                other_engine, other_version, *other_field = stand_in.split(" ")
                other = engine_profile(other_engine, other_version)
                value = getattr(other, other_field[0] if other_field else name)
                stand_in += "'s"
            overrides.setdefault((engine, generation), {})[name] = value
            stand_ins.append(f"{engine} {generation} {name} -> {stand_in} {value / GIB:.2f} GiB")
        with substituted(overrides):
            results = tuple(run_case(case) for case in cases if _source_key(case["source"]) == source)
        held.append(HeldOut(source, results, tuple(stand_ins)))
    return held
