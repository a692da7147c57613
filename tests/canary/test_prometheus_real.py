"""The PromQL client against a real Prometheus (Debian's package, started by
scripts/prometheus-loopback) scraping two test exporters on loopback that serve vLLM's metric names
(tests/canary/exporter.py stands in for the engines): the canary's TTFT 40% above stable fails."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from governance.canary.prometheus import RULES, PromClient, PrometheusError, engine_queries
from governance.canary.verdict import FAILED, PASSED, compare_with_stable
from tests.canary.exporter import VllmExporter
from tests.canary.promserver import loopback_prometheus, needs_prometheus, wait_for_samples

pytestmark = [pytest.mark.slow, needs_prometheus]


@pytest.fixture
def prometheus(tmp_path: Path) -> Iterator[tuple[PromClient, VllmExporter, VllmExporter]]:
    with VllmExporter(0.28, 0.02, 0.5) as canary, VllmExporter(0.20, 0.02, 0.5) as stable:
        targets = {"deployment=canary": canary.address, "deployment=stable": stable.address}
        with loopback_prometheus(tmp_path / "prom", targets) as client:
            yield client, canary, stable


def test_a_canary_ttft_40_percent_above_stable_fails_through_a_real_prometheus(
    prometheus: tuple[PromClient, VllmExporter, VllmExporter],
) -> None:
    client, _, _ = prometheus
    canary_q = engine_queries("vllm", {"deployment": "canary"})
    stable_q = engine_queries("vllm", {"deployment": "stable"})
    wait_for_samples(client, canary_q["ttft_seconds"], 8)
    wait_for_samples(client, stable_q["ttft_seconds"], 8)
    now = time.time()

    canary = client.samples(canary_q["ttft_seconds"], start=now - 60, end=now, step=1)
    stable = client.samples(stable_q["ttft_seconds"], start=now - 60, end=now, step=1)
    check = compare_with_stable(RULES["ttft_seconds"], canary, stable)

    assert check.verdict == FAILED, check.detail
    assert check.canary == pytest.approx(0.28, rel=0.01)
    assert check.stable == pytest.approx(0.20, rel=0.01)
    assert check.p_value is not None
    assert check.p_value < 0.02
    itl = compare_with_stable(
        RULES["inter_token_latency_seconds"],
        client.samples(canary_q["inter_token_latency_seconds"], start=now - 60, end=now, step=1),
        client.samples(stable_q["inter_token_latency_seconds"], start=now - 60, end=now, step=1),
    )
    assert itl.verdict == PASSED, itl.detail
    # names the exporter does not serve (SGLang's): no series, no sample
    sglang_q = engine_queries("sglang", {"deployment": "canary"})
    assert client.samples(sglang_q["queue_time_seconds"], start=now - 60, end=now, step=1) == []


def test_a_bad_query_is_an_error_naming_prometheus_answer(
    prometheus: tuple[PromClient, VllmExporter, VllmExporter],
) -> None:
    client, _, _ = prometheus
    wait_for_samples(client, "up", 1)
    with pytest.raises(PrometheusError, match="HTTP 400"):
        client.samples("sum(rate(", start=time.time() - 60, end=time.time(), step=1)
