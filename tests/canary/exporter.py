"""A small test exporter: serves vLLM's documented metric names in Prometheus' text format, as a vLLM
engine would on /metrics (vLLM itself cannot run here). Each scrape advances the histograms by a
batch of requests at the configured TTFT / inter-token latency, so rate(_sum)/rate(_count) is them."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5)


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
    def __init__(self, ttft_s: float, itl_s: float, kv_usage: float) -> None:
        self.ttft_s, self.itl_s, self.kv_usage = ttft_s, itl_s, kv_usage
        self.requests = 0
        self.lock = threading.Lock()
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self.httpd.owner = self  # type: ignore[attr-defined]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.httpd.server_address[1]}"

    def _histogram(self, name: str, value: float, count: int) -> list[str]:
        labels = 'model_name="m",engine="0"'
        lines = [f"# TYPE {name} histogram"]
        for bound in BUCKETS:
            lines.append(f'{name}_bucket{{{labels},le="{bound}"}} {count if value <= bound else 0}')
        lines.append(f'{name}_bucket{{{labels},le="+Inf"}} {count}')
        lines.append(f"{name}_sum{{{labels}}} {value * count}")
        lines.append(f"{name}_count{{{labels}}} {count}")
        return lines

    def scrape(self) -> str:
        with self.lock:
            self.requests += 10
            count = self.requests
        lines = [
            *self._histogram("vllm:time_to_first_token_seconds", self.ttft_s, count),
            *self._histogram("vllm:inter_token_latency_seconds", self.itl_s, count * 50),
            "# TYPE vllm:kv_cache_usage_perc gauge",
            f'vllm:kv_cache_usage_perc{{model_name="m",engine="0"}} {self.kv_usage}',
        ]
        return "\n".join(lines) + "\n"

    def __enter__(self) -> VllmExporter:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
