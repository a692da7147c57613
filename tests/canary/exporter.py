"""A small test exporter: serves vLLM's documented metric names in Prometheus' text format, as a vLLM
engine would on /metrics (vLLM itself cannot run here). Each scrape advances the histograms by a
batch of requests at the configured latencies, so rate(_sum)/rate(_count) is them; the counters
advance at the configured rates per scrape; the gauges are as set. Every figure is an attribute a
test may change while Prometheus scrapes (a deployment whose KV cache fills up)."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5)
PER_SCRAPE = 10  # requests finished between two scrapes


class _Handler(BaseHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        return

    def do_GET(self) -> None:
        exporter: VllmExporter = self.server.owner  # type: ignore[attr-defined]
        text = exporter.scrape()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.end_headers()
        self.wfile.write(text.encode())


class VllmExporter:
    def __init__(
        self,
        ttft_s: float,
        itl_s: float,
        kv_usage: float,
        *,
        e2e_s: float = 2.0,
        queue_s: float = 0.01,
        waiting: float = 1.0,
        preemptions_per_scrape: float = 0.0,
        prefix_hit_rate: float = 0.6,
    ) -> None:
        self.ttft_s, self.itl_s, self.kv_usage = ttft_s, itl_s, kv_usage
        self.e2e_s, self.queue_s, self.waiting = e2e_s, queue_s, waiting
        self.preemptions_per_scrape, self.prefix_hit_rate = preemptions_per_scrape, prefix_hit_rate
        self.requests = 0
        self.sums: dict[str, float] = {}
        self.counters: dict[str, float] = {}
        self.lock = threading.Lock()
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self.httpd.owner = self  # type: ignore[attr-defined]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.httpd.server_address[1]}"

    def _histogram(self, name: str, value: float, count: int, added: int) -> list[str]:
        # the sum grows by this scrape's batch at the current value: a changed figure shows in the rate
        self.sums[name] = self.sums.get(name, 0.0) + value * added
        labels = 'model_name="m",engine="0"'
        lines = [f"# TYPE {name} histogram"]
        for bound in BUCKETS:
            lines.append(f'{name}_bucket{{{labels},le="{bound}"}} {count if value <= bound else 0}')
        lines.append(f'{name}_bucket{{{labels},le="+Inf"}} {count}')
        lines.append(f"{name}_sum{{{labels}}} {self.sums[name]}")
        lines.append(f"{name}_count{{{labels}}} {count}")
        return lines

    def _counter(self, name: str, added: float) -> list[str]:
        self.counters[name] = self.counters.get(name, 0.0) + added
        return [f"# TYPE {name} counter", f'{name}{{model_name="m",engine="0"}} {self.counters[name]}']

    def _gauge(self, name: str, value: float) -> list[str]:
        return [f"# TYPE {name} gauge", f'{name}{{model_name="m",engine="0"}} {value}']

    def scrape(self) -> str:
        with self.lock:
            self.requests += PER_SCRAPE
            count, added = self.requests, PER_SCRAPE
            lines = [
                *self._histogram("vllm:time_to_first_token_seconds", self.ttft_s, count, added),
                *self._histogram("vllm:inter_token_latency_seconds", self.itl_s, count * 50, added * 50),
                *self._histogram("vllm:e2e_request_latency_seconds", self.e2e_s, count, added),
                *self._histogram("vllm:request_queue_time_seconds", self.queue_s, count, added),
                *self._gauge("vllm:kv_cache_usage_perc", self.kv_usage),
                *self._gauge("vllm:num_requests_waiting", self.waiting),
                *self._counter("vllm:num_preemptions_total", self.preemptions_per_scrape),
                *self._counter("vllm:prefix_cache_queries_total", 1000),
                *self._counter("vllm:prefix_cache_hits_total", 1000 * self.prefix_hit_rate),
            ]
        return "\n".join(lines) + "\n"

    def __enter__(self) -> VllmExporter:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
