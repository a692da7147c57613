"""Leave-one-source-out scoring of the benchmark corpus (issue 31): each source's cases scored with the
efficiency factors fitted without it, so a factor set against one publisher's runs is not credited
with predicting them."""

from __future__ import annotations

from typing import Any

import pytest

from planner import corpus
from planner.efficiency import default_factors, efficiency_catalog, substituted

NIM = "https://docs.nvidia.com/nim/benchmarking/llm/1.0.0/performance"
TT_A100 = "https://github.com/tenstorrent/tt-inference-server/issues/340"
TT_AWQ = "https://github.com/tenstorrent/tt-inference-server/issues/356"
MI300X = "https://github.com/SemiAnalysisAI/InferenceX/pull/1053"


def test_a_factor_only_the_left_out_source_backs_falls_back() -> None:
    catalog = efficiency_catalog()
    fitted, fallen, _refitted, _ = corpus.held_out_catalog(MI300X, catalog, refit=False)
    # vLLM's MXFP4 experts on the MI300X (Triton's emulated FP4 dot on CDNA3) came from this source's runs
    # alone: without it, the format's multiplier on other GPUs. The MI300X's own figures stand on the
    # ERNIE 4.5 runs too, so they stay.
    assert catalog["gpu_precisions"]["mi300x"]["mxfp4"]["moe_memory"] != catalog["precisions"]["mxfp4"]["moe_memory"]
    assert fitted["gpu_precisions"]["mi300x"]["mxfp4"] == {}
    assert "gpu_precisions.mi300x.mxfp4.moe_memory -> precisions.mxfp4" in fallen
    assert fitted["mi300x"]["moe_memory"] == catalog["mi300x"]["moe_memory"]
    # The A100's stand on three publishers (tenstorrent's sweeps, Qwen's speed benchmark, the DeepSeek-R1-AWQ
    # model card): without one, they are refitted on the others, not dropped.
    fitted, fallen, _, _ = corpus.held_out_catalog(TT_A100, catalog, refit=False)
    assert fitted["a100-80g"] == catalog["a100-80g"]
    assert fallen == []
    # TensorRT-LLM's overheads came from NIM's page alone: without it, the other engines' median.
    fitted, fallen, _, _ = corpus.held_out_catalog(NIM, catalog, refit=False)
    assert fitted["engines"]["trtllm"]["request_overhead_ms"] == 3.0
    assert catalog["engines"]["trtllm"]["request_overhead_ms"] == 2.0  # the committed catalog is untouched


def test_a_measured_factor_is_kept_whichever_source_is_left_out() -> None:
    catalog = efficiency_catalog()
    assert "precisions.w4a16.memory" in catalog["measured"]
    fitted, _, _, _ = corpus.held_out_catalog(TT_AWQ, catalog, refit=False)
    assert fitted["precisions"]["w4a16"]["memory"] == catalog["precisions"]["w4a16"]["memory"]


def test_a_grouped_expert_multiplier_falls_back_to_its_formats_dense_one() -> None:
    """Set against the corpus and backed by no other source, a format's grouped-expert multiplier falls back
    to the format's dense one: the same INT4 unpacking (measured 0.45 on the H200), not BF16's speed. Before,
    it fell back to none and issue 356's short-prompt TTFT went from +19% and +2% to -26%. (Two publishers of
    DeepSeek AWQ read W4A16's now, so the rule is exercised on its own.)"""
    import copy

    catalog = efficiency_catalog()
    fitted: dict[str, Any] = copy.deepcopy(catalog)
    fallen: list[str] = []
    corpus._fall_back(catalog, fitted, ("precisions", "w4a16", "moe_memory"), fallen)
    dense = catalog["precisions"]["w4a16"]["memory"]
    assert fitted["precisions"]["w4a16"]["moe_memory"] == dense
    assert fallen == [f"precisions.w4a16.moe_memory -> {dense:g} (precisions.w4a16.memory)"]
    corpus._fall_back(catalog, fitted, ("engines", "vllm", "w4a16_gemm_floor_us"), fallen)
    assert "w4a16_gemm_floor_us" not in fitted["engines"]["vllm"]  # no other engine has one: no floor
    assert fallen[-1] == "engines.vllm.w4a16_gemm_floor_us -> none"


@pytest.mark.slow
@pytest.mark.cpu_bound
def test_a_factor_the_other_sources_do_not_move_falls_back_instead_of_keeping_the_left_out_fit() -> None:
    """Without tenstorrent's sweep, the A100's prefill compute is read only by prompts of 1 or 2 tokens (Qwen's
    sweep, the DeepSeek-R1-AWQ card): the refit grid moves their errors by nothing, so the committed 0.62, set
    with the left-out sweep's TTFT, would be its own fit scored on itself. It falls back to the default
    (before, with a barely informative refit, it drifted to 0.806 and the sweep's held-out TTFT went from
    22% to 32% median)."""
    catalog = efficiency_catalog()
    fitted, fallen, refitted, _ = corpus.held_out_catalog(TT_A100, catalog)
    assert f"a100-80g.compute -> default {catalog['default']['compute']:g}" in fallen
    assert "compute" not in fitted["a100-80g"]
    # a factor they do inform is still refitted on them, not dropped
    assert "memory" in fitted["a100-80g"]
    assert not any(line.startswith("a100-80g.compute") for line in refitted)


def test_a_substituted_catalog_is_what_plans_read_and_only_inside_the_block() -> None:
    catalog = efficiency_catalog()
    fitted, _, _, _ = corpus.held_out_catalog(MI300X, catalog, refit=False)
    own, other = (
        catalog["gpu_precisions"]["mi300x"]["mxfp4"]["moe_memory"],
        catalog["precisions"]["mxfp4"]["moe_memory"],
    )
    moe = catalog["mi300x"]["moe_memory"]
    with substituted(fitted):
        assert default_factors("mi300x", "mxfp4").moe_memory == pytest.approx(moe * other)
    assert default_factors("mi300x", "mxfp4").moe_memory == pytest.approx(moe * own)


@pytest.fixture
def held(corpus_held_out: tuple[corpus.HeldOut, ...]) -> list[corpus.HeldOut]:
    return list(corpus_held_out)  # the session's refits (tests/planner/conftest.py)


def _held_out_summary(held: list[corpus.HeldOut], *, with_outside: bool) -> dict[str, dict[str, float]]:
    return corpus.summary([result for one in held for result in one.results], with_outside=with_outside)


@pytest.mark.slow
@pytest.mark.cpu_bound
def test_every_case_is_scored_once_without_its_own_source(held: list[corpus.HeldOut]) -> None:
    scored = [result.case["id"] for one in held for result in one.results]
    assert sorted(scored) == sorted(case["id"] for case in corpus.cases())
    assert all(result.case["source"] == one.source for one in held for result in one.results)
    # (Held out is not necessarily worse than in-sample: the committed factors were set by hand against all
    # figures, and a refit on the other sources can land closer for some; it is the figure to quote.)


@pytest.mark.slow
@pytest.mark.cpu_bound
def test_held_out_ttft_median_over_every_figure_meets_issue_31s_bound(held: list[corpus.HeldOut]) -> None:
    """Issue 31's acceptance over every figure, the † ones too: TTFT 21.4% median held out (25%), since
    SGLang's eager prefill steps are planned (26.8% before, with the SGLang Cookbook's cases; 27.3%
    without them); TPOT 5.1% (10%)."""
    every = _held_out_summary(held, with_outside=True)
    assert every["ttft_ms"]["n"] >= 80
    assert every["ttft_ms"]["median"] <= 0.25
    assert every["tpot_ms"]["median"] <= 0.10


@pytest.mark.slow
@pytest.mark.cpu_bound
def test_held_out_figures_the_model_claims_meet_issue_31s_medians(held: list[corpus.HeldOut]) -> None:
    """Scored as the in-sample bounds are (tests/planner/test_benchmark_corpus.py: the figures listed
    outside the model with their cause, †, are scored and printed but not held to the bound), the
    held-out figures meet issue 31's medians: TPOT 4.1% (10%), TTFT 13.5% (25%)."""
    claimed = _held_out_summary(held, with_outside=False)
    assert claimed["tpot_ms"]["n"] >= 60
    assert claimed["ttft_ms"]["n"] >= 30
    assert claimed["tpot_ms"]["median"] <= 0.10
    assert claimed["ttft_ms"]["median"] <= 0.25


@pytest.mark.slow
@pytest.mark.cpu_bound
@pytest.mark.xfail(
    strict=True,
    reason="issue 31's TPOT max (25%) held out: two kernel paths stand on one source each and fall back without "
    "it: vLLM's MXFP4 expert path on the MI300X (InferenceX PR 1053: 31% at 256 sequences) and vLLM 0.7's block-FP8 "
    "decode path (dstack's DeepSeek-R1 runs: 42-62% fast on the default path) - docs/planner.md",
)
def test_held_out_tpot_max_within_issue_31s_bound(held: list[corpus.HeldOut]) -> None:
    assert _held_out_summary(held, with_outside=False)["tpot_ms"]["max"] <= 0.25


def test_each_engines_fitted_overheads_name_the_sources_they_stand_on() -> None:
    """A constant backed by one source says so: the catalog's `fitted_on` is the set of corpus sources
    whose cases read the engine's overheads (a new source must be added to it)."""
    catalog = efficiency_catalog()
    for engine, entry in catalog["engines"].items():
        readers = {
            case["source"].removeprefix("https://")
            for case in corpus.cases()
            if corpus.reads(catalog, ("engines", engine, "request_overhead_ms"), case)
        }
        assert set(entry["fitted_on"]) == readers, engine
    assert len(catalog["engines"]["trtllm"]["fitted_on"]) == 1


def test_kv_tokens_held_out_of_the_logs_their_reserves_came_from() -> None:
    """The startup-log corpus scored without the log each reserve was read from (the reserve replaced
    by another profile's figure for the same cause): issue 31's bound, KV tokens within 5% median and
    10% max, on every case, and on the logs the model claims (as the in-sample bounds: the one case listed
    outside with its cause, LMCache's buffers, is scored and printed). Before SGLang's weights counted the
    caching allocator's rounding (tests/planner/test_allocator.py), the 4 x L4 log was +10.2% held out and
    the 7 cases then in the corpus 6.3% median / 10.2% max (1.7% / 7.2% now). Of the 14 cases, 7 give
    their pool (the KV tokens check the bytes per token); the 7 whose pool is planned are held to the
    same bounds: 3.3% median / 7.2% max held out (5.5% before the all-reduce copies in V0's activation
    peak brought the 2 x L40S pool from +5.2% to +2.7%)."""
    import statistics

    from planner.engines import engine_profile
    from planner.validation import leave_one_source_out, load_corpus

    listed = {case["id"] for case in load_corpus() if case.get("outside")}
    held = leave_one_source_out()
    errors = {
        result.case_id: abs(check.error)
        for one in held
        for result in one.results
        for check in result.checks
        if check.name == "gpu_kv_cache_tokens" and check.error is not None
    }
    assert len(errors) == 14
    predicted = {case["id"] for case in load_corpus() if not case.get("given_pool")}
    pools = [error for case, error in errors.items() if case in predicted]  # the pool planned, not given
    assert len(pools) == 7
    assert statistics.median(pools) <= 0.05
    assert max(pools) <= 0.10
    assert statistics.median(errors.values()) <= 0.05
    assert max(errors.values()) <= 0.10
    claimed = [error for case, error in errors.items() if case not in listed]
    assert len(claimed) == 13  # listed: LMCache's buffers (vllm-21348)
    assert statistics.median(claimed) <= 0.05
    assert max(claimed) <= 0.10
    rtx = next(one for one in held if one.source.endswith("vllm/issues/10517"))
    assert rtx.stand_ins == ("vllm v0 non_torch_single_gpu_bytes -> vllm 0.11's 0.15 GiB",)
    assert engine_profile("vllm", "0.6.4").non_torch_single_gpu_bytes == int(0.35 * (1 << 30))  # restored
    l4 = next(one for one in held if one.source.startswith("didier-durand/llms-in-clouds"))
    # over PCIe the stand-in is one GPU's CUDA context (the RTX 3090's), not the NVLink figure
    assert l4.stand_ins == (
        "sglang 0.4 non_torch_multi_gpu_pcie_bytes -> vllm 0.6 non_torch_single_gpu_bytes's 0.35 GiB",
    )


@pytest.mark.cpu_bound
def test_a_refit_is_not_steered_by_figures_the_corpus_lists_outside_the_model() -> None:
    """A figure listed with a documented cause outside the model (`outside`, † in the table) is scored
    but does not move a refitted factor. Before, DeepSeek-R1-AWQ's seven TPOT figures (issue 356: then
    about 7.5 ms a step the planner could not explain; the W4A16 floor models it now) pulled the default
    grouped-MoE streaming efficiency from 0.62 to 0.43 when InferenceX 870 was left out, and its SGLang
    DeepSeek runs came out 30-40% slow."""
    listed = [case for case in corpus.cases() if case.get("outside", {}).get("tpot_ms")]
    assert listed
    only_outside = [{**case, "measured": {"tpot_ms": case["measured"]["tpot_ms"]}} for case in listed]
    # Every figure of these cases is outside the model: nothing is left to steer a refit.
    assert corpus._objective(only_outside, efficiency_catalog()) == 0.0
    _, _, refitted, _ = corpus.held_out_catalog(
        "https://github.com/SemiAnalysisAI/InferenceX/issues/870", efficiency_catalog()
    )
    # Pulled by nothing but the figures the model can explain, it does not sink toward the AWQ runs.
    moved = [line for line in refitted if line.startswith("default.moe_memory")]
    assert all(float(line.split(" -> ")[1]) >= efficiency_catalog()["default"]["moe_memory"] for line in moved), moved


def test_each_gpus_fitted_factors_name_the_sources_they_stand_on() -> None:
    """The same for a GPU's own factors: `gpu_fitted_on` is the set of corpus sources whose cases read
    them (a new source on that GPU must be added to it)."""
    catalog = efficiency_catalog()
    for gpu, sources in catalog["gpu_fitted_on"].items():
        readers = {
            case["source"].removeprefix("https://")
            for case in corpus.cases()
            if any(corpus.reads(catalog, (gpu, name), case) for name in catalog[gpu])
        }
        assert set(sources) == readers, gpu
    fitted = {path[0] for path in corpus.fitted_factors(catalog)}
    read = {gpu for gpu in fitted if any(case["gpu"] == gpu for case in corpus.cases())}
    assert read == set(catalog["gpu_fitted_on"])


def test_a_plan_on_figures_from_one_source_says_so() -> None:
    """gpt-oss-120b on one MI300X under vLLM (InferenceX PR 1053's deployment): the MI300X's own factors
    stand on two sources now (that PR and the SGLang Cookbook's ERNIE 4.5 runs), but vLLM's MXFP4 expert
    path on CDNA3 on that PR alone, and held out its TPOT is 16-32% fast (bench/corpus.py). The plan says
    so; a BF16 plan on the MI300X and an H100 plan under vLLM (several sources) do not."""
    from planner.plan import PlanRequest, plan

    mi300x = plan(PlanRequest(model="gpt-oss-120b", precision="mxfp4", gpu="mi300x", tp=1, concurrency=64))
    estimate = mi300x.as_contract()["throughput_estimate"]
    assert estimate["single_source"] == ["mxfp4 on mi300x: github.com/SemiAnalysisAI/InferenceX/pull/1053"]
    assert any("one published source only: mxfp4 on mi300x" in note for note in mi300x.notes)
    bf16 = plan(
        PlanRequest(model="qwen3-30b-a3b", precision="bf16", gpu="mi300x", tp=1, concurrency=64, engine="sglang")
    )
    assert bf16.throughput.single_source == ()
    # The path's figure is a grouped-expert one: a plan without MXFP4 experts does not read it.
    dense = plan(PlanRequest(model="llama-3.1-8b", precision="mxfp4", gpu="mi300x", tp=1))
    assert dense.throughput.single_source == ()
    h100 = plan(PlanRequest(model="gpt-oss-120b", precision="mxfp4", gpu="h100-80g", tp=8, concurrency=64))
    assert "single_source" not in h100.as_contract()["throughput_estimate"]
    sglang = plan(PlanRequest(model="deepseek-v3", precision="fp8", gpu="h200", tp=8, engine="sglang"))
    # the H200's own figure stands on InferenceX 870 and the DeepSeek-R1-AWQ card; SGLang's overheads on 870
    # and the SGLang Cookbook's two pages
    assert sglang.throughput.single_source == ()
    b200 = plan(PlanRequest(model="deepseek-v3", precision="fp8", gpu="b200", tp=8, engine="vllm"))
    assert b200.throughput.single_source == ()  # InferenceX 870 and the cookbook's pages
    trtllm = plan(PlanRequest(model="llama-3.1-70b", precision="fp8", gpu="h100-80g", tp=2, engine="trtllm"))
    assert trtllm.throughput.single_source == (
        "trtllm overheads: docs.nvidia.com/nim/benchmarking/llm/1.0.0/performance",
    )


def test_each_gpu_kernel_path_names_the_sources_it_stands_on() -> None:
    """`gpu_precisions_fitted_on` is the set of corpus sources whose cases read each fitted kernel path."""
    catalog = efficiency_catalog()
    measured = set(catalog["measured"])
    for gpu, formats in catalog["gpu_precisions"].items():
        for fmt, entry in formats.items():
            fitted = [name for name in entry if f"gpu_precisions.{gpu}.{fmt}.{name}" not in measured]
            readers = {
                case["source"].removeprefix("https://")
                for case in corpus.cases()
                if any(corpus.reads(catalog, ("gpu_precisions", gpu, fmt, name), case) for name in fitted)
            }
            listed = catalog.get("gpu_precisions_fitted_on", {}).get(gpu, {}).get(fmt, [])
            assert set(listed) == readers, (gpu, fmt)


def test_a_formats_figure_is_not_read_where_a_gpu_has_its_own_path_for_it() -> None:
    """MXFP4 experts on the MI300X take gpu_precisions.mi300x.mxfp4.moe_memory, not precisions.mxfp4's:
    counting PR 1053's runs as readers of Hopper's figure would refit it on runs it does not move."""
    catalog = efficiency_catalog()
    mi300x = next(c for c in corpus.cases() if c["gpu"] == "mi300x" and c["precision"] == "mxfp4")
    h100 = next(c for c in corpus.cases() if c["gpu"] == "h100-80g" and c["precision"] == "mxfp4")
    assert not corpus.reads(catalog, ("precisions", "mxfp4", "moe_memory"), mi300x)
    assert corpus.reads(catalog, ("precisions", "mxfp4", "moe_memory"), h100)
    assert corpus.reads(catalog, ("gpu_precisions", "mi300x", "mxfp4", "moe_memory"), mi300x)
