"""Eval runs: ship the eval-job payload spec to a cluster, summarise its result.json as evidence."""

from __future__ import annotations

import json
import posixpath
from datetime import timedelta
from pathlib import Path
from typing import Any

from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone

from governance.artifacts.manifest import manifest_lines
from governance.artifacts.models import ModelArtifact
from governance.audit.actions import AuditAction
from governance.audit.services import audit_record
from governance.core.errors import invalid_input
from governance.core.services import write_service
from governance.evaluations.inspections import artifact_inspection_request
from governance.evaluations.models import (
    ACTIVE_STATES,
    ArtifactLocation,
    Cluster,
    EvalKind,
    EvalRun,
    EvalStatus,
    ExecutorKind,
    JobKind,
    JobRun,
    JobRunState,
)
from governance.evaluations.selectors import artifact_known_manifest, artifact_latest_inspection, artifact_parent_check
from governance.evaluations.services import jobrun_create
from governance.evaluations.signals import eval_finished
from planner.engines.registry import DEFAULT_ENGINE
from planner.evaljob.cases import case_id_problem
from planner.evaljob.engines import (
    ENGINES,
    plan_argv_of_command,
    plan_launch,
    split_online_quantization,
    transformers_launch,
)
from planner.evaljob.standard import check_tasks
from planner.manifest import (
    digest_matches,
    digest_of_manifest,
    manifest_entries,
    manifest_text_lines,
    resolve_inside_roots,
    same_files,
)
from planner.quant.names import SCHEME_NAMES

EVAL_ARGS = ["-m", "planner.evaljob", "run", "--spec", "spec.json", "--out", "."]  # after the cluster's python
SERVED_ARGS = ["-m", "planner.evaljob.served", "run", "--spec", "spec.json", "--out", "."]


def _case_problem(case: Any, seen: set[str | int]) -> str | None:
    """What is wrong with one eval_set case, or None."""
    if not isinstance(case, dict):
        return "must be a JSON object"
    missing = [k for k in ("id", "category", "turns", "key_items") if k not in case]
    if missing:
        return f"missing {', '.join(missing)}"
    id_problem = case_id_problem(case["id"])  # the node checks it again: an id is never a path
    if id_problem:
        return id_problem
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


def resolve_model_path(cluster: Cluster, path: str, field: str = "path") -> str:
    """The checkpoint directory, normalised, provided it lies inside one of the cluster's model
    roots: the job must never be pointed at other files of the cluster (keys, /etc, other runs)."""
    if not path.startswith("/") or ".." in path.split("/") or "\0" in path or "\n" in path:
        raise invalid_input(field, "an absolute path without '..' segments")
    resolved = posixpath.normpath(path)
    roots = [posixpath.normpath(root) for root in cluster.model_roots or []]
    if not roots:
        raise invalid_input(field, f"cluster {cluster.name} has no model roots configured")
    if not any(resolved == root or resolved.startswith(root.rstrip("/") + "/") for root in roots):
        raise invalid_input(field, f"must lie inside one of the cluster's model roots: {', '.join(roots)}")
    if cluster.executor == ExecutorKind.LOCAL:  # the files are on this host: check where the path leads
        local_model_dir(cluster, resolved, field)
    return resolved


def local_model_dir(cluster: Cluster, path: str, field: str = "path") -> Path:
    """On the local executor, `path` with its symbolic links resolved, inside the cluster's resolved
    model roots (a directory that is a link out of them is refused); the files are read there. Other
    clusters' paths are checked the same way on the node (the job specs carry `model_roots`)."""
    try:
        return resolve_inside_roots(path, list(cluster.model_roots or []), field)
    except ValueError:
        raise invalid_input(
            field, "leads outside the cluster's model roots through a symbolic link; give the directory itself"
        ) from None


def local_weights_digest(*, cluster: Cluster, path: str) -> str:
    """The weights digest of the checkpoint at `path` on the local executor's host, hashed here (the
    wizard registers an artifact from its location). Another cluster's files are hashed on its node:
    their digest is given (manage.py artifact_digest DIR), never guessed."""
    if cluster.executor != ExecutorKind.LOCAL:
        raise invalid_input("weights_digest", f"the files on cluster {cluster.name} are not on this host: give it")
    local = local_model_dir(cluster, resolve_model_path(cluster, path))
    if not local.is_dir():
        raise invalid_input("path", "no such directory on the cluster")
    try:
        return digest_of_manifest(manifest_lines(local))
    except (OSError, ValueError) as exc:
        raise invalid_input("path", str(exc)) from None


# A config.json is a few KiB; read no more than the API takes pasted (artifacts.api.CONFIG_MAX_BYTES).
LOCAL_CONFIG_MAX_BYTES = 256 * 1024


def local_checkpoint_config(*, cluster: Cluster, path: str) -> dict[str, Any] | None:
    """The config.json of the checkpoint at `path` on the local executor's host, for a registration
    from a location that names no catalog architecture; None where there is none to read here (the
    inspection reads it on the node either way)."""
    if cluster.executor != ExecutorKind.LOCAL:
        return None
    config = local_model_dir(cluster, resolve_model_path(cluster, path)) / "config.json"
    if config.is_symlink() or not config.is_file() or config.stat().st_size > LOCAL_CONFIG_MAX_BYTES:
        return None
    try:
        found = json.loads(config.read_bytes())
    except ValueError:
        raise invalid_input("path", "its config.json is not JSON") from None
    return found if isinstance(found, dict) else None


@write_service
def artifact_location_register(
    *, artifact: ModelArtifact, cluster: Cluster, path: str, actor: User | None, manifest: str | None = None
) -> ArtifactLocation:
    """Record where an artifact's files lie on a cluster. The manifest (one line per file) lets the eval
    job name the file that differs; it must hash to the artifact's digest. On the local executor the
    files are on this host: without a manifest, it is computed here and must match the digest."""
    resolved = resolve_model_path(cluster, path)
    local = local_model_dir(cluster, resolved) if cluster.executor == ExecutorKind.LOCAL else None
    if manifest is None and local is not None and local.is_dir():
        try:
            manifest = "".join(manifest_lines(local))
        except (OSError, ValueError) as exc:
            raise invalid_input("path", str(exc)) from None
    if manifest:
        try:  # a requester's text: the line that is not a manifest line is named
            manifest_entries(manifest_text_lines(manifest))
        except ValueError as exc:
            raise invalid_input("manifest", str(exc)) from None
    # never what they hash to: the files may be another team's
    if manifest and not digest_matches(manifest, artifact.weights_digest):
        raise invalid_input(
            "manifest",
            f"the files do not match the artifact's weights digest {artifact.weights_digest}",
        )
    # The digest does not bind the names: the files are the ones the service holds a manifest of, by name.
    known = artifact_known_manifest(artifact)
    if manifest and known and not same_files(manifest, known):
        raise invalid_input(
            "manifest",
            "lists the artifact's files under other names than its registered manifest (same bytes, other paths)",
        )
    manifest = manifest or known
    with transaction.atomic():
        location, _ = ArtifactLocation.objects.update_or_create(
            artifact=artifact,
            cluster=cluster,
            defaults={"path": resolved, "manifest": manifest or "", "registered_by": actor},
        )
        audit_record(
            actor=actor or "system:evals",
            action=AuditAction.CLUSTER_REGISTERED,
            obj=artifact,
            data={
                "change": "artifact_location",
                "cluster": cluster.name,
                "path": resolved,
                "weights_digest": artifact.weights_digest,
                "manifest_files": len((manifest or "").splitlines()),
            },
        )
        # What the files say of themselves is read where they lie (queued: sent after commit).
        artifact_inspection_request(location=location, actor=actor)
    return location


def _location(artifact: ModelArtifact, cluster: Cluster, role: str) -> dict[str, str]:
    location = ArtifactLocation.objects.filter(artifact=artifact, cluster=cluster).first()
    if location is None:
        raise invalid_input(
            "cluster",
            f"the {role} {artifact.name} ({artifact.weights_digest}) has no location on cluster {cluster.name}",
        )
    manifest = location.manifest or artifact_known_manifest(artifact)  # names a later reading learnt
    return {"path": location.path, "digest": artifact.weights_digest, "manifest": manifest}


def serving_config(deployment: Any, plan_result: dict[str, Any] | None) -> dict[str, Any]:
    """What the eval serves with, from the request's serving plan and its capacity plan's layout."""
    plan = deployment.serving_plan
    layout = (plan_result or {}).get("parallel") or {}
    config: dict[str, Any] = {
        "precision": plan["precision"],
        "kv_dtype": plan.get("kv_dtype", "bf16"),
        "max_model_len": plan.get("max_model_len"),
        "gpu_memory_utilization": plan.get("gpu_memory_utilization", 0.9),
    }
    for name in ("tp", "pp", "ep", "dp"):
        config[name] = int(plan.get(name) or layout.get(name) or 1)
    config["nodes"] = int(layout.get("nodes") or 1)
    return config


def _engine_spec(
    engine: str, cluster: Cluster, plan_result: dict[str, Any] | None, config: dict[str, Any], health_timeout_s: int
) -> tuple[dict[str, Any], int]:
    """(the engine as the job launches it, GPUs per node). The embedded default serves through
    `transformers serve` on CPU; a GPU cluster through the plan's own launch command."""
    if engine == "transformers":
        return transformers_launch().as_spec(health_timeout_s), 0
    argv = ((plan_result or {}).get("serving_argv") or {}).get(engine)
    command = ((plan_result or {}).get("serving") or {}).get(engine)
    if not argv and not command:
        raise invalid_input("engine", f"the capacity plan has no {engine} launch command; compute the plan first")
    try:
        # a plan stored before plans carried their argv has its command string only
        launch = plan_launch(engine, argv if argv else plan_argv_of_command(engine, str(command)))
    except ValueError as exc:
        raise invalid_input("engine", str(exc)) from None
    spec = launch.as_spec(health_timeout_s)
    nodes = config["nodes"]
    gpus = config["tp"] * config["pp"] * config["dp"]
    per_node = -(-gpus // nodes)
    if nodes > 1:
        if cluster.executor != ExecutorKind.SLURM:
            raise invalid_input("cluster", f"the plan spans {nodes} nodes: it needs a Slurm cluster")
        spec["multinode"] = {"nnodes": nodes, "gpus_per_node": per_node}
    return spec, per_node


def _standard_tasks(cluster: Cluster, tasks: list[str], limit: int | None, concurrency: int) -> dict[str, Any]:
    """lm-eval tasks for the job: only where the cluster has an offline task directory (its YAMLs and
    data); the names are checked here as on the node (they reach lm-eval's command line)."""
    if not cluster.lm_eval_dir:
        raise invalid_input(
            "lm_eval_tasks", f"cluster {cluster.name} has no lm-eval task directory (lm_eval_dir) configured"
        )
    try:
        check_tasks(list(tasks))
    except ValueError as exc:
        raise invalid_input("lm_eval_tasks", str(exc).removeprefix("lm_eval.tasks: ")) from None
    if limit is not None and not 0 < limit <= 100_000:
        raise invalid_input("lm_eval_limit", "between 1 and 100000 documents per task")
    return {"tasks": list(tasks), "dir": cluster.lm_eval_dir, "limit": limit, "concurrency": min(concurrency, 8)}


@write_service
def eval_served_request(
    *,
    deployment: Any,
    cluster: Cluster,
    actor: User | None,
    engine: str | None = None,
    plan_result: dict[str, Any] | None = None,
    threshold: float = 0.05,
    max_cases_per_category: int | None = None,
    max_new_tokens: int = 64,
    concurrency: int = 4,
    seed: int = 0,
    health_timeout_s: int = 900,
    time_limit_s: int | None = None,
    eval_set: str | None = None,
    lm_eval_tasks: list[str] | None = None,
    lm_eval_limit: int | None = None,
) -> EvalRun:
    """Evaluate what ships: the request's artifact (the candidate) against the artifact it derives from
    (the baseline), both served through the engine the plan names with the plan's serving config."""
    candidate: ModelArtifact = deployment.artifact
    if not 0 < threshold < 1:
        raise invalid_input("threshold", "must be between 0 and 1")
    scheme = deployment.serving_plan["precision"]
    # The local executor serves on this host's CPU: `transformers serve`, whatever the plan's GPU engine.
    engine = engine or (
        "transformers"
        if cluster.executor == ExecutorKind.LOCAL
        else deployment.serving_plan.get("engine", DEFAULT_ENGINE)
    )
    if engine not in ENGINES:
        raise invalid_input("engine", f"one of {', '.join(ENGINES)}")
    config = serving_config(deployment, plan_result)
    engine_spec, gpus_per_node = _engine_spec(engine, cluster, plan_result, config, health_timeout_s)
    baseline = candidate.parent
    check = artifact_parent_check(candidate, artifact_latest_inspection(candidate)) if baseline else None
    if baseline is not None and check is not None and check["status"] == "mismatch":
        # It would count for nothing (readiness: artifact.parent_mismatch): refused before a GPU is spent.
        raise invalid_input(
            "candidate",
            f"its parent {baseline.name} is not the checkpoint it was made from: " + "; ".join(check["differences"]),
        )
    online = split_online_quantization(engine, engine_spec["argv"]) if baseline is None else (engine_spec["argv"], [])
    if baseline is None and online[1]:
        # The plan quantizes the base weights at load (e.g. vLLM --quantization fp8 on BF16): what
        # ships is this artifact with the flag; the baseline is the same artifact without it.
        baseline = candidate
        engine_spec["argv"], engine_spec["candidate_argv"] = online
        config["online_quantization"] = online[1][1]
    if baseline is None:
        raise invalid_input(
            "candidate",
            f"{candidate.name} derives from no artifact and the plan's {engine} command quantizes nothing at "
            "load: there is no baseline to compare",
        )
    generation = {"temperature": 0.0, "seed": seed, "max_new_tokens": max_new_tokens}
    spec: dict[str, Any] = {
        "scheme": scheme,
        "artifacts": {
            "baseline": _location(baseline, cluster, "baseline"),
            "candidate": _location(candidate, cluster, "candidate"),
        },
        "engine": engine_spec,
        "serving": config,
        "generation": generation,
        "threshold": threshold,
        "max_cases_per_category": max_cases_per_category,
        "concurrency": concurrency,
        # answers survive a requeue: the run's directory, above each attempt's
        "cache_dir": "../cache",
        # one cache per team: whether a baseline's answers are cached must not tell one team that
        # another evaluated the same weights (digests are unique per team, not across teams)
        "baseline_cache_dir": f"{cluster.remote_root}/baseline-answers/{deployment.team.code.hex}",
        "model_roots": list(cluster.model_roots or []),  # the node resolves both paths inside them
    }
    if lm_eval_tasks:
        spec["lm_eval"] = _standard_tasks(cluster, lm_eval_tasks, lm_eval_limit, concurrency)
    files: dict[str, str] = {}
    if eval_set is not None:
        validate_eval_set(eval_set)
        files["eval_set.jsonl"] = eval_set
        spec["eval_set"] = "eval_set.jsonl"
    with transaction.atomic():
        evaluation = EvalRun.objects.create(
            request=deployment,
            cluster=cluster,
            scheme=scheme,
            kind=EvalKind.SERVED,
            candidate=candidate,
            candidate_digest=candidate.weights_digest,
            baseline=baseline,
            baseline_digest=baseline.weights_digest,
            engine=engine,
            serving=config,
            generation=generation,
            threshold=threshold,
            requested_by=actor,
        )
        job = jobrun_create(
            cluster=cluster,
            kind=JobKind.EVAL,
            command=[cluster.python, *SERVED_ARGS],
            files={"spec.json": json.dumps(spec), **files},
            time_limit_s=time_limit_s,
            gpus=gpus_per_node,
            nodes=config["nodes"] if "multinode" in engine_spec else 1,
            subject=evaluation,
            actor=actor,
        )
        evaluation.job = job
        evaluation.save(update_fields=["job", "updated_at"])
    return evaluation


@write_service
def eval_screening_request(
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
        model = {**model, "path": resolve_model_path(cluster, str(model["path"]), "model_path")}
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
    if "path" in model:  # the node resolves the path inside them before loading anything
        spec["model_roots"] = list(cluster.model_roots or [])
    files = dict(extra_files or {})
    if eval_set is not None:  # the user's own set travels with the job; the default ships with the payload
        validate_eval_set(eval_set)
        files["eval_set.jsonl"] = eval_set
        spec["eval_set"] = "eval_set.jsonl"
    with transaction.atomic():
        # Simulated quantization in one process: a what-if, shown as screening, never evidence for approval.
        evaluation = EvalRun.objects.create(
            request=deployment,
            cluster=cluster,
            scheme=scheme,
            kind=EvalKind.SCREENING,
            generation={"max_new_tokens": max_new_tokens, "greedy": True},
            threshold=threshold,
            requested_by=actor,
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
        accuracy = {k: block[k] for k in ("baseline_accuracy", "quantized_accuracy") if block.get(k) is not None}
        if len(accuracy) == 2:  # against the cases' references: what the reviewer weighs beside the bound
            accuracy["accuracy_difference"] = accuracy["quantized_accuracy"] - accuracy["baseline_accuracy"]
        return (
            accuracy
            | {
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
            }
            | {"failing_cases": block.get("failing_cases", [])[:50]}
        )

    served = {
        key: result.get(key)
        for key in (
            "mode",
            "candidate",
            "baseline",
            "engine",
            "serving",
            "generation",
            "token_metrics",
            "client",
            "standard_tasks",
            "candidate_answers",  # the canary's live regression compares its answers with these
        )
        if key in result
    }
    return {
        **served,
        "pass": bool(result.get("pass")),
        "overall": row(result.get("overall", {})),
        # the candidate's accuracy against the cases' references, where they have one: an engine
        # upgrade's fresh eval is compared with the last approved run's (deployments.readiness.regression)
        "categories": {name: row(block) for name, block in result.get("categories", {}).items()},
        "quantization": result.get("quantization"),
        "versions": result.get("versions"),
        "timing": result.get("timing"),
    }


def _result_problem(evaluation: EvalRun, result: dict[str, Any]) -> str:
    """A served result must be about the weights this run names (the job verified them on the node)."""
    if evaluation.kind != EvalKind.SERVED:
        return ""
    for role, digest in (("candidate", evaluation.candidate_digest), ("baseline", evaluation.baseline_digest)):
        reported = (result.get(role) or {}).get("digest")
        if reported != digest:
            return f"the job reports {role} {reported}, not {digest}"
    return ""


def on_job_finished(sender: Any = None, *, run: JobRun, **kwargs: Any) -> None:
    """Receiver of signals.job_finished: turn the finished eval job into the eval run's verdict."""
    evaluation = EvalRun.objects.filter(job=run).select_related("request").first()
    if evaluation is None or evaluation.status != EvalStatus.RUNNING:
        return
    with transaction.atomic():
        if run.state == JobRunState.CANCELLED:
            evaluation.status = EvalStatus.CANCELLED
            evaluation.summary = {"pass": False, "error": run.reason, "log_tail": run.log_tail[-2000:]}
        elif run.state == JobRunState.SUCCEEDED and run.result and _result_problem(evaluation, run.result):
            evaluation.status = EvalStatus.ERROR
            evaluation.summary = {"pass": False, "error": _result_problem(evaluation, run.result)}
        elif run.state == JobRunState.SUCCEEDED and run.result:
            evaluation.summary = summarise(run.result)
            evaluation.eval_set_sha256 = str(run.result.get("eval_set_sha256", ""))
            evaluation.engine_version = str((run.result.get("engine") or {}).get("version", ""))[:40]
            evaluation.status = EvalStatus.PASSED if evaluation.summary["pass"] else EvalStatus.FAILED
        else:
            evaluation.status = EvalStatus.ERROR
            evaluation.summary = {"pass": False, "error": run.reason, "log_tail": run.log_tail[-2000:]}
        evaluation.save(update_fields=["summary", "eval_set_sha256", "engine_version", "status", "updated_at"])
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


def evals_reconcile(*, grace: timedelta = timedelta(seconds=60)) -> list[int]:
    """Eval runs still `running` whose job ended over `grace` ago: their verdict, written on the job's
    commit (on_job_finished), was missed (a worker killed between the two, a receiver that failed),
    and is written now (beat's jobs.resume). Without it readiness said `eval.pending` and the request
    page polled (EvalRun.in_flight) for good. Returns the eval runs' ids."""
    stale = (
        EvalRun.objects.filter(
            status=EvalStatus.RUNNING, job__isnull=False, job__finished_at__lte=timezone.now() - grace
        )
        .exclude(job__state__in=ACTIVE_STATES)
        .select_related("job")
    )
    done = []
    for evaluation in stale:
        if evaluation.job is not None:  # filtered above; for the type checker
            on_job_finished(run=evaluation.job)
            done.append(evaluation.pk)
    return done


def _evidence_key(run: EvalRun) -> tuple[Any, ...]:
    """One entry per what-was-evaluated: a later run of the same weights, engine, version and layout
    supersedes an earlier one; a run of another layout or engine version stands beside it."""
    layout = tuple(int((run.serving or {}).get(name) or 1) for name in ("tp", "pp", "ep", "dp"))
    return (run.kind, run.scheme, run.candidate_digest, run.engine, run.engine_version, layout)


def eval_evidence_item(run: EvalRun) -> dict[str, Any]:
    item: dict[str, Any] = {
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
    standard = (run.summary or {}).get("standard_tasks")
    if standard:  # only where asked for: evidence of runs without them (and so their digests) is unchanged
        item["standard_tasks"] = standard
    return item


def candidate_accuracy(run: EvalRun) -> dict[str, float]:
    """Per category, the candidate's accuracy: against the cases' references where they have one,
    else the share of cases in which it kept every key item the baseline kept (1 - fail rate)."""
    accuracy = {}
    for name, block in ((run.summary or {}).get("categories") or {}).items():
        if block.get("quantized_accuracy") is not None:
            accuracy[name] = float(block["quantized_accuracy"])
        elif block.get("fail_rate") is not None:
            accuracy[name] = 1.0 - float(block["fail_rate"])
    return accuracy


def eval_evidence(deployment: Any) -> list[dict[str, Any]]:
    """The latest eval run per evaluated configuration of a deployment request, for its evidence."""
    latest: dict[tuple[Any, ...], EvalRun] = {}
    # Only verdicts are evidence: a cancelled run has none, and a running one has none yet (the
    # evidence, and so the sign-offs, would otherwise depend on when it was last rebuilt); the run
    # before or after it stands. The request page shows runs in progress beside the evidence.
    without_verdict = (EvalStatus.CANCELLED, EvalStatus.RUNNING)
    prefetched = getattr(deployment, "_prefetched_objects_cache", {}).get("eval_runs")  # the deployment list's
    runs = (
        sorted((e for e in prefetched if e.status not in without_verdict), key=lambda e: e.created_at)
        if prefetched is not None
        else EvalRun.objects.filter(request=deployment).exclude(status__in=without_verdict).order_by("created_at")
    )
    for evaluation in runs:
        latest[_evidence_key(evaluation)] = evaluation
    # An eval belongs to the weights and the serving envelope it served, not to one request: a passed
    # served eval of exactly this artifact run for another request of the same team counts here too
    # (named as reused); the request's own runs of the same configuration take precedence.
    reused = (
        EvalRun.objects.filter(
            kind=EvalKind.SERVED,
            status=EvalStatus.PASSED,
            candidate_digest=deployment.artifact.weights_digest,
            request__team_id=deployment.team_id,
        )
        .exclude(request=deployment)
        .select_related("request")
        .order_by("created_at")
    )
    borrowed: set[int] = set()
    for evaluation in reused:
        key = _evidence_key(evaluation)
        if key not in latest or latest[key].pk in borrowed:
            latest[key] = evaluation
            borrowed.add(evaluation.pk)
    ordered = sorted(latest.values(), key=lambda e: (e.kind != EvalKind.SERVED, e.scheme, e.created_at))
    items = []
    for evaluation in ordered:
        item = eval_evidence_item(evaluation)
        if evaluation.pk in borrowed and evaluation.request is not None:
            item["reused_from"] = str(evaluation.request.code)
        items.append(item)
    return items


def eval_running(deployment: Any) -> list[dict[str, Any]]:
    """The request's eval runs still in progress, each as its evidence item reads: beside the
    evidence, never in it (eval_evidence says why); the readiness rule says `eval.pending` for them."""
    prefetched = getattr(deployment, "_prefetched_objects_cache", {}).get("eval_runs")  # the request page's
    runs = (
        [e for e in prefetched if e.status == EvalStatus.RUNNING]
        if prefetched is not None
        else EvalRun.objects.filter(request=deployment, status=EvalStatus.RUNNING).order_by("created_at")
    )
    return [eval_evidence_item(run) for run in runs]


def eval_screening_of_deployment(
    *, deployment: Any, cluster: Cluster, scheme: str, actor: User | None, **options: Any
) -> EvalRun:
    """Screening of a request's model: quantization simulated on the baseline's registered files (the
    artifact it derives from, else itself) at their location on the cluster. A what-if; never evidence."""
    artifact: ModelArtifact = deployment.artifact
    baseline = artifact.parent or artifact
    location = _location(baseline, cluster, "baseline")
    return eval_screening_request(
        cluster=cluster,
        scheme=scheme,
        model={"path": location["path"], "dtype": "bfloat16"},
        actor=actor,
        deployment=deployment,
        **options,
    )


# The in-process path's earlier name (callers and tests that mean screening).
eval_run_request = eval_screening_request
