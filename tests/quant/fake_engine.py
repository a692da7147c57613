"""A stand-in OpenAI-compatible engine for the eval job's fault tests (a real HTTP server on loopback):
answers every chat request with the last user turn echoed, logs each case it was asked, and can be
told to start slowly or never become healthy. The happy path runs the real `transformers serve`.

python fake_engine.py --port N --log asked.log [--never-healthy] [--delay-s 0.2] [--logprobs] [--model DIR]

"Repeat the word: X" (the lm-eval test task) is answered X, except by a model whose directory name
says w4a8 for words that start with a vowel: a candidate measurably worse than its baseline.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--log", required=True)
    parser.add_argument("--never-healthy", action="store_true")
    parser.add_argument("--delay-s", type=float, default=0.0)
    parser.add_argument("--logprobs", action="store_true")
    parser.add_argument("--model", default="")
    parser.add_argument("--crash", action="store_true", help="print an out-of-memory error and exit at start")
    args, _engine_flags = parser.parse_known_args()  # the real engine's flags (multi-node launch) pass by
    if args.crash:
        print("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 GiB", flush=True)
        return 1

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *values: Any) -> None:
            return

        def do_GET(self) -> None:
            healthy = self.path == "/health" and not args.never_healthy
            self.send_response(200 if healthy else 503)
            self.end_headers()
            self.wfile.write(b"{}")

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            with open(args.log, "a", encoding="utf-8") as log:
                log.write(body["messages"][-1]["content"][:40].replace("\n", " ") + "\n")
            time.sleep(args.delay_s)
            text = body["messages"][-1]["content"]
            if text.startswith("Repeat the word: "):
                word = text.removeprefix("Repeat the word: ").strip()
                text = word if not ("w4a8" in args.model and word[:1] in "aeiou") else "banana"
            choice: dict[str, Any] = {"index": 0, "message": {"role": "assistant", "content": text}}
            if args.logprobs:
                choice["logprobs"] = {
                    "content": [{"token": "a", "logprob": -0.1, "top_logprobs": [{"token": "a", "logprob": -0.1}]}]
                }
            data = json.dumps({"choices": [choice]}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    print(f"fake engine listening on {args.port}; flags {' '.join(_engine_flags)}", flush=True)
    ThreadingHTTPServer(("127.0.0.1", args.port), Handler).serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
