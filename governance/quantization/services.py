"""Quantize runs: request one (the job ships the recipe as data to the cluster), and on the job's end
register the derivative with its lineage and the parent license's derivative terms, once."""

from __future__ import annotations

import json
import logging
import posixpath
import re
import subprocess
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.db import transaction

from governance.artifacts.models import Derivation, ModelArtifact
from governance.artifacts.selectors import artifact_of_team_with_digest
from governance.artifacts.services import artifact_register
from governance.artifacts.signing import artifact_sign_quietly
from governance.audit.actions import AuditAction
from governance.audit.services import audit_record
from governance.core.errors import PermissionDeniedError, invalid_input
from governance.core.roles import Role, has_role
from governance.core.services import write_service
from governance.evaluations.evals import resolve_model_path
from governance.evaluations.models import ArtifactLocation, Cluster, ExecutorKind, JobKind, JobRun, JobRunState
from governance.evaluations.services import jobrun_create
from governance.licenses.selectors import license_evaluate
from governance.quantization.models import QuantizeRun, QuantizeStatus
from planner.manifest import digest_of_manifest
from planner.quantjob import recipes

logger = logging.getLogger(__name__)
SYSTEM = "system:quantize"
QUANTIZE_ARGS = ["-m", "planner.quantjob", "run", "--spec", "spec.json", "--out", "."]  # after the cluster's python
SUBJECT = "quantization.quantizerun"
DERIVATIVE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$")
DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")
DISTRIBUTIONS = ("internal", "public")
# The payload's own imports that a plain python lacks, by module: the package that installs each.
QUANTIZE_PACKAGES = {"llmcompressor": "llm-compressor", "compressed_tensors": "compressed-tensors"}
MISSING_MODULE = re.compile(r"^ModuleNotFoundError: No module named '([\w.]+)'", re.M)
# Finds the package without importing it (which would load torch: seconds); answers by exit status.
_PROBE = "import importlib.util, sys; sys.exit(importlib.util.find_spec('llmcompressor') is None)"
_PROBE_TIMEOUT_S = 30
_interpreters_with_llmcompressor: set[str] = set()


@write_service
def quantize_run_request(
    *,
    parent: ModelArtifact,
    cluster: Cluster,
    recipe_name: str,
    derivative_name: str,
    actor: User,
    model_path: str,
    calibration_path: str | None = None,
    distribution: str = "public",
    time_limit_s: int | None = None,
) -> QuantizeRun:
    """Queue a quantize job. The parent's checkpoint (`model_path`, inside a model root) is verified
    against the parent's registered digest on the node before anything is quantized."""
    if not has_role(actor, Role.REQUESTER) or not parent.team.members.filter(pk=actor.pk).exists():
        raise PermissionDeniedError("only a requester of the parent artifact's team quantizes it")
    try:
        recipe = recipes.recipe(recipe_name)
    except ValueError as exc:
        raise invalid_input("recipe", str(exc).split(": ", 1)[1]) from None
    if not DERIVATIVE_NAME.fullmatch(derivative_name):
        raise invalid_input("name", "1-100 letters, digits, '_', '.', '-', starting with a letter or digit")
    if distribution not in DISTRIBUTIONS:
        raise invalid_input("distribution", f"one of {', '.join(DISTRIBUTIONS)}")
    source = resolve_model_path(cluster, model_path, "model_path")
    if cluster.executor == ExecutorKind.LOCAL and (problem := local_quantize_python_problem(quantize_python(cluster))):
        raise invalid_input("cluster", problem)
    roots = [posixpath.normpath(root) for root in cluster.model_roots]
    calibration = None
    if calibration_path:
        try:
            calibration = resolve_model_path(cluster, calibration_path)
        except Exception as exc:
            raise invalid_input("calibration_path", "must lie inside one of the cluster's model roots") from exc
    run = QuantizeRun(
        parent=parent,
        cluster=cluster,
        recipe_name=recipe_name,
        recipe=recipe,
        scheme=recipe["scheme"],
        derivative_name=derivative_name,
        calibration_path=calibration or "",
        requested_by=actor,
    )
    # A fresh directory per run under the first model root: an eval can read it in place, and two runs
    # with one name never write into each other's checkpoint.
    run.output_path = f"{roots[0]}/derivatives/{derivative_name}-{run.code.hex[:12]}"
    spec: dict[str, Any] = {
        "model_path": source,
        "parent_digest": parent.weights_digest,
        "recipe": recipe,
        "output_dir": run.output_path,
        "output_name": derivative_name,
        "calibration": {"path": calibration} if calibration else {},
        "distribution": distribution,
        # what the derivative's model card names: its base model and the license it inherits
        "base_model": parent.source_repo,
        "license": parent.license.key,
        "model_roots": list(cluster.model_roots),  # the node resolves every path inside them first
    }
    with transaction.atomic():
        run.save()
        run.job = jobrun_create(
            cluster=cluster,
            kind=JobKind.COMMAND,
            command=[quantize_python(cluster), *QUANTIZE_ARGS],
            files={"spec.json": json.dumps(spec)},
            time_limit_s=time_limit_s,
            subject=run,
            actor=actor,
        )
        run.save(update_fields=["job", "updated_at"])
    return run


def quantize_python(cluster: Cluster) -> str:
    """The payload's interpreter: on the `local` executor the configured quantize environment (the web
    tier's own venv cannot hold llm-compressor next to the eval extra's transformers); a real cluster's
    own python otherwise."""
    if cluster.executor == ExecutorKind.LOCAL and settings.QUANTIZE_PYTHON:
        return str(settings.QUANTIZE_PYTHON)
    return cluster.python


def local_quantize_python_problem(python: str) -> str | None:
    """Why the `local` cluster's quantize interpreter cannot run the job, or None: a job accepted
    there and then failing as `exit code 1 ()` told nobody that llm-compressor was missing. Checked
    on this host at submit (a real cluster's python is on its nodes: its job's failure names what is
    missing, see _failure). An interpreter that has it is remembered for this process; one that lacks
    it is asked again next time, so installing it needs no restart."""
    if python in _interpreters_with_llmcompressor:
        return None
    which = "QUANTIZE_PYTHON" if settings.QUANTIZE_PYTHON else "QUANTIZE_PYTHON is not set: the cluster's python"
    try:
        # The configured interpreter (settings or the cluster record), never anything from the request.
        probe = subprocess.run(  # noqa: S603
            [python, "-c", _PROBE], capture_output=True, timeout=_PROBE_TIMEOUT_S, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"the quantize interpreter ({which}) does not run ({type(exc).__name__}); {_INSTALL_HINT}"
    if probe.returncode == 0:
        _interpreters_with_llmcompressor.add(python)
        return None
    return f"the quantize interpreter ({which}) lacks the llm-compressor package; {_INSTALL_HINT}"


_INSTALL_HINT = (
    "install the quantize extra in an environment of its own (pip install -e '.[quantize]') and set "
    "QUANTIZE_PYTHON to its python (docs/quantization.md, Environment)"
)


def derivative_findings(parent: ModelArtifact, name: str, distribution: str) -> list[dict[str, Any]]:
    """The parent license's derivative terms applied to this derivative (naming, attribution,
    pass-through of use restrictions): the findings that apply to derivatives, with its real name."""
    facts = {"derivative": {"kind": "quantize", "distribution": distribution, "name": name}}
    findings: list[dict[str, Any]] = []
    for version in {v.license.key: v for v in parent.license_versions()}.values():
        _, evaluation = license_evaluate(version.license.key, facts)
        findings += [
            {**f.as_dict(), "license": version.license.key}
            for f in evaluation.findings
            if f.applies_to == "derivatives"
        ]
    return findings


def result_problem(run: QuantizeRun, result: dict[str, Any]) -> str | None:
    """What is wrong with a quantize job's result.json before anything is registered, or None."""
    digest = result.get("manifest_digest")
    if not isinstance(digest, str) or not DIGEST.fullmatch(digest):
        return "manifest_digest missing or malformed"
    if result.get("parent_digest") != run.parent.weights_digest:
        return f"parent_digest: the checkpoint quantized does not match the parent's {run.parent.weights_digest}"
    if result.get("checkpoint") != run.output_path:
        return f"checkpoint {result.get('checkpoint')!r} is not where the run asked for it"
    if result.get("recipe") != run.recipe:
        return "the recipe applied is not the recipe requested"
    if not isinstance(result.get("config"), dict):
        return "config.json missing"
    manifest = result.get("manifest")
    if manifest is not None:
        try:
            # the OpenSSF digest only: a derivative is registered in the current format
            matches = isinstance(manifest, str) and digest_of_manifest(manifest) == digest
        except ValueError:
            matches = False
        if not matches:
            return "manifest: the file list the node sent does not hash to manifest_digest"
    return None


@write_service
def quantize_run_complete(*, run_id: int) -> QuantizeRun:
    """Turn the finished job into a registered derivative, once: the run row is locked, and a run that
    is no longer `running` is left as it is, so a second delivery of the same event changes nothing.
    Registration and the run's new status commit together: never a half-registered artifact."""
    run = QuantizeRun.objects.select_for_update(of=("self",)).select_related("parent", "job").get(pk=run_id)
    if run.status != QuantizeStatus.RUNNING or run.job is None:
        return run
    job: JobRun = run.job
    if job.state == JobRunState.CANCELLED:
        run.status, run.reason = QuantizeStatus.CANCELLED, job.reason
    elif job.state != JobRunState.SUCCEEDED or not job.result:
        run.status = QuantizeStatus.FAILED
        run.reason = _failure(job)
    elif problem := result_problem(run, job.result):
        run.status, run.reason = QuantizeStatus.FAILED, f"result refused: {problem}"
    else:
        _register(run, job.result)
    run.save()
    if run.status != QuantizeStatus.REGISTERED:
        audit_record(
            actor=SYSTEM,
            action=AuditAction.ARTIFACT_UPDATED,
            obj=run.parent,
            data={"quantize_run": str(run.code), "status": run.status, "reason": run.reason[:500]},
        )
    return run


def _failure(job: JobRun) -> str:
    """The payload's own error line (e.g. a refused scheme) when there is one; the package the job's
    python lacks (a cluster whose python has no llm-compressor: the traceback's last line); else the
    job's reason (`exit code 1 ()` says nothing of either)."""
    for line in reversed(job.log_tail.splitlines()):
        if line.startswith("quantjob: error:"):
            return line.removeprefix("quantjob: error:").strip()
    if missing := MISSING_MODULE.findall(job.log_tail):
        module = missing[-1]
        package = QUANTIZE_PACKAGES.get(module.split(".")[0], module.split(".")[0])
        return (
            f"the cluster's python lacks the {package} package (ModuleNotFoundError: No module named "
            f"'{module}'): install the quantize extra there (pip install '.[quantize]') and name that "
            "interpreter as the cluster's python (on the `local` cluster: QUANTIZE_PYTHON)"
        )
    return job.reason or f"job {job.state}"


def _register(run: QuantizeRun, result: dict[str, Any]) -> None:
    parent = run.parent
    # The parent team's own artifacts only: another team holding the same bytes is neither a rerun
    # nor something this run may name.
    existing = artifact_of_team_with_digest(parent.team, result["manifest_digest"])
    if existing is not None:  # the same bytes registered before (a rerun of the same recipe): refuse, do not alias
        run.status = QuantizeStatus.FAILED
        run.reason = f"a checkpoint with digest {existing.weights_digest} is already registered as {existing.code}"
        return
    actor = run.requested_by
    if actor is None:
        run.status, run.reason = QuantizeStatus.FAILED, "the requester no longer exists"
        return
    derivative = artifact_register(
        actor=actor,
        team=parent.team,
        data={
            "name": run.derivative_name,
            "source_repo": f"{parent.source_repo} (quantized by llm-compressor)",
            "revision": result["manifest_digest"].removeprefix("sha256:")[:12],
            "weights_digest": result["manifest_digest"],
            "license": parent.license.key,
            "config": result["config"],
            "quantization_config": {"recipe": result["recipe"], "checkpoint": result.get("quantization_config")},
            "derivation": Derivation.QUANTIZE,
            "parent": parent,
        },
    )
    # Where the checkpoint lies on the cluster, so a served eval reads it in place (its files were
    # hashed on the node into the digest just registered; the eval job checks them again).
    # With the node's manifest (checked against the digest in result_problem) the served job's check on
    # the node names the file that changed after registration, not only that the digest differs.
    ArtifactLocation.objects.update_or_create(
        artifact=derivative,
        cluster=run.cluster,
        defaults={"path": run.output_path, "manifest": result.get("manifest") or "", "registered_by": actor},
    )
    if result.get("manifest"):  # the quantize job's own reading of what it made, checked in result_problem
        artifact_sign_quietly(artifact=derivative, manifest=result["manifest"], source="quantize")
    spec = json.loads((run.job.files if run.job else {}).get("spec.json", "{}"))
    findings = derivative_findings(parent, run.derivative_name, spec.get("distribution", "public"))
    run.derivative = derivative
    run.status = QuantizeStatus.REGISTERED
    run.manifest_digest = result["manifest_digest"]
    run.parent_digest = result["parent_digest"]
    run.calibration = result.get("calibration")
    run.tool_versions = result.get("versions")
    run.license_findings = findings
    run.flagged = any(f["code"] == "naming.prefix" and f["severity"] == "blocker" for f in findings)
    audit_record(
        actor=SYSTEM,
        action=AuditAction.ARTIFACT_UPDATED,
        obj=derivative,
        data={
            "quantize_run": str(run.code),
            "parent_digest": run.parent_digest,
            "recipe": run.recipe_name,
            "calibration_sha256": (run.calibration or {}).get("sha256"),
            "tool_versions": run.tool_versions,
            "location": {"cluster": run.cluster.name, "path": run.output_path},
            "flagged": run.flagged,
        },
    )


def on_job_finished(sender: Any = None, *, run: JobRun, **kwargs: Any) -> None:
    """Receiver of evaluations.signals.job_finished: only this app's jobs."""
    if run.subject_type != SUBJECT:
        return
    found = QuantizeRun.objects.filter(job=run).values_list("pk", flat=True).first()
    if found is not None:
        quantize_run_complete(run_id=found)
