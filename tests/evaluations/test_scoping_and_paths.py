"""Eval runs, jobs and capacity plans are scoped like deployment requests; an eval's model path
stays inside the cluster's model roots; cluster paths refuse `..`; reviewers never see the audit
events of a draft they cannot open."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from django.core.exceptions import ValidationError

from governance.capacity.services import capacity_plan_request
from governance.core.errors import ApplicationError
from governance.deployments.models import DeploymentRequest
from governance.evaluations.evals import eval_run_request
from governance.evaluations.models import ArtifactLocation, Cluster, ExecutorKind, JobKind, JobRun
from tests.conftest import Personas
from tests.deployments import conftest as deployment_fixtures
from tests.deployments.conftest import Flow

# The deployment tests' fixtures, used here too.
catalog, artifacts, flow = deployment_fixtures.catalog, deployment_fixtures.artifacts, deployment_fixtures.flow


@pytest.fixture
def cluster(db: None, tmp_path: Path) -> Cluster:
    return Cluster.objects.create(
        name="lab",
        executor=ExecutorKind.LOCAL,
        remote_root=str(tmp_path / "runs"),
        model_roots=["/models", "/data/ckpt"],
    )


@pytest.fixture
def draft(flow: Flow, artifacts: dict[str, Any]) -> DeploymentRequest:
    return DeploymentRequest.objects.get(code=flow.create(artifacts["apache"])["code"])


def test_plans_evals_and_jobs_of_a_draft_are_not_found_for_other_teams_and_reviewers(
    personas: Personas, draft: DeploymentRequest, cluster: Cluster
) -> None:
    plan = capacity_plan_request(
        inputs={"model": "qwen3-30b-a3b", "precision": "fp8", "gpu": "h200"}, actor=personas.requester, subject=draft
    )
    evaluation = eval_run_request(
        cluster=cluster, scheme="w8a8", model={"path": "/models/m"}, actor=personas.admin, deployment=draft
    )
    assert evaluation.job is not None
    urls = [
        f"/api/v1/capacity/plans/{plan.code}",
        f"/api/v1/evals/{evaluation.code}",
        f"/api/v1/jobs/{evaluation.job.code}",
    ]
    for url in urls:
        for user in (personas.other_requester, personas.legal, personas.engineer):
            assert personas.client(user).get(url).status_code == 404, (url, user)
        for user in (personas.requester, personas.auditor):
            assert personas.client(user).get(url).status_code == 200, (url, user)
    cancel = personas.client(personas.engineer).post(f"/api/v1/jobs/{evaluation.job.code}/cancel")
    assert cancel.status_code == 404


def test_reviewers_do_not_see_audit_events_of_drafts(personas: Personas, draft: DeploymentRequest) -> None:
    params = {"object_type": "deployments.deploymentrequest", "object_id": str(draft.code)}
    assert personas.client(personas.legal).get(f"/api/v1/deployments/{draft.code}").status_code == 404
    assert personas.client(personas.legal).get("/api/v1/audit/events", params).json()["results"] == []
    assert personas.client(personas.auditor).get("/api/v1/audit/events", params).json()["results"] != []


@pytest.mark.parametrize(
    ("path", "reason"),
    [
        ("/../../etc/passwd", "'..'"),
        ("/models/../etc/passwd", "'..'"),
        ("/etc/passwd", "model roots"),
        ("/modelsX/evil", "model roots"),
        ("models/m", "pattern"),  # refused by the input serializer already
    ],
)
def test_an_artifact_location_must_resolve_inside_the_model_roots(
    personas: Personas, artifacts: dict[str, Any], cluster: Cluster, path: str, reason: str
) -> None:
    body = {"artifact": str(artifacts["apache"].code), "path": path}
    response = personas.client(personas.engineer).post(
        f"/api/v1/clusters/{cluster.code}/locations", body, format="json"
    )
    assert response.status_code == 400, response.json()
    assert "path" in response.json()["extra"]["fields"]
    assert reason in response.json()["message"]
    assert not ArtifactLocation.objects.exists()


def test_a_location_inside_a_root_is_normalised_and_the_eval_reads_it(
    personas: Personas, flow: Flow, artifacts: dict[str, Any], cluster: Cluster
) -> None:
    body = {"artifact": str(artifacts["apache"].code), "path": "/data/ckpt//qwen/./v1"}
    located = personas.client(personas.engineer).post(f"/api/v1/clusters/{cluster.code}/locations", body, format="json")
    assert located.status_code == 201, located.json()
    assert located.json()["path"] == "/data/ckpt/qwen/v1"
    # an outsider (a requester of another team) cannot place another team's artifact
    outsider = personas.client(personas.other_requester)
    assert outsider.post(f"/api/v1/clusters/{cluster.code}/locations", body, format="json").status_code == 404
    code = flow.to_review(artifacts["apache"])
    eval_body = {"cluster": "lab", "kind": "screening", "scheme": "w8a8"}
    response = personas.client(personas.engineer).post(f"/api/v1/deployments/{code}/evals", eval_body, format="json")
    assert response.status_code == 202, response.json()
    # registering the location queued the inspection of its files too (issue 42): read the eval's job
    job = JobRun.objects.get(kind=JobKind.EVAL)
    assert '"path": "/data/ckpt/qwen/v1"' in job.files["spec.json"]
    inspection = JobRun.objects.get(kind=JobKind.INSPECTION)
    assert "/data/ckpt/qwen/v1" in inspection.command


def test_cluster_without_model_roots_refuses_locations(
    personas: Personas, artifacts: dict[str, Any], tmp_path: Path
) -> None:
    bare = Cluster.objects.create(name="bare", executor=ExecutorKind.LOCAL, remote_root=str(tmp_path))
    body = {"artifact": str(artifacts["apache"].code), "path": "/models/m"}
    response = personas.client(personas.engineer).post(f"/api/v1/clusters/{bare.code}/locations", body, format="json")
    assert response.status_code == 400
    assert "no model roots" in response.json()["message"]


@pytest.mark.parametrize(
    "fields",
    [
        {"remote_root": "/srv/runs/../../root"},
        {"key_path": "/home/gov/../../root/.ssh/id_ed25519"},
        {"model_roots": ["/models/../"]},
        {"model_roots": ["relative"]},
    ],
)
def test_cluster_paths_refuse_parent_segments(db: None, fields: dict[str, Any]) -> None:
    cluster = Cluster(
        name="c",
        executor=ExecutorKind.SLURM,
        host="h",
        user="u",
        remote_root="/srv/runs",
        **{k: v for k, v in fields.items() if k != "remote_root"},
    )
    if "remote_root" in fields:
        cluster.remote_root = fields["remote_root"]
    with pytest.raises(ValidationError) as caught:
        cluster.full_clean()
    assert set(fields) <= set(caught.value.message_dict)


@pytest.fixture
def linked(db: None, tmp_path: Path) -> tuple[Cluster, Path]:
    """A local cluster whose model root holds `link`, a symbolic link to a directory outside every root
    (another team's checkpoint, /etc, …), and `inside`, a link to a directory inside the root."""
    root, outside = tmp_path / "models", tmp_path / "elsewhere" / "secret-ckpt"
    (root / "real").mkdir(parents=True)
    outside.mkdir(parents=True)
    for directory in (root / "real", outside):
        (directory / "config.json").write_text('{"model_type": "tiny"}\n')
        (directory / "model.safetensors").write_bytes(b"\x07" * 32)
    (root / "link").symlink_to(outside, target_is_directory=True)
    (root / "inside").symlink_to(root / "real", target_is_directory=True)
    cluster = Cluster.objects.create(
        name="linked", executor=ExecutorKind.LOCAL, remote_root=str(tmp_path / "runs"), model_roots=[str(root)]
    )
    return cluster, root


def test_a_model_directory_that_is_a_link_out_of_the_roots_is_refused_before_it_is_hashed(
    personas: Personas, artifacts: dict[str, Any], linked: tuple[Cluster, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 43: `<root>/link` -> a directory outside the roots passed the textual check and the
    service hashed the files it pointed at."""
    import planner.manifest as hashing

    cluster, root = linked

    def no_reading(path: Path) -> str:
        raise AssertionError(f"{path} was read")

    monkeypatch.setattr(hashing, "file_sha256", no_reading)
    body = {"artifact": str(artifacts["apache"].code), "path": str(root / "link")}
    response = personas.client(personas.engineer).post(
        f"/api/v1/clusters/{cluster.code}/locations", body, format="json"
    )
    assert response.status_code == 400, response.json()
    assert "path" in response.json()["extra"]["fields"]
    assert "model roots" in response.json()["message"]
    assert "elsewhere" not in response.json()["message"]  # where the link leads is not told
    assert not ArtifactLocation.objects.exists()
    with pytest.raises(ApplicationError) as caught:  # the screening eval's model path, the same check
        eval_run_request(cluster=cluster, scheme="w8a8", model={"path": f"{root}/link"}, actor=None)
    assert "model_path" in caught.value.extra["fields"]


def test_a_link_that_stays_inside_the_roots_is_accepted(
    personas: Personas, artifacts: dict[str, Any], linked: tuple[Cluster, Path]
) -> None:
    cluster, root = linked
    evaluation = eval_run_request(cluster=cluster, scheme="w8a8", model={"path": str(root / "inside")}, actor=None)
    assert evaluation.job is not None
    spec = json.loads(evaluation.job.files["spec.json"])
    assert spec["model_roots"] == [str(root)]  # the node checks the resolved path again


def test_a_location_at_another_team_s_files_never_reports_their_digest(
    personas: Personas, artifacts: dict[str, Any], linked: tuple[Cluster, Path]
) -> None:
    """Issue 43: a location pointed at another team's directory answered "the files hash to
    sha256:<theirs>". It says only that the files do not match."""
    from planner.manifest import weights_digest

    cluster, root = linked
    theirs = weights_digest(root / "real")
    body = {"artifact": str(artifacts["apache"].code), "path": str(root / "real")}
    response = personas.client(personas.engineer).post(
        f"/api/v1/clusters/{cluster.code}/locations", body, format="json"
    )
    assert response.status_code == 400, response.json()
    assert "do not match" in response.json()["message"]
    assert theirs not in json.dumps(response.json())
    assert theirs.removeprefix("sha256:")[:12] not in json.dumps(response.json())
    assert not ArtifactLocation.objects.exists()
