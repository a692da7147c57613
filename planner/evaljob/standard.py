"""Standard tasks (lm-eval-harness) against the engine the eval already serves.

python -m planner.evaljob.standard --base-url http://127.0.0.1:PORT --model NAME --tasks a,b
    --tasks-dir DIR --out results.json [--limit N] [--seed 0] [--concurrency 2]

Runs in a process of its own, started by the served job while the engine is up: lm-eval imports
torch, datasets and pandas, which the job (a small HTTP client) never loads. The model is
lm-eval's `local-chat-completions` (chat API, chat template applied by the engine), so only
generation tasks (`output_type: generate_until`) apply: a chat API returns no prompt logprobs.

Offline by construction: the task directory holds the task YAMLs and their data files (named
relative to it, e.g. `dataset_kwargs: {data_files: {test: tiny.jsonl}}`), `HF_DATASETS_OFFLINE`
and `HF_HUB_OFFLINE` are set and the datasets cache lives in the attempt directory, so a task
whose data is not in the directory fails naming it instead of reaching for the Hub.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

TASK_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,100}$")
DATASETS_CACHE = "hf-datasets"  # a datasets cache an operator prepared inside the task directory
OFFLINE_ENV = {"HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


def standard_key(config: dict[str, Any], tasks_sha256: str, seed: int) -> str:
    """What one engine's standard-task results depend on besides the engine and weights (which name
    the cache directory they are kept in): the tasks, their definitions and data, limit and seed."""
    material = json.dumps([sorted(config["tasks"]), config.get("limit"), tasks_sha256, seed], sort_keys=True)
    return hashlib.sha256(material.encode()).hexdigest()[:16]


def tasks_dir_sha256(directory: Path) -> str:
    """What the task definitions and their data files were: SHA-256 over (relative path, file
    SHA-256), the prepared datasets cache left out (its lock files change on every read; what it
    holds is named by the tasks' versions in the results)."""
    digest = hashlib.sha256()
    files = (p for p in directory.rglob("*") if p.is_file() and DATASETS_CACHE not in p.relative_to(directory).parts)
    for path in sorted(files):
        digest.update(f"{path.relative_to(directory).as_posix()}\0".encode())
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def check_tasks(tasks: list[str]) -> list[str]:
    if not tasks or len(tasks) > 50:
        raise ValueError("lm_eval.tasks: between 1 and 50 task names")
    for name in tasks:
        if not isinstance(name, str) or not TASK_NAME.fullmatch(name):
            raise ValueError(f"lm_eval.tasks: {name!r} is not a task name (letters, digits, '_', '.', '-')")
    return tasks


def per_task(results: dict[str, Any], tasks: list[str]) -> dict[str, Any]:
    """lm-eval's results -> {task: {version, n, metrics: {metric: {value, stderr}}}}: every metric it
    reported with its standard error (null where lm-eval gives none, e.g. a single sample)."""
    table: dict[str, Any] = {}
    for task, row in (results.get("results") or {}).items():
        metrics: dict[str, Any] = {}
        for key, value in row.items():
            # sample_len is lm-eval's count of documents, not a metric (n says it)
            if key in ("alias", "sample_len") or "_stderr," in key or not isinstance(value, int | float):
                continue
            metric, _, filter_name = key.partition(",")
            stderr = row.get(f"{metric}_stderr,{filter_name}")
            name = metric if filter_name in ("", "none") else f"{metric},{filter_name}"
            metrics[name] = {"value": value, "stderr": stderr if isinstance(stderr, int | float) else None}
        samples = (results.get("n-samples") or {}).get(task) or {}
        table[task] = {
            "version": (results.get("versions") or {}).get(task),
            "n": samples.get("effective"),
            "metrics": metrics,
        }
    missing = [task for task in tasks if task not in table]
    if missing:
        raise ValueError(f"lm-eval reported no results for {', '.join(missing)}")
    return table


def evaluate(args: argparse.Namespace) -> dict[str, Any]:
    import lm_eval
    from lm_eval.tasks import TaskManager

    tasks = check_tasks(args.tasks.split(","))
    # The directory's own task YAMLs first: indexing lm-eval's thousands of built-in tasks costs
    # about a minute, paid only when a task (e.g. gsm8k, with its data in the directory's
    # `hf-datasets` cache) is not defined there.
    manager = TaskManager(include_path=str(args.tasks_dir), include_defaults=False)
    if any(task not in manager.all_tasks for task in tasks):
        manager = TaskManager(include_path=str(args.tasks_dir))
    unknown = [task for task in tasks if task not in manager.all_tasks]
    if unknown:
        raise ValueError(f"lm_eval.tasks: {', '.join(unknown)} not found in {args.tasks_dir} nor among lm-eval's")
    results = lm_eval.simple_evaluate(
        model="local-chat-completions",
        model_args={
            "model": args.model,
            "base_url": f"{args.base_url}/v1/chat/completions",
            "num_concurrent": args.concurrency,
            "max_retries": 1,
            "tokenized_requests": False,
            "timeout": 600,
        },
        tasks=tasks,
        task_manager=manager,
        limit=args.limit,
        apply_chat_template=True,
        log_samples=False,
        random_seed=args.seed,
        numpy_random_seed=args.seed,
        torch_random_seed=args.seed,
        fewshot_random_seed=args.seed,
        bootstrap_iters=1000,
    )
    if not results:
        raise ValueError("lm-eval returned no results")
    return {"lm_eval_version": lm_eval.__version__, "tasks": per_task(results, tasks)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--tasks", required=True)
    parser.add_argument("--tasks-dir", required=True, type=Path)
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--limit", type=int, default=None)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--concurrency", type=int, default=1)
    args = parser.parse_args(argv)
    args.tasks_dir = args.tasks_dir.resolve()
    # data files are named relative to the task directory; built-in tasks read the datasets cache an
    # operator prepared there, if any. Otherwise the cache is the attempt's (HF_HOME): the task
    # directory is configuration, never written by a job.
    os.chdir(args.tasks_dir)
    prepared = args.tasks_dir / DATASETS_CACHE
    if prepared.is_dir():
        os.environ["HF_DATASETS_CACHE"] = str(prepared)
    try:
        outcome = evaluate(args)
    except Exception as exc:  # any failure of the harness is reported, in words, to the job
        print(f"standard tasks failed: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
        return 1
    args.out.write_text(json.dumps(outcome, sort_keys=True))
    return 0


def run_standard_tasks(
    *,
    python: str,
    base_url: str,
    model: str,
    config: dict[str, Any],
    out: Path,
    log_path: Path,
    seed: int,
) -> dict[str, Any]:
    """Run the tasks of `config` ({tasks, dir, limit, concurrency, timeout_s}) against the engine at
    `base_url` in a subprocess; its output goes to `log_path`. Raises ValueError naming the failure."""
    tasks = check_tasks(list(config["tasks"]))
    directory = Path(config["dir"])
    if not directory.is_dir():
        raise ValueError(f"lm_eval.dir: {directory} is not a directory on this node")
    out.parent.mkdir(parents=True, exist_ok=True)
    hf_home = log_path.parent / "hf-home"  # the datasets cache: this attempt's, never the account's
    argv = [python, "-m", "planner.evaljob.standard", "--base-url", base_url, "--model", model,
            "--tasks", ",".join(tasks), "--tasks-dir", str(directory), "--out", str(out.resolve()),
            "--seed", str(seed), "--concurrency", str(int(config.get("concurrency") or 1))]  # fmt: skip
    if config.get("limit"):
        argv += ["--limit", str(int(config["limit"]))]
    env = {**os.environ, **OFFLINE_ENV, "HF_HOME": str(hf_home.resolve()), "PYTHONPATH": _python_path()}
    with log_path.open("ab") as log:
        try:
            completed = subprocess.run(  # noqa: S603 - argv built here from validated names, no shell
                argv,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                timeout=float(config.get("timeout_s") or 3600),
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise ValueError(f"lm-eval did not finish within {config.get('timeout_s') or 3600} s") from None
    if completed.returncode != 0 or not out.exists():
        tail = "\n".join(log_path.read_text(errors="replace").splitlines()[-20:])
        raise ValueError(f"lm-eval exited with code {completed.returncode}; last lines of its log:\n{tail}")
    result: dict[str, Any] = json.loads(out.read_text())
    return result


def _python_path() -> str:
    """This checkout first (planner importable in the subprocess), then whatever the job had."""
    root = str(Path(__file__).resolve().parents[2])
    rest = os.environ.get("PYTHONPATH", "")
    return f"{root}:{rest}" if rest else root


def compare(baseline: dict[str, Any], candidate: dict[str, Any]) -> dict[str, Any]:
    """Per task and metric: both values with their standard errors, the difference and its standard
    error (independent samples: sqrt(se_b^2 + se_c^2); null when either is missing)."""
    table: dict[str, Any] = {}
    for task, cand in candidate["tasks"].items():
        base = baseline["tasks"].get(task) or {"metrics": {}}
        metrics = {}
        for name, value in cand["metrics"].items():
            before = base["metrics"].get(name) or {}
            delta = value["value"] - before["value"] if "value" in before else None
            base_se, cand_se = before.get("stderr"), value["stderr"]
            metrics[name] = {
                "baseline": before.get("value"),
                "baseline_stderr": before.get("stderr"),
                "candidate": value["value"],
                "candidate_stderr": value["stderr"],
                "delta": delta,
                "delta_stderr": (base_se**2 + cand_se**2) ** 0.5
                if base_se is not None and cand_se is not None
                else None,
            }
        table[task] = {"version": cand.get("version"), "n": cand.get("n"), "metrics": metrics}
    return table


if __name__ == "__main__":
    sys.exit(main())
