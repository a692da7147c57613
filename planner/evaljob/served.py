"""python -m planner.evaljob.served run --spec spec.json --out DIR

The eval of what ships: verify the baseline's and the candidate's files against their registered
manifests, then for each of them launch the serving engine with the command generated from the
plan, wait for its health endpoint (bounded), send the eval set through its OpenAI-compatible chat
API (temperature 0, fixed seed, bounded concurrency, every answer cached on disk), stop it, and
compare. This process is only a client: the model lives in the engine, torch is never imported here.

Caches: candidate answers under `cache_dir` (kept across attempts of one run: a requeued job asks
only the cases it has no answer for); baseline answers under `baseline_cache_dir`, a directory named
by the key (baseline digest, engine, version, serving config, eval set digest, generation
parameters), so a second candidate of the same baseline does not serve the baseline again.
A cache file is named by a hash of its case id (never the id: an id is not a path) and holds the
key that produced it; an answer counts only when its id and key are this case's and this run's
(`read_answer`), so a file planted in a shared cache, or another key's answer, is asked again.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import hashlib
import json
import math
import os
import platform
import resource
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from planner.cluster.base import job_main, write_atomic, write_result
from planner.evaljob.cases import case_file_name, load_cases
from planner.evaljob.engines import multinode_command
from planner.evaljob.manifest import verify_artifact
from planner.evaljob.metrics import case_verdict
from planner.evaljob.standard import check_tasks, compare, run_standard_tasks, standard_key, tasks_dir_sha256
from planner.evaljob.summary import summarize
from planner.manifest import resolve_inside_roots

LOG_TAIL_LINES = 40


class EngineError(ValueError):
    """The engine never became healthy, died, or stopped answering: the job fails with its log tail."""


def peak_rss_mib(usage: resource.struct_rusage) -> float:
    """This process's peak resident memory. VmHWM belongs to the process's own address space;
    ru_maxrss also keeps the high-water mark of the parent it was forked from (across exec)."""
    with contextlib.suppress(OSError, ValueError, IndexError):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return round(int(line.split()[1]) / 1024, 1)
    return round(usage.ru_maxrss / 1024, 1)


def cache_key(
    baseline_digest: str,
    engine: str,
    engine_version: str,
    serving: dict[str, Any],
    eval_set_sha256: str,
    generation: dict[str, Any],
) -> str:
    """What the baseline's answers depend on; the same key means the same answers (greedy, seeded)."""
    material = json.dumps(
        [baseline_digest, engine, engine_version, serving, eval_set_sha256, generation], sort_keys=True
    ).encode()
    return hashlib.sha256(material).hexdigest()[:32]


# Serving-config entries that describe the candidate, not how the baseline is served.
CANDIDATE_ONLY = ("precision", "online_quantization")


def baseline_serving(serving: dict[str, Any]) -> dict[str, Any]:
    """The part of the serving config the baseline's answers depend on. The baseline is served as it
    is whatever the candidate's format: a derivative's precision is in its own weights (its digest),
    and online quantization is the candidate's flag alone (`candidate_argv`). Layout, KV dtype, context
    length and memory fraction reach the baseline's command line and stay in the key."""
    return {k: v for k, v in serving.items() if k not in CANDIDATE_ONLY}


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def log_tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    try:
        data = path.read_bytes()[-16000:]
    except OSError:
        return "(no engine log)"
    return "\n".join(data.decode(errors="replace").splitlines()[-lines:])


def substitute(argv: list[str], values: dict[str, str]) -> list[str]:
    """Whole-token placeholders only ({port}, {host}, {model}, {python}): nothing is ever parsed by a shell."""
    return [values.get(part, part) for part in argv]


class Engine:
    """One engine process in its own session (so stopping it stops its workers too, and never signals
    this job), started through `planner.evaljob.tether`: a session of its own is out of reach of
    whatever kills the job's process group, so the tether stops the engine when this job dies.
    The group's id is written next to the log (`engine-<role>.pgid`) for operators and tests."""

    def __init__(self, argv: list[str], log_path: Path, env: dict[str, str] | None = None) -> None:
        self.argv = argv
        self.log_path = log_path
        log = log_path.open("ab")
        tethered = [sys.executable, "-m", "planner.evaljob.tether", str(os.getpid()), "--", *argv]
        try:
            self.process = subprocess.Popen(  # noqa: S603 - argv list from the validated spec, no shell
                tethered,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                env={**os.environ, **(env or {})},
            )
        except OSError as exc:
            raise EngineError(f"cannot start the engine {argv[0]!r}: {exc}") from None
        finally:
            log.close()
        write_atomic(log_path.with_suffix(".pgid"), str(self.process.pid).encode())

    def wait_healthy(self, url: str, timeout_s: float) -> float:
        """Seconds until `url` answered 200; an engine that exits or stays unhealthy fails with its log."""
        started = time.monotonic()
        while True:
            code = self.process.poll()
            if code is not None:
                raise EngineError(
                    f"the engine exited with code {code} before becoming healthy; last lines of its log:\n"
                    + log_tail(self.log_path)
                )
            with (
                contextlib.suppress(OSError, urllib.error.URLError),
                urllib.request.urlopen(url, timeout=2) as response,  # noqa: S310 - loopback URL we built
            ):
                if response.status == 200:
                    return time.monotonic() - started
            if time.monotonic() - started > timeout_s:
                raise EngineError(
                    f"the engine was not healthy at {url} after {timeout_s:g} s; last lines of its log:\n"
                    + log_tail(self.log_path)
                )
            time.sleep(0.5)

    def stop(self, grace_s: float = 15) -> None:
        if self.process.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=grace_s)


def chat(base_url: str, model: str, case: dict[str, Any], generation: dict[str, Any], logprobs: bool) -> dict[str, Any]:
    """One case through /v1/chat/completions: each turn a user message, greedy, seeded."""
    body: dict[str, Any] = {
        "model": model,
        "messages": [{"role": "user", "content": turn} for turn in case["turns"]],
        "temperature": 0.0,
        "seed": int(generation["seed"]),
        "max_tokens": int(generation["max_new_tokens"]),
        "stream": False,
    }
    if logprobs:
        body.update(logprobs=True, top_logprobs=int(generation.get("top_logprobs", 5)))
    request = urllib.request.Request(  # noqa: S310 - loopback URL we built
        f"{base_url}/v1/chat/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    started = time.perf_counter()
    try:
        with urllib.request.urlopen(request, timeout=float(generation.get("request_timeout_s", 600))) as response:  # noqa: S310
            answer = json.loads(response.read())
    except urllib.error.HTTPError as exc:
        detail = exc.read()[:500].decode(errors="replace")
        raise EngineError(f"case {case['id']}: the engine answered HTTP {exc.code}: {detail}") from None
    except (OSError, urllib.error.URLError) as exc:
        raise EngineError(f"case {case['id']}: no answer from the engine: {exc}") from None
    choice = answer["choices"][0]
    content = (choice.get("message") or {}).get("content") or ""
    tokens = None
    if logprobs and choice.get("logprobs") and choice["logprobs"].get("content"):
        tokens = [
            {
                "token": item["token"],
                "logprob": item["logprob"],
                "top": {top["token"]: top["logprob"] for top in item.get("top_logprobs") or []},
            }
            for item in choice["logprobs"]["content"]
        ]
    return {"id": case["id"], "text": content, "logprobs": tokens, "latency_s": time.perf_counter() - started}


def read_answer(cache: Path, case: dict[str, Any], key: str) -> dict[str, Any] | None:
    """The cached answer to `case` produced under `key`, or None: a missing, unreadable or foreign
    file, or one another case or another key wrote, is not an answer (the case is asked again)."""
    try:
        answer = json.loads((cache / case_file_name(case["id"])).read_bytes())
    except (OSError, ValueError):
        return None
    if (
        not isinstance(answer, dict)
        or answer.get("key") != key
        or answer.get("id") != case["id"]
        or type(answer.get("id")) is not type(case["id"])
        or not isinstance(answer.get("text"), str)
    ):
        return None
    return answer


def answer_all(
    base_url: str,
    model: str,
    cases: list[dict[str, Any]],
    cache: Path,
    generation: dict[str, Any],
    logprobs: bool,
    concurrency: int,
    label: str,
    key: str,
) -> dict[str, Any]:
    """Every case answered once: cached answers (of this key) are read, the rest asked with at most
    `concurrency` in flight; each answer is written with the key that produced it."""
    cache.mkdir(parents=True, exist_ok=True)
    todo = [case for case in cases if read_answer(cache, case, key) is None]
    print(f"{label}: {len(cases) - len(todo)} cached, {len(todo)} to ask", flush=True)
    lock = threading.Lock()
    done = [len(cases) - len(todo)]
    asked_client_s = [0.0]

    def ask(case: dict[str, Any]) -> None:
        answer = {**chat(base_url, model, case, generation, logprobs), "key": key}
        began = time.perf_counter()
        write_atomic(cache / case_file_name(case["id"]), json.dumps(answer, ensure_ascii=False).encode())
        with lock:
            done[0] += 1
            asked_client_s[0] += time.perf_counter() - began
            print(f"progress {label} {done[0]}/{len(cases)}", flush=True)

    started = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, concurrency)) as pool:
        for future in concurrent.futures.as_completed([pool.submit(ask, case) for case in todo]):
            future.result()  # the first error stops the job: finished answers stay cached
    return {"asked": len(todo), "wall_s": time.perf_counter() - started}


def token_metrics(
    baseline: list[dict[str, Any]] | None, candidate: list[dict[str, Any]] | None
) -> dict[str, Any] | None:
    """Top-1 agreement and KL over the positions where both greedy answers share their prefix (the
    same context for both models), from the engines' top-k logprobs. KL is exact for the coarsened
    distributions {tokens both engines returned, everything else}: by the data-processing inequality
    it never exceeds the true KL (labelled so). None when either engine returned no logprobs."""
    if not baseline or not candidate:
        return None
    agree, kl = 0.0, []
    positions = 0
    floor = 1e-12
    for base, cand in zip(baseline, candidate, strict=False):
        positions += 1
        if base["token"] == cand["token"]:
            agree += 1
        shared = set(base["top"]) & set(cand["top"])
        p = {t: math.exp(base["top"][t]) for t in shared}
        q = {t: math.exp(cand["top"][t]) for t in shared}
        p_rest, q_rest = max(0.0, 1 - sum(p.values())), max(0.0, 1 - sum(q.values()))
        value = sum(pv * math.log(max(pv, floor) / max(q[t], floor)) for t, pv in p.items() if pv > 0)
        if p_rest > floor:
            value += p_rest * math.log(p_rest / max(q_rest, floor))
        kl.append(max(0.0, value))
        if base["token"] != cand["token"]:
            break  # past this point the two answers continue different texts: no longer comparable
    return {"positions": positions, "agree": agree, "kl": kl, "kl_kind": "top_k_coarsened_lower_bound"}


def verify(spec: dict[str, Any]) -> dict[str, float]:
    """Both artifacts' directories resolved inside the cluster's model roots (a directory that is a link
    out of them is refused before anything is read), then their files checked against the registered
    manifests. The spec's paths become the resolved ones: the engine serves what was checked."""
    for role in ("baseline", "candidate"):
        artifact = spec["artifacts"][role]
        artifact["path"] = str(
            resolve_inside_roots(artifact["path"], spec.get("model_roots") or [], f"artifacts.{role}.path")
        )
    timings = {}
    for role in ("baseline", "candidate"):
        artifact = spec["artifacts"][role]
        started = time.perf_counter()
        verify_artifact(Path(artifact["path"]), artifact["digest"], artifact.get("manifest") or None, role)
        timings[role] = round(time.perf_counter() - started, 3)
        print(f"verified {role} {artifact['digest']}", flush=True)
    return timings


def engine_version(engine: dict[str, Any], values: dict[str, str]) -> str:
    command = substitute(list(engine["version_argv"]), values)
    try:
        completed = subprocess.run(  # noqa: S603 - argv from the validated spec
            command, capture_output=True, text=True, timeout=120, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise EngineError(f"cannot ask the engine's version with {command[0]!r}: {exc}") from None
    version = completed.stdout.strip().splitlines()[-1] if completed.stdout.strip() else ""
    if completed.returncode != 0 or not version:
        raise EngineError(f"the engine's version command failed: {completed.stderr.strip()[-500:]}")
    return version


def serve_and_answer(
    spec: dict[str, Any],
    role: str,
    cases: list[dict[str, Any]],
    cache: Path,
    out: Path,
    values: dict[str, str],
    key: str,
) -> dict[str, Any]:
    """Launch the engine on one artifact, answer every uncached case, stop it. Nothing to ask: no launch."""
    standard: dict[str, Any] = spec.get("lm_eval") or {}
    standard_file = cache / f"standard-{standard['key']}.json" if standard else None
    if all(read_answer(cache, case, key) is not None for case in cases) and (
        standard_file is None or standard_file.exists()
    ):
        print(f"{role}: every answer cached, engine not started", flush=True)
        return {"started": False}
    engine = spec["engine"]
    port = str(free_port())
    artifact = spec["artifacts"][role]
    # online quantization: the candidate is the same artifact served with the engine's quantization flags
    extra = list(engine.get("candidate_argv") or []) if role == "candidate" else []
    argv = substitute([*engine["argv"], *extra], {**values, "{model}": artifact["path"], "{port}": port})
    if engine.get("multinode"):  # the plan spans nodes: the engine's own launch on every node of this allocation
        argv = multinode_command(engine["name"], argv, **engine["multinode"])
    log_path = out / f"engine-{role}.log"
    print(f"{role}: starting {argv[0]} on port {port}", flush=True)
    process = Engine(argv, log_path, env=engine.get("env"))
    try:
        health_s = process.wait_healthy(
            f"http://127.0.0.1:{port}{engine['health_path']}", float(engine["health_timeout_s"])
        )
        print(f"{role}: healthy after {health_s:.1f} s", flush=True)
        served_name = substitute([engine.get("served_model_name") or "{model}"], {"{model}": artifact["path"]})[0]
        try:
            asked = answer_all(
                f"http://127.0.0.1:{port}",
                served_name,
                cases,
                cache,
                spec["generation"],
                bool(engine.get("logprobs")),
                int(spec.get("concurrency", 4)),
                role,
                key,
            )
        except EngineError as exc:  # e.g. out of memory mid-run: the engine's log says why
            raise EngineError(f"{exc}\nlast lines of the engine's log:\n{log_tail(log_path)}") from None
        if standard_file is not None and not standard_file.exists():
            began = time.perf_counter()
            print(f"{role}: standard tasks {','.join(standard['tasks'])} through lm-eval", flush=True)
            try:
                outcome = run_standard_tasks(
                    python=values["{python}"],
                    base_url=f"http://127.0.0.1:{port}",
                    model=served_name,
                    config=standard,
                    out=out / f"standard-{role}.json",
                    log_path=out / f"lm-eval-{role}.log",
                    seed=int(spec["generation"]["seed"]),
                )
            except ValueError as exc:
                raise EngineError(f"{role}: standard tasks: {exc}") from None
            write_atomic(standard_file, json.dumps(outcome, sort_keys=True).encode())
            asked["standard_s"] = round(time.perf_counter() - began, 3)
    finally:
        process.stop()
    return {"started": True, "healthy_after_s": round(health_s, 3), **asked}


def run(spec: dict[str, Any], out: Path) -> dict[str, Any]:
    started = time.perf_counter()
    out.mkdir(parents=True, exist_ok=True)
    cases, set_sha = load_cases(spec.get("eval_set"), spec.get("max_cases_per_category"))
    verify_s = verify(spec)  # before anything is served
    values = {"{python}": sys.executable, "{host}": "127.0.0.1"}
    engine = spec["engine"]
    version = engine_version(engine, values)
    # The request page shows the version while the run is in progress (from this line of the log).
    print(f"engine {engine['name']} {version}", flush=True)
    expected = engine.get("expected_version")
    if expected and version != expected:
        raise EngineError(f"engine version {version} is not the {expected} the plan names")
    generation = {"temperature": 0.0, **spec["generation"]}
    standard = spec.get("lm_eval")
    if standard:  # checked before anything is served: a task directory missing on this node fails now
        directory = Path(standard["dir"])
        if not directory.is_dir():
            raise EngineError(f"lm_eval.dir: {directory} is not a directory on this node")
        check_tasks(list(standard["tasks"]))
        tasks_sha = tasks_dir_sha256(directory)
        standard["tasks_dir_sha256"] = tasks_sha
        standard["key"] = standard_key(standard, tasks_sha, int(generation["seed"]))
    key = cache_key(
        spec["artifacts"]["baseline"]["digest"],
        engine["name"],
        version,
        baseline_serving(spec.get("serving", {})),
        set_sha,
        generation,
    )
    # The candidate's answers are keyed the same way (its digest, the whole serving config): a file left
    # in the run's cache by anything else is asked again, not counted.
    candidate_key = cache_key(
        spec["artifacts"]["candidate"]["digest"],
        engine["name"],
        version,
        {**spec.get("serving", {}), "candidate_argv": list(engine.get("candidate_argv") or [])},
        set_sha,
        generation,
    )
    baseline_cache = (out / spec["baseline_cache_dir"] / key).resolve()
    candidate_cache = (out / spec.get("cache_dir", "cache")).resolve()
    runs = {
        "baseline": serve_and_answer(spec, "baseline", cases, baseline_cache, out, values, key),
        "candidate": serve_and_answer(spec, "candidate", cases, candidate_cache, out, values, candidate_key),
    }
    compare_started = time.perf_counter()
    records = []
    for case in cases:
        base = read_answer(baseline_cache, case, key)
        cand = read_answer(candidate_cache, case, candidate_key)
        if base is None or cand is None:  # written by this job a moment ago: only a concurrent writer explains it
            raise EngineError(f"case {case['id']}: its cached answer changed while the job ran")
        records.append(
            {
                "id": case["id"],
                "category": case["category"],
                "baseline": base["text"],
                "quantized": cand["text"],
                **case_verdict(case, base["text"], cand["text"]),
                "tokens": token_metrics(base.get("logprobs"), cand.get("logprobs")),
            }
        )
    compare_s = time.perf_counter() - compare_started
    if standard:
        outcomes = {
            role: json.loads((cache / f"standard-{standard['key']}.json").read_text())
            for role, cache in (("baseline", baseline_cache), ("candidate", candidate_cache))
        }
        standard_result = {
            "harness": "lm-eval",
            "lm_eval_version": outcomes["candidate"].get("lm_eval_version"),
            "model": "local-chat-completions",
            "tasks_dir_sha256": standard["tasks_dir_sha256"],
            "limit": standard.get("limit"),
            "tasks": compare(outcomes["baseline"], outcomes["candidate"]),
        }
    result = summarize(records, float(spec.get("threshold", 0.05)))
    usage = resource.getrusage(resource.RUSAGE_SELF)
    asked = sum(r.get("asked", 0) for r in runs.values())
    result.update(
        {
            "mode": "served",
            "scheme": spec["scheme"],
            "candidate": {k: spec["artifacts"]["candidate"][k] for k in ("digest", "path")},
            "baseline": {k: spec["artifacts"]["baseline"][k] for k in ("digest", "path")},
            "engine": {
                "name": engine["name"],
                "version": version,
                "argv": engine["argv"],
                "candidate_argv": list(engine.get("candidate_argv") or []),
            },
            "serving": spec.get("serving", {}),
            "generation": generation,
            # what the candidate answered, per case: a canary of these weights must answer alike
            # (governance/canary/regression.py compares them by case_verdict and the same rule)
            "candidate_answers": {record["id"]: record["quantized"] for record in records},
            "baseline_cache_key": key,
            "eval_set_sha256": set_sha,
            "token_metrics": "measured from the engine's logprobs"
            if engine.get("logprobs")
            else "absent: the engine returns no logprobs",
            "versions": {"python": platform.python_version(), "engine": version},
            "timing": {
                "verify_s": verify_s,
                "runs": runs,
                "compare_s": round(compare_s, 4),
                "total_s": round(time.perf_counter() - started, 3),
                # the client's own CPU time per case asked: what this process costs next to the engine
                "client_cpu_s_per_case": round((usage.ru_utime + usage.ru_stime) / asked, 5) if asked else None,
            },
            "client": {"peak_rss_mib": peak_rss_mib(usage)},
        }
    )
    if standard:  # reported beside the verdict; the pass/fail is the eval set's
        result["standard_tasks"] = standard_result
    write_result(out, json.dumps(result, ensure_ascii=False, sort_keys=True).encode())
    return result


def main(argv: list[str] | None = None) -> int:
    return job_main(
        "planner.evaljob.served",
        run,
        lambda r: (
            f"pass={r['pass']} overall bound={r['overall']['upper_bound_95']:.4f} engine={r['engine']['version']}"
        ),
        argv,
    )


if __name__ == "__main__":
    sys.exit(main())
