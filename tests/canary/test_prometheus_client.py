"""The PromQL client's pure parts: label matchers escaped, the documented answer shapes parsed,
NaN/Inf dropped (no data is no sample), errors named."""

from __future__ import annotations

import pytest

from governance.canary.prometheus import PrometheusError, engine_queries, metric_names_of, parse_matrix, selector


def test_selectors_escape_values_and_refuse_bad_label_names() -> None:
    assert selector({"deployment": 'can"ary\\'}) == '{deployment="can\\"ary\\\\"}'
    with pytest.raises(ValueError, match="label name"):
        selector({"bad-name": "x"})


def test_the_engines_own_metric_names() -> None:
    vllm = engine_queries("vllm", {"deployment": "canary"})
    assert 'vllm:time_to_first_token_seconds_sum{deployment="canary"}' in vllm["ttft_seconds"]
    assert "vllm:inter_token_latency_seconds_count" in vllm["inter_token_latency_seconds"]
    assert "vllm:kv_cache_usage_perc" in vllm["kv_cache_usage"]
    assert "vllm:num_preemptions_total" in vllm["preemptions_per_second"]
    assert "vllm:prefix_cache_hits_total" in vllm["prefix_cache_hit_rate"]
    sglang = engine_queries("sglang", {"deployment": "canary"})
    assert "sglang:queue_time_seconds_sum" in sglang["queue_time_seconds"]
    assert "sglang:token_usage" in sglang["kv_cache_usage"]
    with pytest.raises(ValueError, match="engine"):
        engine_queries("tgi", {})


def test_a_matrix_answer_is_parsed_and_non_finite_values_dropped() -> None:
    body = {
        "status": "success",
        "data": {
            "resultType": "matrix",
            "result": [
                {"metric": {"deployment": "canary"}, "values": [[1, "0.2"], [2, "NaN"], [3, "+Inf"], [4, "0.3"]]}
            ],
        },
    }
    [series] = parse_matrix(body)
    assert series.labels == {"deployment": "canary"}
    assert series.values == [(1.0, 0.2), (4.0, 0.3)]


@pytest.mark.parametrize(
    "body",
    [
        {"status": "error", "errorType": "bad_data", "error": "parse error"},
        {"status": "success", "data": {"resultType": "vector", "result": []}},
        {"status": "success", "data": {"resultType": "matrix", "result": [{"values": [["x", "1"]]}]}},
        [],
    ],
)
def test_an_error_or_another_shape_is_a_prometheus_error(body: object) -> None:
    with pytest.raises(PrometheusError):
        parse_matrix(body)


def test_an_engine_without_metrics_of_its_own_is_read_under_the_names_it_is_planned_as() -> None:
    # transformers serve exports no serving metrics; it is planned as vLLM (a stated stand-in)
    assert metric_names_of("transformers") == "vllm"
    assert engine_queries("transformers", {"deployment": "c"}) == engine_queries("vllm", {"deployment": "c"})
    assert metric_names_of("sglang") == "sglang"
    with pytest.raises(ValueError, match="no metric names known for 'tensorrt_llm'"):
        engine_queries("tensorrt_llm", {"deployment": "c"})
