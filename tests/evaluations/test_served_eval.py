"""Acceptance on the embedded default: a tiny baseline and a quantized derivative are registered with
their real digests and located on the local cluster; the served eval runs `transformers serve` (it
starts, answers, stops); the request becomes approvable; the gate allows that digest and denies
another, naming both. The same through the sshd + Slurm test cluster."""

from __future__ import annotations

import shutil
import sys
import tempfile
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.utils import timezone

from governance.artifacts.manifest import manifest_lines, weights_digest
from governance.artifacts.services import artifact_register
from governance.deployments.models import DeploymentRequest
from governance.evaluations.models import Cluster, EvalRun, ExecutorKind, JobRun
from governance.gate.choices import ReasonCode
from governance.gate.services import ci_token_issue
from tests.conftest import ROOT, Personas
from tests.deployments.conftest import Flow, artifacts, catalog, flow  # noqa: F401  (shared fixtures)
from tests.evaluations.conftest import drive, testcluster  # noqa: F401  (shared fixture)
from tests.gate.conftest import bearer, compute_capacity
from tests.quant.conftest import no_engine_left  # noqa: F401  (shared fixture)

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


def _served_flow(  # type: ignore[no-untyped-def]
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
    assert evaluation.summary["overall"]["top1_agreement"] is None  # transformers serve gives no logprobs
    deployment = DeploymentRequest.objects.get(code=code)
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

    assert flow.approve(code)["status"] == "approved"
    personas.team.leads.add(personas.requester)
    _, token = ci_token_issue(
        actor=personas.requester, team=personas.team, name="deploy", expires_at=timezone.now() + timedelta(days=1)
    )
    layout = DeploymentRequest.objects.get(code=code).evidence["capacity_plan"]["result"]["parallel"]
    check = {
        "deployment": code,
        "environment": "production",
        "artifact_digest": derivative.weights_digest,
        "serving": {**{k: SERVING[k] for k in ("engine", "precision", "gpu", "max_model_len")},
                    **{k: layout[k] for k in ("tp", "pp", "ep")}},
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
def test_served_eval_makes_the_request_approvable_and_binds_the_gate_to_the_digest(  # type: ignore[no-untyped-def]
    flow: Flow,  # noqa: F811 - the shared fixture
    personas: Personas,
    tiny_pair,
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
    )
    # the local executor hashes the files itself when no manifest is given
    _served_flow(flow, personas, cluster, *tiny_pair, django_capture_on_commit_callbacks,
                 cases_per_category=5, with_manifest=False)  # fmt: skip


@pytest.mark.cluster
def test_served_eval_through_the_ssh_slurm_cluster_makes_the_request_approvable(  # type: ignore[no-untyped-def]
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
