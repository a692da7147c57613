"""A PromQL client over Prometheus' HTTP API (`GET /api/v1/query_range`), and the serving engines'
own metric names as the queries the canary analysis compares.

Standard library only (urllib, with a timeout on every call). Prometheus answers
`{"status": "success", "data": {"resultType": "matrix", "result": [{"metric": {...},
"values": [[<unix time>, "<value>"], ...]}]}}`; an error is `{"status": "error", "errorType",
"error"}` (HTTP 400/422/503). Values are strings; `NaN` and `±Inf` (an empty rate window) are
dropped: no data is no sample, never a zero.

The queries (per deployment, its label matchers `selector`, e.g. `{"deployment": "canary"}`):
latency histograms as the mean over each `RATE_WINDOW` (`rate(_sum) / rate(_count)`), gauges as
they are, counters as rates. vLLM's counters are exposed with the `_total` suffix
(prometheus_client's convention: `vllm:num_preemptions` is scraped as `vllm:num_preemptions_total`).
"""

from __future__ import annotations

import json
import math
import re
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from governance.canary.verdict import MetricRule
from planner.engines.registry import serving_engine

RATE_WINDOW = "1m"
LABEL_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")


class PrometheusError(RuntimeError):
    """Prometheus did not answer a query (unreachable, HTTP error, an error answer, a bad shape)."""


@dataclass(frozen=True, slots=True)
class Series:
    labels: dict[str, str]
    values: list[tuple[float, float]]  # (unix time, value), finite values only


def selector(labels: Mapping[str, str]) -> str:
    """`{name="value",...}` with the values escaped as PromQL strings; a bad label name is refused."""
    parts = []
    for name, value in sorted(labels.items()):
        if not LABEL_NAME.match(name):
            raise ValueError(f"selector: {name!r} is not a Prometheus label name")
        escaped = str(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
        parts.append(f'{name}="{escaped}"')
    return "{" + ",".join(parts) + "}"


def _histogram_mean(name: str, sel: str) -> str:
    return f"sum(rate({name}_sum{sel}[{RATE_WINDOW}])) / sum(rate({name}_count{sel}[{RATE_WINDOW}]))"


def _ratio(hits: str, queries: str, sel: str) -> str:
    return f"sum(rate({hits}{sel}[{RATE_WINDOW}])) / sum(rate({queries}{sel}[{RATE_WINDOW}]))"


# The metrics compared, per engine: (the analysis' name, how it is judged, the PromQL for a selector).
# Allowed changes are the defaults Kayenta users start from for latency (20%) and tighter for
# saturation; an organisation tunes them here.
RULES: dict[str, MetricRule] = {
    "ttft_seconds": MetricRule("ttft_seconds", allowed_change=0.2),
    "inter_token_latency_seconds": MetricRule("inter_token_latency_seconds", allowed_change=0.2),
    "e2e_request_latency_seconds": MetricRule("e2e_request_latency_seconds", allowed_change=0.2),
    "queue_time_seconds": MetricRule("queue_time_seconds", allowed_change=0.5),
    "kv_cache_usage": MetricRule("kv_cache_usage", allowed_change=0.25),
    "num_requests_waiting": MetricRule("num_requests_waiting", allowed_change=0.5),
    "preemptions_per_second": MetricRule("preemptions_per_second", allowed_change=0.5),
    "prefix_cache_hit_rate": MetricRule("prefix_cache_hit_rate", allowed_change=0.1, worse="decrease"),
}

ENGINE_QUERIES: dict[str, dict[str, Any]] = {
    "vllm": {
        "ttft_seconds": lambda s: _histogram_mean("vllm:time_to_first_token_seconds", s),
        "inter_token_latency_seconds": lambda s: _histogram_mean("vllm:inter_token_latency_seconds", s),
        "e2e_request_latency_seconds": lambda s: _histogram_mean("vllm:e2e_request_latency_seconds", s),
        "queue_time_seconds": lambda s: _histogram_mean("vllm:request_queue_time_seconds", s),
        "kv_cache_usage": lambda s: f"max(vllm:kv_cache_usage_perc{s})",
        "num_requests_waiting": lambda s: f"sum(vllm:num_requests_waiting{s})",
        "preemptions_per_second": lambda s: f"sum(rate(vllm:num_preemptions_total{s}[{RATE_WINDOW}]))",
        "prefix_cache_hit_rate": lambda s: _ratio("vllm:prefix_cache_hits_total", "vllm:prefix_cache_queries_total", s),
    },
    "sglang": {
        "ttft_seconds": lambda s: _histogram_mean("sglang:time_to_first_token_seconds", s),
        "inter_token_latency_seconds": lambda s: _histogram_mean("sglang:inter_token_latency_seconds", s),
        "e2e_request_latency_seconds": lambda s: _histogram_mean("sglang:e2e_request_latency_seconds", s),
        "queue_time_seconds": lambda s: _histogram_mean("sglang:queue_time_seconds", s),
        "kv_cache_usage": lambda s: f"max(sglang:token_usage{s})",
        "num_requests_waiting": lambda s: f"sum(sglang:num_queue_reqs{s})",
        "preemptions_per_second": lambda s: f"sum(sglang:num_retracted_reqs{s})",  # a gauge in SGLang
        "prefix_cache_hit_rate": lambda s: f"avg(sglang:cache_hit_rate{s})",
    },
}


def metric_names_of(engine: str) -> str:
    """The engine whose metric names `engine`'s series carry: its own, or for an engine that exports
    none (`transformers serve`, the embedded default's CPU engine) the one it is planned as (vLLM):
    the same stated stand-in as its capacity plan (planner/engines/transformers.py), so a canary it
    serves is compared on series an exporter of vLLM's names provides."""
    if engine in ENGINE_QUERIES:
        return engine
    try:
        planned_as = serving_engine(engine).planned_as
    except ValueError:
        planned_as = None
    if planned_as in ENGINE_QUERIES:
        return str(planned_as)
    raise ValueError(f"engine: no metric names known for {engine!r} (one of {', '.join(ENGINE_QUERIES)})")


def engine_queries(engine: str, labels: Mapping[str, str]) -> dict[str, str]:
    """The PromQL of each compared metric for `engine` over the series `labels` select."""
    names = metric_names_of(engine)
    sel = selector(labels)
    return {metric: build(sel) for metric, build in ENGINE_QUERIES[names].items()}


class PromClient:
    """Range queries against one Prometheus server."""

    def __init__(self, base_url: str, *, timeout_s: float = 10.0, headers: Mapping[str, str] | None = None) -> None:
        if not base_url.startswith(("http://", "https://")):
            raise ValueError("prometheus url: must be an http(s) URL")
        self.base_url = base_url.rstrip("/")
        self.timeout_s = timeout_s
        self.headers = dict(headers or {})

    def query_range(self, query: str, *, start: float, end: float, step: float) -> list[Series]:
        params = urllib.parse.urlencode({"query": query, "start": f"{start:.3f}", "end": f"{end:.3f}", "step": step})
        request = urllib.request.Request(f"{self.base_url}/api/v1/query_range?{params}", headers=self.headers)  # noqa: S310 - http(s) checked
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as response:  # noqa: S310
                body = json.loads(response.read())
        except urllib.error.HTTPError as exc:  # Prometheus explains a refused query in the JSON body
            try:
                detail = json.loads(exc.read()).get("error", "")
            except (ValueError, AttributeError):
                detail = ""
            raise PrometheusError(f"prometheus answered HTTP {exc.code} to {query!r}: {detail}") from None
        except (OSError, ValueError) as exc:
            raise PrometheusError(f"no answer from prometheus at {self.base_url}: {exc}") from None
        return parse_matrix(body, query)

    def samples(self, query: str, *, start: float, end: float, step: float) -> list[float]:
        """Every finite value of every series the query returns, in time order per series."""
        return [
            value for series in self.query_range(query, start=start, end=end, step=step) for _, value in series.values
        ]


def parse_matrix(body: Any, query: str = "") -> list[Series]:
    if not isinstance(body, dict) or body.get("status") != "success":
        error = body.get("error") if isinstance(body, dict) else None
        raise PrometheusError(f"prometheus refused {query!r}: {error or 'not a success answer'}")
    data = body.get("data") or {}
    if data.get("resultType") != "matrix" or not isinstance(data.get("result"), list):
        raise PrometheusError(f"prometheus answered {query!r} with a {data.get('resultType')!r}, not a matrix")
    found = []
    for item in data["result"]:
        values = []
        for pair in item.get("values") or []:
            try:
                moment, value = float(pair[0]), float(pair[1])
            except (TypeError, ValueError, IndexError):
                raise PrometheusError(f"prometheus answered {query!r} with a malformed sample {pair!r}") from None
            if math.isfinite(value):
                values.append((moment, value))
        found.append(Series(labels={str(k): str(v) for k, v in (item.get("metric") or {}).items()}, values=values))
    return found
