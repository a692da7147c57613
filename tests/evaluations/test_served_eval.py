"""Acceptance on the embedded default: a tiny baseline and a quantized derivative are registered with
their real digests and located on the local cluster; the served eval runs `transformers serve` (it
starts, answers, stops); the request becomes approvable; the gate allows that digest and denies
another, naming both. The same through the sshd + Slurm test cluster."""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from governance.artifacts.manifest import manifest_lines, weights_digest
from governance.artifacts.services import artifact_register
from governance.core.errors import ApplicationError
from governance.deployments.models import DeploymentRequest
from governance.evaluations.models import ArtifactLocation, Cluster, EvalRun, ExecutorKind, JobRun
from governance.gate.choices import ReasonCode
from governance.gate.services import ci_token_issue
from tests.conftest import ROOT, Personas
from tests.deployments.conftest import Flow, artifacts, catalog, flow  # noqa: F401  (shared fixtures)
from tests.evaluations.conftest import drive, testcluster  # noqa: F401  (shared fixture)
from tests.gate.conftest import bearer, compute_capacity
from tests.quant.conftest import no_engine_left  # noqa: F401  (shared fixture)

TASKS = ROOT / "tests" / "data" / "lm_eval_tasks"  # lm-eval's tiny offline task
SERVING = {"engine": "transformers", "precision": "w4a8", "gpu": "h200", "max_model_len": 4096, "concurrency": 4}


@pytest.fixture
def tiny_pair(tmp_path: Path) -> tuple[Path, Path]:
    from planner.evaljob.tiny import save_tiny_checkpoint

    base = save_tiny_checkpoint(tmp_path / "models" / "tiny-base")
    candidate = tmp_path / "models" / "tiny-w4a8"
    shutil.copytree(base, candidate)
    # Another artifact with the same tensors: answers equal the baseline's, so the eval passes.
    (candidate / "NOTICE").write_text("w4a8 derivative of tiny-base (test stand-in)\n")
    return base, candidate


def _register(personas: Personas, base: Path, candidate: Path) -> tuple[Any, Any]:
    common = {"revision": "abc123", "license": "apache-2.0", "architecture_key": "qwen3-30b-a3b"}
    baseline = artifact_register(
        actor=personas.requester,
        team=personas.team,
        data={"name": "tiny-base", "source_repo": "org/tiny-base", "weights_digest": weights_digest(base), **common},
    )
    derivative = artifact_register(
        actor=personas.requester,
        team=personas.team,
        data={
            "name": "tiny-w4a8",
            "source_repo": "org/tiny-w4a8",
            "weights_digest": weights_digest(candidate),
            "derivation": "quantize",
            "parent": baseline,
            **common,
        },
    )
    return baseline, derivative


def _served_flow(
    flow: Flow,  # noqa: F811 - the shared fixture
    personas: Personas,
    cluster: Cluster,
    base: Path,
    candidate: Path,
    capture,
    *,
    cases_per_category: int,
    with_manifest: bool,
) -> None:
    """Register the pair, locate it on `cluster`, run the served eval through the service's own
    submit/poll steps, approve, and ask the gate for that digest and another."""
    baseline, derivative = _register(personas, base, candidate)
    engineer = flow.client(personas.engineer)
    locations = f"/api/v1/clusters/{cluster.code}/locations"

    def located(artifact: Any, path: Path) -> dict[str, Any]:
        # a remote cluster's files cannot be hashed from here: the operator gives their manifest
        return {"artifact": str(artifact.code), "path": str(path)} | (
            {"manifest": "".join(manifest_lines(path))} if with_manifest else {}
        )

    # the baseline's files recorded for the derivative: the digest does not match, refused naming the field
    wrong = engineer.post(locations, located(derivative, base), format="json")
    assert wrong.status_code == 400
    assert "manifest" in wrong.json()["extra"]["fields"]
    assert flow.client(personas.auditor).post(locations, located(baseline, base)).status_code == 403
    for artifact, path in ((baseline, base), (derivative, candidate)):
        response = engineer.post(locations, located(artifact, path), format="json")
        assert response.status_code == 201, response.json()
        assert response.json()["manifest_files"] >= 4

    code = flow.create(derivative, serving_plan=SERVING)["code"]
    assert flow.post(personas.requester, code, "submit").status_code == 200
    assert flow.post(personas.legal, code, "start-review").status_code == 200
    compute_capacity(flow, code)
    assert "eval.missing" in [b["code"] for b in flow.get(personas.engineer, code)["blockers"]]

    body = {"cluster": cluster.name, "threshold": 0.5, "max_cases_per_category": cases_per_category}
    if cluster.lm_eval_dir:  # lm-eval's tiny task through the same engines
        body |= {"lm_eval_tasks": ["tiny_copy"], "lm_eval_limit": 3}
    response = engineer.post(f"/api/v1/deployments/{code}/evals", body | {"max_new_tokens": 4}, format="json")
    assert response.status_code == 202, response.json()
    assert response.json()["kind"] == "served"
    assert response.json()["candidate_digest"] == derivative.weights_digest
    assert response.json()["baseline_digest"] == baseline.weights_digest
    run = JobRun.objects.get(code=response.json()["job"]["code"])
    with capture(execute=True):
        run = drive(run, timeout_s=600)
    assert run.state == "succeeded", run.reason + run.log_tail
    # transformers serve started (healthy), answered and was stopped, for each artifact
    assert "baseline: healthy after" in run.log_tail or "healthy after" in run.log_tail
    evaluation = EvalRun.objects.get(code=response.json()["code"])
    assert evaluation.status == "passed", evaluation.summary
    import transformers

    assert evaluation.engine == "transformers"
    assert evaluation.engine_version == transformers.__version__
    assert evaluation.summary is not None
    assert evaluation.summary["overall"]["top1_agreement"] is None  # transformers serve gives no logprobs
    deployment = DeploymentRequest.objects.get(code=code)
    assert deployment.evidence is not None
    [item] = deployment.evidence["eval_results"]
    assert (item["kind"], item["candidate_digest"], item["engine"]) == (
        "served",
        derivative.weights_digest,
        "transformers",
    )
    assert not [b for b in flow.get(personas.engineer, code)["blockers"] if b["code"].startswith("eval.")]
    detail = flow.client(personas.auditor).get(f"/api/v1/evals/{evaluation.code}").json()
    assert detail["kind"] == "served"
    assert detail["summary"]["candidate"]["digest"] == derivative.weights_digest
    if cluster.lm_eval_dir:  # per task both scores with standard errors: API, evidence, page
        exact = detail["summary"]["standard_tasks"]["tasks"]["tiny_copy"]["metrics"]["exact_match"]
        assert {"baseline", "baseline_stderr", "candidate", "candidate_stderr", "delta", "delta_stderr"} <= set(exact)
        assert item["standard_tasks"]["tasks"]["tiny_copy"]["n"] == 3
        browser = Client()
        browser.force_login(personas.engineer)
        page = browser.get(f"/requests/{code}/evals")
        assert 'data-task="tiny_copy"' in page.content.decode()

    assert flow.approve(code)["status"] == "approved"
    personas.team.leads.add(personas.requester)
    _, token = ci_token_issue(
        actor=personas.requester, team=personas.team, name="deploy", expires_at=timezone.now() + timedelta(days=1)
    )
    layout = (DeploymentRequest.objects.get(code=code).evidence or {})["capacity_plan"]["result"]["parallel"]
    check = {
        "deployment": code,
        "environment": "production",
        "artifact_digest": derivative.weights_digest,
        "serving": {**{k: SERVING[k] for k in ("engine", "precision", "gpu", "max_model_len")},
                    **{k: layout[k] for k in ("tp", "pp", "ep")},
                    "engine_version": evaluation.engine_version},  # the version the approval is bound to
    }  # fmt: skip
    allowed = bearer(token).post("/api/v1/gate/check", check, format="json").json()
    assert allowed["decision"] == "allow", allowed["reasons"]
    other = "sha256:" + "0" * 64
    denied = bearer(token).post("/api/v1/gate/check", {**check, "artifact_digest": other}, format="json").json()
    assert denied["decision"] == "deny"
    [eval_reason] = [r for r in denied["reasons"] if r["code"] == ReasonCode.ARTIFACT_DIGEST_MISMATCH]
    assert derivative.weights_digest in eval_reason["message"]
    assert other in eval_reason["message"]


@pytest.mark.slow
@pytest.mark.usefixtures("no_engine_left")
def test_served_eval_makes_the_request_approvable_and_binds_the_gate_to_the_digest(
    flow: Flow,  # noqa: F811 - the shared fixture
    personas: Personas,
    tiny_pair: tuple[Path, Path],
    tmp_path: Path,
    settings,
    django_capture_on_commit_callbacks,
) -> None:
    settings.JOB_POLL_INITIAL_S = 0.5
    settings.JOB_POLL_MAX_S = 1.0
    cluster = Cluster.objects.create(
        name="local",
        executor=ExecutorKind.LOCAL,
        remote_root=str(tmp_path / "runs"),
        model_roots=[str(tmp_path / "models")],
        default_time_limit_s=900,
        setup_lines=f"export PATH={Path(sys.executable).parent}:$PATH PYTHONPATH={ROOT} OMP_NUM_THREADS=1",
        lm_eval_dir=str(TASKS),
    )
    # the local executor hashes the files itself when no manifest is given
    _served_flow(flow, personas, cluster, *tiny_pair, django_capture_on_commit_callbacks,
                 cases_per_category=5, with_manifest=False)  # fmt: skip


@pytest.mark.cluster
def test_served_eval_through_the_ssh_slurm_cluster_makes_the_request_approvable(
    flow: Flow,  # noqa: F811 - the shared fixture
    personas: Personas,
    testcluster: dict[str, Any],  # noqa: F811 - the shared fixture
    settings,
    django_capture_on_commit_callbacks,
) -> None:
    """The same acceptance through sshd + Slurm: the service submits the served job with sbatch over
    SSH, the node verifies both artifacts against the manifests the operator registered, runs
    `transformers serve` for each, and the result comes back over SFTP. Five cases per category, the
    fewest whose 95% bound with no failure (0.45) is below the 0.5 threshold in every category;
    asking them costs seconds next to the two engine starts."""
    import sysconfig

    from planner.evaljob.tiny import save_tiny_checkpoint

    settings.JOB_POLL_INITIAL_S = 0.5
    settings.JOB_POLL_MAX_S = 1.0
    # the cluster's account reads the models and this checkout: a world-readable place, not tmp_path
    shared = Path(tempfile.mkdtemp(prefix="gov-served-flow-", dir="/var/tmp"))
    shared.chmod(0o755)
    try:
        models = shared / "models"
        base = save_tiny_checkpoint(models / "tiny-base")
        candidate = models / "tiny-w4a8"
        shutil.copytree(base, candidate)
        (candidate / "NOTICE").write_text("w4a8 derivative of tiny-base (test stand-in)\n")
        for path in [shared, *shared.rglob("*")]:
            path.chmod(0o755 if path.is_dir() else 0o644)
        cluster = Cluster.objects.create(
            name="testcluster",
            host=testcluster["host"],
            port=testcluster["port"],
            user=testcluster["user"],
            host_keys=testcluster["known_hosts_text"],
            key_path=testcluster["key_path"],
            remote_root=testcluster["remote_root"],
            partition=testcluster["partition"],
            model_roots=[str(models)],
            default_time_limit_s=600,
            # the node's own interpreter with this checkout and the eval extra's packages importable
            python="/usr/bin/python3",
            setup_lines=f"export PYTHONPATH={ROOT}:{sysconfig.get_paths()['purelib']} OMP_NUM_THREADS=1",
        )
        _served_flow(flow, personas, cluster, base, candidate, django_capture_on_commit_callbacks,
                     cases_per_category=5, with_manifest=True)  # fmt: skip
    finally:
        shutil.rmtree(shared, ignore_errors=True)


def test_standard_tasks_need_the_cluster_s_task_directory_and_plain_task_names(
    flow: Flow,  # noqa: F811 - the shared fixture
    personas: Personas,
    tmp_path: Path,
) -> None:
    """lm-eval tasks run only where the cluster has an offline task directory; a name that is not a
    task name (it reaches lm-eval's command line on the node) is refused naming the field."""
    base, candidate = tmp_path / "models" / "base", tmp_path / "models" / "w4a8"
    for path, byte in ((base, b"\x01"), (candidate, b"\x02")):
        path.mkdir(parents=True)
        (path / "model.safetensors").write_bytes(byte * 64)
    baseline, derivative = _register(personas, base, candidate)
    cluster = Cluster.objects.create(
        name="local", executor=ExecutorKind.LOCAL, remote_root=str(tmp_path / "runs"), model_roots=[str(tmp_path)]
    )
    for artifact, path in ((baseline, base), (derivative, candidate)):
        ArtifactLocation.objects.create(artifact=artifact, cluster=cluster, path=str(path))
    code = flow.create(derivative, serving_plan=SERVING)["code"]
    assert flow.post(personas.requester, code, "submit").status_code == 200
    engineer = flow.client(personas.engineer)
    url = f"/api/v1/deployments/{code}/evals"
    body = {"cluster": "local", "lm_eval_tasks": ["tiny_copy"]}
    refused = engineer.post(url, body, format="json")
    assert refused.status_code == 400
    assert "lm_eval_tasks" in refused.json()["extra"]["fields"]
    assert "lm_eval_dir" in str(refused.json())
    cluster.lm_eval_dir = str(TASKS)
    cluster.save()
    for bad in (["tiny;rm -rf /"], ["--include_path=/etc"], ["x" * 101]):
        response = engineer.post(url, {**body, "lm_eval_tasks": bad}, format="json")
        assert response.status_code == 400, bad
        assert [field for field in response.json()["extra"]["fields"] if field.startswith("lm_eval_tasks")]
    assert engineer.post(url, {**body, "lm_eval_limit": 0}, format="json").status_code == 400
    accepted = engineer.post(url, {**body, "lm_eval_limit": 3}, format="json")
    assert accepted.status_code == 202, accepted.json()
    spec = json.loads(JobRun.objects.get(code=accepted.json()["job"]["code"]).files["spec.json"])
    assert spec["lm_eval"] == {"tasks": ["tiny_copy"], "dir": str(TASKS), "limit": 3, "concurrency": 4}


def test_an_online_quantized_plan_evaluates_the_base_artifact_with_and_without_the_flag(
    flow: Flow,  # noqa: F811 - the shared fixture
    personas: Personas,
    tmp_path: Path,
) -> None:
    """FP8 quantized by the engine at load from BF16 weights: no derivative checkpoint exists. The
    served eval of the base artifact serves it twice, the candidate with the plan's
    `--quantization fp8`, the baseline without; without such a flag there is no baseline (400)."""
    from governance.evaluations.evals import eval_served_request

    path = tmp_path / "models" / "base"
    path.mkdir(parents=True)
    (path / "model.safetensors").write_bytes(b"\x01" * 64)
    common = {"revision": "abc123", "license": "apache-2.0", "architecture_key": "qwen3-30b-a3b"}
    base = artifact_register(
        actor=personas.requester,
        team=personas.team,
        data={"name": "tiny-base", "source_repo": "org/tiny-base", "weights_digest": weights_digest(path), **common},
    )
    cluster = Cluster.objects.create(
        name="local", executor=ExecutorKind.LOCAL, remote_root=str(tmp_path / "runs"), model_roots=[str(tmp_path)]
    )
    ArtifactLocation.objects.create(artifact=base, cluster=cluster, path=str(path))
    plan = {**SERVING, "engine": "vllm", "precision": "fp8"}
    deployment = DeploymentRequest.objects.get(code=flow.create(base, serving_plan=plan)["code"])
    command = "vllm serve /models/base --tensor-parallel-size 1 --max-model-len 4096 --quantization fp8"
    result = {"serving": {"vllm": command}, "parallel": {"tp": 1, "pp": 1, "ep": 1, "dp": 1, "nodes": 1}}
    evaluation = eval_served_request(
        deployment=deployment, cluster=cluster, actor=personas.engineer, engine="vllm", plan_result=result
    )
    assert evaluation.candidate_digest == evaluation.baseline_digest == base.weights_digest
    assert evaluation.serving["online_quantization"] == "fp8"
    assert evaluation.job is not None
    spec = json.loads(evaluation.job.files["spec.json"])
    assert "--quantization" not in spec["engine"]["argv"]
    assert spec["engine"]["candidate_argv"] == ["--quantization", "fp8"]
    assert spec["artifacts"]["baseline"]["path"] == spec["artifacts"]["candidate"]["path"] == str(path)
    plain = {**result, "serving": {"vllm": command.removesuffix(" --quantization fp8")}}
    with pytest.raises(ApplicationError) as refused:
        eval_served_request(
            deployment=deployment, cluster=cluster, actor=personas.engineer, engine="vllm", plan_result=plain
        )
    assert "candidate" in refused.value.extra["fields"]
