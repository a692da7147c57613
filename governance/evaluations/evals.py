"""Eval runs: ship the eval-job payload spec to a cluster, summarise its result.json as evidence."""

from __future__ import annotations

import json
import posixpath
from typing import Any

from django.contrib.auth.models import User
from django.db import transaction

from governance.audit.actions import AuditAction
from governance.audit.services import audit_record, write_service
from governance.core.errors import invalid_input
from governance.evaluations.models import Cluster, EvalKind, EvalRun, EvalStatus, JobKind, JobRun, JobRunState
from governance.evaluations.services import jobrun_create
from governance.evaluations.signals import eval_finished
from planner.quant.names import SCHEME_NAMES

EVAL_ARGS = ["-m", "planner.evaljob", "run", "--spec", "spec.json", "--out", "."]  # after the cluster's python


def _case_problem(case: Any, seen: set[str | int]) -> str | None:
    """What is wrong with one eval_set case, or None."""
    if not isinstance(case, dict):
        return "must be a JSON object"
    missing = [k for k in ("id", "category", "turns", "key_items") if k not in case]
    if missing:
        return f"missing {', '.join(missing)}"
    if isinstance(case["id"], bool) or not isinstance(case["id"], str | int):
        return "id must be a string or an integer"
    if case["id"] in seen:
        return f"id {case['id']!r} appears twice"
    if not isinstance(case["category"], str):
        return "category must be a string"
    turns, key_items = case["turns"], case["key_items"]
    if not isinstance(turns, list) or not turns or not all(isinstance(turn, str) for turn in turns):
        return "turns must be a non-empty list of strings"
    if not isinstance(key_items, list) or not all(isinstance(item, str) for item in key_items):
        return "key_items must be a list of strings"
    return None


def validate_eval_set(text: str) -> int:
    """A user's eval set (JSONL): each line an object with id, category, turns and key_items."""
    count = 0
    seen: set[str | int] = set()
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            case = json.loads(line)
        except ValueError:
            raise invalid_input("eval_set", f"line {number}: not JSON") from None
        problem = _case_problem(case, seen)
        if problem:
            raise invalid_input("eval_set", f"line {number}: {problem}")
        seen.add(case["id"])
        count += 1
    if count == 0:
        raise invalid_input("eval_set", "no cases")
    return count


def resolve_model_path(cluster: Cluster, path: str) -> str:
    """The checkpoint directory, normalised, provided it lies inside one of the cluster's model
    roots: the job must never be pointed at other files of the cluster (keys, /etc, other runs)."""
    if not path.startswith("/") or ".." in path.split("/") or "\0" in path:
        raise invalid_input("model_path", "an absolute path without '..' segments")
    resolved = posixpath.normpath(path)
    roots = [posixpath.normpath(root) for root in cluster.model_roots or []]
    if not roots:
        raise invalid_input("model_path", f"cluster {cluster.name} has no model roots configured")
    if not any(resolved == root or resolved.startswith(root.rstrip("/") + "/") for root in roots):
        raise invalid_input("model_path", f"must lie inside one of the cluster's model roots: {', '.join(roots)}")
    return resolved


@write_service
def eval_run_request(
    *,
    cluster: Cluster,
    scheme: str,
    model: dict[str, Any],
    actor: User | None,
    deployment: Any = None,
    threshold: float = 0.05,
    max_cases_per_category: int | None = None,
    max_new_tokens: int = 64,
    ignore: list[str] | None = None,
    extra_files: dict[str, str] | None = None,
    time_limit_s: int | None = None,
    eval_set: str | None = None,
) -> EvalRun:
    if scheme not in SCHEME_NAMES:
        raise invalid_input("scheme", f"unknown {scheme!r}; one of {', '.join(SCHEME_NAMES)}")
    if not ("path" in model or "config" in model):
        raise invalid_input("model", "give a checkpoint path on the cluster ('path')")
    if "path" in model:
        model = {**model, "path": resolve_model_path(cluster, str(model["path"]))}
    if not 0 < threshold < 1:
        raise invalid_input("threshold", "must be between 0 and 1")
    spec: dict[str, Any] = {
        "model": model,
        "scheme": scheme,
        "threshold": threshold,
        "max_new_tokens": max_new_tokens,
        "max_cases_per_category": max_cases_per_category,
        "ignore": list(ignore or []),
    }
    files = dict(extra_files or {})
    if eval_set is not None:  # the user's own set travels with the job; the default ships with the payload
        validate_eval_set(eval_set)
        files["eval_set.jsonl"] = eval_set
        spec["eval_set"] = "eval_set.jsonl"
    with transaction.atomic():
        evaluation = EvalRun.objects.create(
            request=deployment, cluster=cluster, scheme=scheme, threshold=threshold, requested_by=actor
        )
        job = jobrun_create(
            cluster=cluster,
            kind=JobKind.EVAL,
            command=[cluster.python, *EVAL_ARGS],
            files={"spec.json": json.dumps(spec), **files},
            time_limit_s=time_limit_s,
            subject=evaluation,
            actor=actor,
        )
        evaluation.job = job
        evaluation.save(update_fields=["job", "updated_at"])
    return evaluation


def summarise(result: dict[str, Any]) -> dict[str, Any]:
    """The evidence view: per category n, failures, the bound vs the threshold, failing cases."""

    def row(block: dict[str, Any]) -> dict[str, Any]:
        return {
            key: block.get(key)
            for key in (
                "n",
                "failures",
                "fail_rate",
                "upper_bound_95",
                "threshold",
                "pass",
                "top1_agreement",
                "kl",
                "recovery",
                "flips",
            )
        } | {"failing_cases": block.get("failing_cases", [])[:50]}

    return {
        "pass": bool(result.get("pass")),
        "overall": row(result.get("overall", {})),
        "categories": {name: row(block) for name, block in result.get("categories", {}).items()},
        "quantization": result.get("quantization"),
        "versions": result.get("versions"),
        "timing": result.get("timing"),
    }


def on_job_finished(sender: Any = None, *, run: JobRun, **kwargs: Any) -> None:
    """Receiver of signals.job_finished: turn the finished eval job into the eval run's verdict."""
    evaluation = EvalRun.objects.filter(job=run).select_related("request").first()
    if evaluation is None or evaluation.status != EvalStatus.RUNNING:
        return
    with transaction.atomic():
        if run.state == JobRunState.CANCELLED:
            evaluation.status = EvalStatus.CANCELLED
            evaluation.summary = {"pass": False, "error": run.reason, "log_tail": run.log_tail[-2000:]}
        elif run.state == JobRunState.SUCCEEDED and run.result:
            evaluation.summary = summarise(run.result)
            evaluation.eval_set_sha256 = str(run.result.get("eval_set_sha256", ""))
            evaluation.status = EvalStatus.PASSED if evaluation.summary["pass"] else EvalStatus.FAILED
        else:
            evaluation.status = EvalStatus.ERROR
            evaluation.summary = {"pass": False, "error": run.reason, "log_tail": run.log_tail[-2000:]}
        evaluation.save(update_fields=["summary", "eval_set_sha256", "status", "updated_at"])
        audit_record(
            actor="system:evals",
            action=AuditAction.EVAL_COMPLETED,
            obj=evaluation.request if evaluation.request else evaluation,
            data={
                "eval": str(evaluation.code),
                "scheme": evaluation.scheme,
                "status": evaluation.status,
                "bound": (evaluation.summary or {}).get("overall", {}).get("upper_bound_95"),
            },
        )
        transaction.on_commit(lambda: eval_finished.send(sender=EvalRun, evaluation=evaluation))


def _evidence_key(run: EvalRun) -> tuple[Any, ...]:
    """One entry per what-was-evaluated: a later run of the same weights, engine, version and layout
    supersedes an earlier one; a run of another layout or engine version stands beside it."""
    layout = tuple(int((run.serving or {}).get(name) or 1) for name in ("tp", "pp", "ep", "dp"))
    return (run.kind, run.scheme, run.candidate_digest, run.engine, run.engine_version, layout)


def eval_evidence_item(run: EvalRun) -> dict[str, Any]:
    return {
        "eval": str(run.code),
        "kind": run.kind,
        "scheme": run.scheme,
        "status": run.status,
        "candidate_digest": run.candidate_digest,
        "baseline_digest": run.baseline_digest,
        "engine": run.engine,
        "engine_version": run.engine_version,
        "serving": run.serving or {},
        "generation": run.generation or {},
        "eval_set_sha256": run.eval_set_sha256,
        "threshold": run.threshold,
        "overall": (run.summary or {}).get("overall"),
    }


def eval_evidence(deployment: Any) -> list[dict[str, Any]]:
    """The latest eval run per evaluated configuration of a deployment request, for its evidence."""
    latest: dict[tuple[Any, ...], EvalRun] = {}
    # A cancelled run has no verdict: it neither blocks nor counts; the run before or after it stands.
    prefetched = getattr(deployment, "_prefetched_objects_cache", {}).get("eval_runs")  # the deployment list's
    runs = (
        sorted((e for e in prefetched if e.status != EvalStatus.CANCELLED), key=lambda e: e.created_at)
        if prefetched is not None
        else EvalRun.objects.filter(request=deployment).exclude(status=EvalStatus.CANCELLED).order_by("created_at")
    )
    for evaluation in runs:
        latest[_evidence_key(evaluation)] = evaluation
    ordered = sorted(latest.values(), key=lambda e: (e.kind != EvalKind.SERVED, e.scheme, e.created_at))
    return [eval_evidence_item(e) for e in ordered]


def eval_findings(deployment: Any) -> list[dict[str, Any]]:
    """What blocks engineering approval (and the gate): a served eval of the request's weights still
    running or not passed, and, for a quantized derivative, no passed served eval of its digest.
    Screening runs are shown, never counted either way."""
    digest = deployment.artifact.weights_digest
    served = [
        item
        for item in eval_evidence(deployment)
        if item["kind"] == EvalKind.SERVED and item["candidate_digest"] == digest
    ]
    findings = []
    for item in served:
        if item["status"] == EvalStatus.RUNNING:
            findings.append(
                {"code": "eval.pending", "severity": "blocker", "message": f"{item['scheme']} eval still running"}
            )
        elif item["status"] != EvalStatus.PASSED:
            bound = (item["overall"] or {}).get("upper_bound_95")
            findings.append(
                {
                    "code": "eval.failed",
                    "severity": "blocker",
                    "message": f"{item['scheme']} eval {item['status']} (95% upper bound {bound})",
                }
            )
    if deployment.artifact.derivation == "quantize" and not any(i["status"] == EvalStatus.PASSED for i in served):
        findings.append(
            {
                "code": "eval.missing",
                "severity": "blocker",
                "message": f"no passed eval served the quantized weights {digest} through an engine",
            }
        )
    return findings
