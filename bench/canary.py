"""Canary analysis cost: the service's own cost per live-regression case and per metric query.

    .venv/bin/python bench/canary.py [--cases 100] [--queries 200] [--real-prometheus]

Live regression: `--cases` cases streamed to an in-process OpenAI-compatible stand-in engine
(tests/canary/fakes.py; it answers at once, so the figure is the client's own cost: HTTP, SSE
parsing, the eval's case verdict), at the analysis' concurrency (4). Metric queries: PromClient
range queries (40 points per series) against the stand-in Prometheus, and with --real-prometheus
against Debian's Prometheus (scripts/prometheus-loopback) scraping the vLLM-named test exporter.
Prints wall ms and CPU ms per case / per query (this process: it includes the in-process stand-ins'
server threads, so it overstates the client's own share). No database."""

from __future__ import annotations

import argparse
import resource
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from governance.canary.prometheus import PromClient, engine_queries  # noqa: E402
from governance.canary.regression import run_live_regression  # noqa: E402
from tests.canary.exporter import VllmExporter  # noqa: E402
from tests.canary.fakes import FakeEngine, FakePrometheus  # noqa: E402


def cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def bench_regression(n: int) -> dict[str, float]:
    cases = [
        {"id": f"c{i}", "category": "facts", "turns": [f"code of part {i}?"], "key_items": [f"K{i}X"]} for i in range(n)
    ]
    reference = {f"c{i}": f"The code of part {i} is K{i}X, as listed in the catalogue of parts." for i in range(n)}
    with FakeEngine(lambda prompt: reference[f"c{prompt.split()[-1].rstrip('?')}"]) as engine:
        began, cpu = time.perf_counter(), cpu_s()
        check, _answers = run_live_regression(
            base_url=engine.url, model="m", cases=cases, reference=reference, generation={}, threshold=0.05
        )
        wall, used = time.perf_counter() - began, cpu_s() - cpu
    assert check.verdict == "passed", check.detail
    return {"cases": n, "wall_ms_per_case": 1000 * wall / n, "cpu_ms_per_case": 1000 * used / n}


def _time_queries(client: PromClient, queries: list[str], n: int, start: float, end: float) -> dict[str, float]:
    began, cpu = time.perf_counter(), cpu_s()
    for i in range(n):
        client.samples(queries[i % len(queries)], start=start, end=end, step=1)
    wall, used = time.perf_counter() - began, cpu_s() - cpu
    return {"queries": n, "wall_ms_per_query": 1000 * wall / n, "cpu_ms_per_query": 1000 * used / n}


def bench_fake_prometheus(n: int) -> dict[str, float]:
    with FakePrometheus(lambda query: [0.2] * 40) as prometheus:
        client = PromClient(prometheus.url)
        queries = list(engine_queries("vllm", {"deployment": "canary"}).values())
        return _time_queries(client, queries, n, time.time() - 40, time.time())


def bench_real_prometheus(n: int) -> dict[str, float]:
    with VllmExporter(0.2, 0.02, 0.5) as exporter, tempfile.TemporaryDirectory() as directory:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        process = subprocess.Popen(
            [
                sys.executable,
                str(ROOT / "scripts" / "prometheus-loopback"),
                f"--port={port}",
                f"--dir={directory}",
                f"--target=deployment=canary@{exporter.address}",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            client = PromClient(f"http://127.0.0.1:{port}")
            query = engine_queries("vllm", {"deployment": "canary"})["ttft_seconds"]
            deadline = time.time() + 60
            while time.time() < deadline:
                try:
                    if len(client.samples(query, start=time.time() - 60, end=time.time(), step=1)) >= 10:
                        break
                except Exception:
                    pass
                time.sleep(0.5)
            queries = list(engine_queries("vllm", {"deployment": "canary"}).values())
            return _time_queries(client, queries, n, time.time() - 60, time.time())
        finally:
            process.terminate()
            process.wait(timeout=20)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=100)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--real-prometheus", action="store_true")
    args = parser.parse_args()
    print("live regression (stand-in engine):", bench_regression(args.cases))
    print("metric query (stand-in prometheus):", bench_fake_prometheus(args.queries))
    if args.real_prometheus:
        print("metric query (real prometheus 2.42):", bench_real_prometheus(args.queries))
    return 0


if __name__ == "__main__":
    sys.exit(main())
