"""License-engine benchmark.

1. In-process: evaluations per second for a mixed batch of 1,000 fact sets across all licenses
   (specs built once, as the API caches them), against a baseline of only validating the
   same facts, measured in the same run.
2. API: p50/p99 latency of POST /api/v1/licenses/evaluate under 16 concurrent clients against
   gunicorn, as a ratio to a trivial DRF endpoint (GET /api/v1/me, same auth) in the same run.

    .venv/bin/python bench/licenses.py [--requests 2000]
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def fact_sets(count: int, seed: int = 7) -> list[dict]:
    rng = random.Random(seed)
    facts = []
    for _ in range(count):
        facts.append(
            {
                "use_case": rng.choice(["research", "evaluation", "internal", "external_commercial"]),
                "commercial_entity": rng.random() < 0.8,
                "hosted_service": rng.random() < 0.6,
                "production": rng.random() < 0.7,
                "monthly_active_users": rng.choice([1000, 5_000_000, 100_000_001, 800_000_000]),
                "monthly_active_users_at_model_release": rng.choice([None, 600_000_000]),
                "monthly_revenue": {
                    "amount": rng.choice([1e5, 2e7, 1.5e8]),
                    "currency": rng.choice(["USD", "CNY", "EUR"]),
                },
                "org_country": rng.choice(["US", "DE", "CN", "JP", "FR"]),
                "multimodal": rng.random() < 0.3,
                "outputs_used_to_train_other_models": rng.random() < 0.2,
                "derivative": rng.choice(
                    [
                        {"kind": "none", "distribution": "none", "name": None},
                        {"kind": "fine_tune", "distribution": "public", "name": "Llama-Acme"},
                        {"kind": "distill", "distribution": "internal", "name": None},
                    ]
                ),
                "redistributes_original_weights": rng.random() < 0.2,
                "intended_uses": rng.choice([[], [], ["medical_advice"], ["military"]]),
                "guardrails_removed": rng.random() < 0.1,
            }
        )
    return facts


def bench_in_process() -> None:
    from governance.licenses.engine import evaluate
    from governance.licenses.facts import normalize_facts
    from tests.licenses.helpers import fx, specs

    all_specs = list(specs().values())
    batch = fact_sets(1000)
    table = fx()
    pairs = [(all_specs[i % len(all_specs)], facts) for i, facts in enumerate(batch)]
    for spec, facts in pairs[:100]:  # warm the CEL compile cache
        evaluate(spec, facts, table)
    rounds = 5
    began = time.perf_counter()
    for _ in range(rounds):
        for spec, facts in pairs:
            evaluate(spec, facts, table)
    elapsed = time.perf_counter() - began
    began = time.perf_counter()
    for _ in range(rounds):
        for _spec, facts in pairs:
            normalize_facts(facts, known_currencies=table.currencies)
    baseline = time.perf_counter() - began
    total = rounds * len(pairs)
    print(
        f"in-process: {total / elapsed:,.0f} evaluations/s ({len(all_specs)} licenses, {len(pairs)} fact sets x {rounds}); "
        f"validation-only baseline {total / baseline:,.0f}/s; evaluate costs {elapsed / baseline:.1f}x validation"
    )


def _latencies(
    port: int, method: str, path: str, body: bytes | None, token: str, clients: int, total: int
) -> list[float]:
    results: list[float] = []
    lock = threading.Lock()
    per_client = total // clients

    def client() -> None:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
        local = []
        for _ in range(per_client):
            began = time.perf_counter()
            connection.request(method, path, body=body, headers=headers)
            response = connection.getresponse()
            response.read()
            if response.status != 200:
                raise SystemExit(f"{path}: HTTP {response.status}")
            local.append(time.perf_counter() - began)
        with lock:
            results.extend(local)

    threads = [threading.Thread(target=client) for _ in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results


def bench_api(requests: int) -> None:
    folder = Path(tempfile.mkdtemp(prefix="bench-licenses-"))
    env = dict(
        os.environ,
        DJANGO_SETTINGS_MODULE="governance.settings_tests",
        DATABASE_URL=os.environ.get("BENCH_DATABASE_URL", f"sqlite:///{folder / 'bench.sqlite3'}"),
        GOVERNANCE_VAR_DIR=str(folder),
        AUDIT_SIGNING_KEY_PATH=str(folder / "key.pem"),
    )
    python = sys.executable
    subprocess.run([python, "manage.py", "migrate", "-v0"], cwd=ROOT, env=env, check=True)
    subprocess.run([python, "manage.py", "load_license_catalog"], cwd=ROOT, env=env, check=True, capture_output=True)
    script = (
        "from django.contrib.auth.models import User, Group\n"
        "from governance.core.tokens import api_token_issue\n"
        "u = User.objects.create_user('bench')\n"
        "u.groups.add(Group.objects.get_or_create(name='requester')[0])\n"
        "print(api_token_issue(user=u, name='bench').clear_text)\n"
    )
    token = (
        subprocess.run(
            [python, "manage.py", "shell", "-c", script], cwd=ROOT, env=env, check=True, capture_output=True, text=True
        )
        .stdout.strip()
        .splitlines()[-1]
    )
    port = 18765
    server = subprocess.Popen(
        [
            python,
            "-m",
            "gunicorn",
            "governance.wsgi:application",
            "--bind",
            f"127.0.0.1:{port}",
            "--workers",
            "4",
            "--log-level",
            "warning",
        ],
        cwd=ROOT,
        env=env,
    )
    try:
        for _ in range(100):
            try:
                http.client.HTTPConnection("127.0.0.1", port, timeout=1).request("GET", "/healthz")
                break
            except OSError:
                time.sleep(0.1)
        evaluate_body = json.dumps({"license": "kimi-k2-modified-mit", "facts": fact_sets(1)[0]}).encode()
        _latencies(port, "GET", "/api/v1/me", None, token, 4, 200)  # warm up every worker
        _latencies(port, "POST", "/api/v1/licenses/evaluate", evaluate_body, token, 4, 200)
        trivial = sorted(_latencies(port, "GET", "/api/v1/me", None, token, 16, requests))
        evaluated = sorted(_latencies(port, "POST", "/api/v1/licenses/evaluate", evaluate_body, token, 16, requests))

        def pct(values: list[float], q: float) -> float:
            return values[min(len(values) - 1, int(q * len(values)))] * 1000

        for name, values in (("trivial GET /api/v1/me", trivial), ("POST /api/v1/licenses/evaluate", evaluated)):
            print(
                f"API {name}: p50 {pct(values, 0.5):.1f} ms, p99 {pct(values, 0.99):.1f} ms "
                f"(16 clients, {len(values)} requests, mean {statistics.mean(values) * 1000:.1f} ms)"
            )
        print(
            f"API ratio evaluate/trivial: p50 {pct(evaluated, 0.5) / pct(trivial, 0.5):.2f}x, "
            f"p99 {pct(evaluated, 0.99) / pct(trivial, 0.99):.2f}x"
        )
    finally:
        server.terminate()
        server.wait(timeout=20)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=2000)
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "governance.settings_tests")
    import django

    django.setup()
    bench_in_process()
    bench_api(args.requests)


if __name__ == "__main__":
    main()
