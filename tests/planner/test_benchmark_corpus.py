"""The planner against published serving benchmarks (planner/catalog/benchmarks.yaml), issue 17's bounds:
TPOT within 10% median and 20% max, output tokens/s within 15% median, TTFT within 25% median, no
refusals. A figure known to fall outside is listed with its cause in the corpus and shown in the table
(README); it may not hide: every figure beyond a per-case bound must carry a cause, and every cause must
still be needed."""

import pytest

from planner import corpus

TPOT_MAX = 0.20


@pytest.fixture(scope="module")
def results() -> list[corpus.CaseResult]:
    return [corpus.run_case(case) for case in corpus.cases()]


def test_corpus_is_sourced_and_varied() -> None:
    cases = corpus.cases()
    assert len(cases) >= 20
    assert {c["engine"] for c in cases} >= {"vllm", "sglang"}
    assert {c["gpu"] for c in cases} >= {"h100-80g", "h200", "a100-80g", "b200", "mi300x"}
    assert {c["precision"] for c in cases} >= {"bf16", "fp8", "mxfp4", "nvfp4", "w4a16"}
    assert any("config" in c for c in cases)  # a dense model outside the catalog, as a config.json
    assert all(c["source"].startswith("https://") for c in cases)


def test_no_case_is_refused(results: list[corpus.CaseResult]) -> None:
    refused = {r.case["id"]: r.refused for r in results if r.refused}
    assert refused == {}


def test_tpot_within_bounds(results: list[corpus.CaseResult]) -> None:
    table = corpus.summary(results)
    assert table["tpot_ms"]["n"] >= 15
    assert table["tpot_ms"]["median"] <= corpus.BOUNDS["tpot_ms"]["median"]
    for result in results:
        error = result.errors.get("tpot_ms")
        if error is None:
            continue
        if corpus.outside(result.case, "tpot_ms"):
            assert abs(error) > TPOT_MAX, f"{result.case['id']}: listed as outside but within {TPOT_MAX:.0%}"
        else:
            assert abs(error) <= TPOT_MAX, f"{result.case['id']}: TPOT off by {error:+.0%} with no cause listed"


def test_tokens_per_second_median(results: list[corpus.CaseResult]) -> None:
    table = corpus.summary(results)
    assert table["output_tokens_per_s"]["n"] >= 10
    assert table["output_tokens_per_s"]["median"] <= corpus.BOUNDS["output_tokens_per_s"]["median"]


def test_ttft_median_over_every_case(results: list[corpus.CaseResult]) -> None:
    """The bound holds over every case, the listed ones included (again since issue 31 planned SGLang's
    eager prefill steps: 21.7%; it had missed since InferenceX's length spread was planned, 28.8%)."""
    every = corpus.summary(results)["ttft_ms"]
    assert every["n"] >= 20
    assert every["median"] <= corpus.BOUNDS["ttft_ms"]["median"]


def test_ttft_median_and_listed_causes(results: list[corpus.CaseResult]) -> None:
    within = corpus.summary(results, with_outside=False)["ttft_ms"]
    assert within["n"] >= 20
    assert within["median"] <= corpus.BOUNDS["ttft_ms"]["median"]
    for result in results:
        cause = corpus.outside(result.case, "ttft_ms")
        if cause:  # a listed cause must explain a real miss, not shelter a good figure
            assert abs(result.errors["ttft_ms"]) > corpus.BOUNDS["ttft_ms"]["median"], result.case["id"]


def test_markdown_table_lists_every_case_and_cause(results: list[corpus.CaseResult]) -> None:
    table = corpus.markdown(results)
    for case in corpus.cases():
        assert f"| {case['id']} |" in table
    assert table.count("†") >= 2 * sum(len(c.get("outside") or {}) for c in corpus.cases())


def _refused(tmp_path, monkeypatch, text: str, message: str) -> None:
    """A catalog holding `text` alone is refused with `message` (the cache is cleared either side)."""
    (tmp_path / "benchmarks.yaml").write_text(text)
    monkeypatch.setattr(corpus, "CATALOG_DIR", tmp_path)
    corpus.cases.cache_clear()
    try:
        with pytest.raises(ValueError, match=message):
            corpus.cases()
    finally:
        corpus.cases.cache_clear()


def test_corpus_rejects_a_malformed_entry(tmp_path, monkeypatch) -> None:
    text = (
        "- {id: x, source: 'http://example.org', engine: vllm, precision: bf16, gpu: h200, layout: {},"
        " concurrency: 1, input_len: 1, output_len: 1, statistic: mean, measured: {tpot_ms: 1}, model: m}\n"
    )
    _refused(tmp_path, monkeypatch, text, "source must be an https URL")


def test_corpus_engine_args_are_the_ones_the_model_reads(tmp_path, monkeypatch) -> None:
    """A case may carry flags of the source's launch command (SGLang's --scheduler-recv-interval); any
    other flag is refused rather than silently ignored."""
    assert any((c.get("engine_args") or {}).get("scheduler_recv_interval") for c in corpus.cases())
    text = (
        "- {id: x, source: 'https://example.org', engine: sglang, precision: bf16, gpu: h200, layout: {},"
        " concurrency: 1, input_len: 1, output_len: 1, statistic: mean, measured: {tpot_ms: 1}, model: m,"
        " engine_args: {enable_mixed_chunk: true}}\n"
    )
    _refused(tmp_path, monkeypatch, text, "engine_args takes scheduler_recv_interval")


def test_a_cached_prefix_follows_the_sweep_before_it() -> None:
    """A case's cached prefix is the prompt of the row its source ran before it on the same server
    (benchmarks.yaml explains why): shorter than its own prompt, and only on cases from a sweep."""
    cached = [c for c in corpus.cases() if c.get("cached_prefix_len")]
    assert cached
    for case in cached:
        assert 0 < case["cached_prefix_len"] < case["input_len"], case["id"]
        assert case["concurrency"] == 1, case["id"]


def test_corpus_rejects_a_cached_prefix_as_long_as_the_prompt(tmp_path, monkeypatch) -> None:
    text = (
        "- {id: x, source: 'https://example.org', engine: vllm, precision: bf16, gpu: h200, layout: {},"
        " concurrency: 1, input_len: 128, output_len: 1, statistic: mean, measured: {tpot_ms: 1}, model: m,"
        " cached_prefix_len: 128}\n"
    )
    _refused(tmp_path, monkeypatch, text, "cached_prefix_len")


def test_readme_and_docs_show_the_current_table(results: list[corpus.CaseResult]) -> None:
    """The README's and docs/planner.md's tables are bench/corpus.py's output, row for row: a model
    change that moves a figure must update them."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    rows = [line for line in corpus.markdown(results).splitlines() if line.startswith("| ")]
    for name in ("README.md", "docs/planner.md"):
        text = (root / name).read_text()
        missing = [row for row in rows if row not in text]
        assert missing == [], f"{name} lacks: {missing[:2]}"


# NIM's Llama-3.3-70B FP8 on 2 x H100 (TensorRT-LLM, FP8 KV): (input, output, the highest
# concurrency that ran without waiting for a slot, the lowest whose TTFT jumped ten-fold as requests
# queued for one).
OVERLOADED = [(5000, 500, 50, 100), (500, 2000, 150, 200), (1000, 1000, 200, 250), (20000, 2000, 5, 25)]


@pytest.mark.parametrize(("input_len", "output_len", "ran", "queued"), OVERLOADED)
def test_the_planner_refuses_exactly_where_the_server_ran_out_of_room(
    input_len: int, output_len: int, ran: int, queued: int
) -> None:
    """Every row NIM's page shows queueing (TTFT from 8 s to 963 s) the planner refuses, saying how
    many sequences fit; the row before it fits. At 5000 / 500 the server's own plateau (ITL and
    throughput flat from 100 on: 920 tok/s x 0.093 s = 86 running) is within 10% of the planner's."""
    from planner.plan import PlanRequest, plan

    def chosen(concurrency: int):
        request = PlanRequest(
            model="llama-3.1-70b",
            precision="fp8",
            gpu="h100-80g",
            tp=2,
            pp=1,
            ep=1,
            dp=1,
            max_model_len=-(-(input_len + output_len) // 16) * 16,
            concurrency=concurrency,
            engine="trtllm",
            kv_dtype="fp8",
            input_len=input_len,
            output_len=output_len,
        )
        return plan(request).chosen

    assert chosen(ran).fits
    refused = chosen(queued)
    assert not refused.fits
    assert ran <= refused.max_concurrency < queued
    if input_len == 5000:
        assert abs(refused.max_concurrency / 86 - 1) <= 0.10, refused.max_concurrency
