"""Small real HTTP servers on loopback for the canary tests.

`FakeEngine` STANDS IN FOR THE SERVING ENGINE (vLLM / `transformers serve` cannot run a model here
cheaply): it speaks the OpenAI chat-completions protocol, streamed as server-sent events, and answers
each prompt from a table, so one instance answers like the evaluated weights and another unlike them.
`FakePrometheus` stands in for a Prometheus server: it answers `/api/v1/query_range` in the shape
Prometheus documents, from a function of the query. Both are real sockets and real HTTP."""

from __future__ import annotations

import json
import threading
import time
import urllib.parse
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class _Server:
    def __init__(self, handler: type[BaseHTTPRequestHandler]) -> None:
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.httpd.owner = self  # type: ignore[attr-defined]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def __enter__(self) -> Any:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


class _EngineHandler(BaseHTTPRequestHandler):
    def log_message(self, *args: object) -> None:  # quiet
        return

    def do_POST(self) -> None:
        owner: FakeEngine = self.server.owner  # type: ignore[attr-defined]
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        owner.authorizations.append(self.headers.get("Authorization", ""))
        if self.path != "/v1/chat/completions" or (
            owner.api_key and self.headers.get("Authorization") != f"Bearer {owner.api_key}"
        ):
            self.send_response(401 if self.path == "/v1/chat/completions" else 404)
            self.end_headers()
            return
        prompt = "\n".join(m["content"] for m in body["messages"])
        text = owner.answer(prompt)
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        for index, word in enumerate(text.split(" ")):
            chunk = {"choices": [{"index": 0, "delta": {"content": word if index == 0 else " " + word}}]}
            self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
            self.wfile.flush()
            time.sleep(owner.token_delay_s)
        self.wfile.write(b"data: [DONE]\n\n")


class FakeEngine(_Server):
    """An OpenAI-compatible endpoint answering `answer(prompt)` word by word."""

    def __init__(self, answer: Callable[[str], str], api_key: str = "", token_delay_s: float = 0.0) -> None:
        super().__init__(_EngineHandler)
        self.answer, self.api_key, self.token_delay_s = answer, api_key, token_delay_s
        self.authorizations: list[str] = []


class _PromHandler(BaseHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        return

    def do_GET(self) -> None:
        owner: FakePrometheus = self.server.owner  # type: ignore[attr-defined]
        parts = urllib.parse.urlsplit(self.path)
        params = dict(urllib.parse.parse_qsl(parts.query))
        if parts.path != "/api/v1/query_range" or "query" not in params:
            self.send_response(400)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(json.dumps({"status": "error", "errorType": "bad_data", "error": "no query"}).encode())
            return
        owner.queries.append(params["query"])
        start, step = float(params["start"]), float(params["step"])
        values = owner.series(params["query"])
        result = (
            []
            if values is None
            else [
                {
                    "metric": {},
                    "values": [
                        [start + i * step, "NaN" if v is None else repr(float(v))] for i, v in enumerate(values)
                    ],
                }
            ]
        )
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(json.dumps({"status": "success", "data": {"resultType": "matrix", "result": result}}).encode())


class FakePrometheus(_Server):
    """`series(query)` gives the values of the one series a query returns (None: no series)."""

    def __init__(self, series: Callable[[str], list[float | None] | None]) -> None:
        super().__init__(_PromHandler)
        self.series = series
        self.queries: list[str] = []
