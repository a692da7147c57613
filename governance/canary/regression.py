"""Live regression through the deployed canary: the approved served eval's cases (a bounded,
deterministic sample of them) sent to the canary's OpenAI-compatible endpoint, each answer compared
with the approved eval's candidate answer by the eval's own metric (planner.evaljob.metrics.
case_verdict: a key item the approved weights' answer kept and the canary's lost, or a contradiction,
fails the case) and its 5% rule (planner.evaljob.stats.gate: the failure rate's one-sided 95%
Clopper-Pearson upper bound at most the eval's threshold). A canary serving other weights or another
configuration answers unlike the evaluated weights and fails.

Greedy and seeded like the eval (temperature 0, the eval's seed and max_new_tokens). Each request is
streamed, so the service's own client-side TTFT and TPOT are measured on every path (reported beside
the verdict, compared with the plan). A credential, when the endpoint needs one, is read at run time
from the environment variable the analysis names (never stored, never logged).

Sample size: with no failure the 5% rule passes from 59 cases (the bound of 0/59 is 4.95%); fewer
cannot pass, so the analysis asks for at least that many (`MIN_CASES`)."""

from __future__ import annotations

import concurrent.futures
import hashlib
import json
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from governance.canary.verdict import FAILED, PASSED, Check
from planner.evaljob.metrics import case_verdict
from planner.evaljob.stats import gate

MIN_CASES = 59


class CanaryEndpointError(RuntimeError):
    """The canary did not answer a case (unreachable, HTTP error, a malformed answer)."""


@dataclass(frozen=True, slots=True)
class Answer:
    case_id: str
    text: str
    ttft_s: float | None  # the first content chunk's arrival after the request was sent
    tpot_s: float | None  # mean time between content chunks after the first
    latency_s: float


def sample_cases(cases: Sequence[Mapping[str, Any]], size: int, salt: str) -> list[Mapping[str, Any]]:
    """A deterministic sample of `size` cases (all when fewer), spread over the categories: ordered by
    a hash of the salt (the analysis' code) and the case id, so a rerun asks the same cases."""
    ordered = sorted(cases, key=lambda c: hashlib.sha256(f"{salt}:{c['id']}".encode()).hexdigest())
    return ordered[:size]


def ask(
    base_url: str,
    model: str,
    case: Mapping[str, Any],
    generation: Mapping[str, Any],
    *,
    api_key: str = "",
    timeout_s: float = 60.0,
) -> Answer:
    """One case through `/v1/chat/completions`, streamed (server-sent events)."""
    body = {
        "model": model,
        "messages": [{"role": "user", "content": turn} for turn in case["turns"]],
        "temperature": 0.0,
        "seed": int(generation.get("seed", 0)),
        "max_tokens": int(generation.get("max_new_tokens", 64)),
        "stream": True,
    }
    headers = {"Content-Type": "application/json", "Accept": "text/event-stream"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    started = time.perf_counter()
    chunks: list[float] = []
    parts: list[str] = []
    try:
        # inside the try: a URL urllib cannot use (none, or not http) is this case's error, not a crash
        request = urllib.request.Request(  # noqa: S310 - the endpoint is validated as http(s) at request time
            f"{base_url.rstrip('/')}/v1/chat/completions", data=json.dumps(body).encode(), headers=headers
        )
        with urllib.request.urlopen(request, timeout=timeout_s) as response:  # noqa: S310
            for raw in response:
                line = raw.decode("utf-8", errors="replace").strip()
                if not line.startswith("data:"):
                    continue
                data = line[5:].strip()
                if data == "[DONE]":
                    break
                event = json.loads(data)
                for choice in event.get("choices") or []:
                    content = (choice.get("delta") or {}).get("content") or (choice.get("message") or {}).get("content")
                    if content:
                        chunks.append(time.perf_counter())
                        parts.append(content)
    except urllib.error.HTTPError as exc:
        raise CanaryEndpointError(f"case {case['id']}: the canary answered HTTP {exc.code}") from None
    except (OSError, ValueError) as exc:  # unreachable, timed out, or not JSON
        raise CanaryEndpointError(f"case {case['id']}: no answer from the canary: {type(exc).__name__}") from None
    latency = time.perf_counter() - started
    ttft = chunks[0] - started if chunks else None
    tpot = (chunks[-1] - chunks[0]) / (len(chunks) - 1) if len(chunks) > 1 else None
    return Answer(str(case["id"]), "".join(parts), ttft, tpot, latency)


def compare(
    cases: Sequence[Mapping[str, Any]], reference: Mapping[str, str], answers: Mapping[str, Answer], threshold: float
) -> Check:
    """The eval's own rule over the canary's answers against the approved candidate answers."""
    if not cases:
        return Check("regression", "live_regression", None, None, threshold, None, FAILED, "no data: no cases asked")
    failing = []
    for case in cases:
        verdict = case_verdict(dict(case), reference[str(case["id"])], answers[str(case["id"])].text)
        if verdict["failed"]:
            failing.append(str(case["id"]))
    result = gate(len(failing), len(cases), threshold)
    bound = float(result["upper_bound_95"])
    detail = (
        f"live regression: {len(failing)} of {len(cases)} cases answered unlike the approved weights "
        f"(upper 95% bound {bound:.2%}, threshold {threshold:.0%})"
    )
    if failing:
        detail += "; first failing: " + ", ".join(failing[:5])
    if len(cases) < MIN_CASES:
        detail += f"; fewer than {MIN_CASES} cases cannot pass the 5% rule"
    return Check(
        "regression",
        "live_regression",
        len(failing) / len(cases),
        None,
        threshold,
        None,
        PASSED if result["pass"] else FAILED,
        detail,
    )


def run_live_regression(
    *,
    base_url: str,
    model: str,
    cases: Sequence[Mapping[str, Any]],
    reference: Mapping[str, str],
    generation: Mapping[str, Any],
    threshold: float,
    api_key: str = "",
    timeout_s: float = 60.0,
    concurrency: int = 4,
    asker: Callable[..., Answer] = ask,
) -> tuple[Check, list[Answer]]:
    """Ask every case (at most `concurrency` in flight) and judge. An endpoint that does not answer a
    case fails the check naming the case (no answer is no evidence of serving the approved weights)."""
    answers: dict[str, Answer] = {}
    try:
        with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, concurrency)) as pool:
            futures = [
                pool.submit(asker, base_url, model, case, generation, api_key=api_key, timeout_s=timeout_s)
                for case in cases
            ]
            for future in concurrent.futures.as_completed(futures):
                answer = future.result()
                answers[answer.case_id] = answer
    except CanaryEndpointError as exc:
        return Check("regression", "live_regression", None, None, threshold, None, FAILED, str(exc)), list(
            answers.values()
        )
    return compare(cases, reference, answers, threshold), list(answers.values())
