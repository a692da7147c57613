"""A weights digest is unique per team, not across teams (issue 43): registering a published
checkpoint's digest first no longer blocks another team from registering it, and no answer tells one
team which weights another holds. Sharing and lineage express reuse across teams."""

from __future__ import annotations

import json
from pathlib import Path

from governance.artifacts.manifest import weights_digest
from governance.artifacts.models import ModelArtifact
from governance.artifacts.services import artifact_register
from governance.deployments.models import DeploymentRequest
from governance.evaluations.models import ArtifactLocation, Cluster, ExecutorKind
from tests.conftest import Personas
from tests.deployments.conftest import FACTS, Flow, digest_of

BODY = {"source_repo": "Qwen/Qwen3-30B-A3B", "revision": "main", "license": "apache-2.0"}


def test_two_teams_register_the_same_published_checkpoint(
    flow: Flow, artifacts: dict[str, ModelArtifact], personas: Personas
) -> None:
    theirs = artifacts["apache"]  # registered first by the team "platform"
    client = flow.client(personas.other_requester)  # a requester of "research" only
    body = {**BODY, "name": "qwen3-ours", "architecture_key": "qwen3-30b-a3b", "weights_digest": theirs.weights_digest}
    first = client.post("/api/v1/artifacts", body, format="json")
    assert first.status_code == 201, first.json()
    assert first.json()["team"] == personas.other_team.name
    assert first.json()["code"] != str(theirs.code)
    mine = ModelArtifact.objects.get(code=first.json()["code"])
    assert mine.team == personas.other_team
    assert ModelArtifact.objects.filter(weights_digest=theirs.weights_digest).count() == 2
    # a second registration in the same team is refused, naming the field and nothing of the other team
    again = client.post("/api/v1/artifacts", {**body, "name": "qwen3-again"}, format="json")
    assert again.status_code == 400, again.json()
    assert list(again.json()["extra"]["fields"]) == ["weights_digest"]
    text = json.dumps(again.json())
    for leak in (str(theirs.code), theirs.name, personas.team.name):
        assert leak not in text, leak


def test_a_digest_no_team_of_yours_holds_tells_nothing(
    flow: Flow, artifacts: dict[str, ModelArtifact], personas: Personas
) -> None:
    """The answer for a digest another team holds is the answer for a digest nobody holds."""
    client = flow.client(personas.other_requester)
    bad_license = {**BODY, "name": "probe", "license": "no-such-license", "architecture_key": "qwen3-30b-a3b"}
    held = client.post("/api/v1/artifacts", {**bad_license, "weights_digest": artifacts["kimi"].weights_digest})
    unheld = client.post("/api/v1/artifacts", {**bad_license, "weights_digest": digest_of("nobody-has-this")})
    assert (held.status_code, held.json()) == (unheld.status_code, unheld.json())


def test_each_team_s_served_evals_keep_their_own_baseline_answers(
    flow: Flow, artifacts: dict[str, ModelArtifact], personas: Personas, tmp_path: Path
) -> None:
    """Two teams holding the same weights: a baseline's answers cached by one team's eval are not the
    other's (whether an eval found them cached would tell it that another team evaluated them)."""
    from governance.evaluations.evals import eval_served_request

    path = tmp_path / "models" / "base"
    path.mkdir(parents=True)
    (path / "model.safetensors").write_bytes(b"\x01" * 64)
    cluster = Cluster.objects.create(
        name="local", executor=ExecutorKind.LOCAL, remote_root=str(tmp_path / "runs"), model_roots=[str(path.parent)]
    )
    plan = {"engine": "vllm", "precision": "fp8", "gpu": "h200", "max_model_len": 4096, "concurrency": 4}
    command = "vllm serve /models/base --tensor-parallel-size 1 --max-model-len 4096 --quantization fp8"
    result = {"serving": {"vllm": command}, "parallel": {"tp": 1, "pp": 1, "ep": 1, "dp": 1, "nodes": 1}}
    caches = {}
    for user, team in ((personas.requester, personas.team), (personas.other_requester, personas.other_team)):
        base = artifact_register(
            actor=user,
            team=team,
            data={**BODY, "name": "base", "architecture_key": "qwen3-30b-a3b", "weights_digest": weights_digest(path)},
        )
        ArtifactLocation.objects.create(artifact=base, cluster=cluster, path=str(path))
        body = {
            "artifact": str(base.code),
            "product_name": "Acme Assistant",
            "environments": ["production"],
            "facts": FACTS,
            "serving_plan": plan,
        }
        created = personas.client(user).post("/api/v1/deployments/", body, format="json")
        assert created.status_code == 201, created.json()
        deployment = DeploymentRequest.objects.get(code=created.json()["code"])
        evaluation = eval_served_request(
            deployment=deployment, cluster=cluster, actor=personas.engineer, engine="vllm", plan_result=result
        )
        assert evaluation.job is not None
        caches[team.code.hex] = json.loads(evaluation.job.files["spec.json"])["baseline_cache_dir"]
    assert len(set(caches.values())) == 2
    for team_hex, directory in caches.items():
        assert directory == f"{tmp_path / 'runs'}/baseline-answers/{team_hex}"


def test_a_registration_that_loses_the_race_to_the_unique_index_is_a_400(
    artifacts: dict[str, ModelArtifact], personas: Personas
) -> None:
    """The serializer's check and the insert are two statements: a twin registration between them meets
    the (team, digest) index, and answers like the serializer (not a 500)."""
    import pytest

    from governance.core.errors import ApplicationError

    ours = artifacts["apache"]
    data = {**BODY, "name": "twin", "architecture_key": "qwen3-30b-a3b", "weights_digest": ours.weights_digest}
    with pytest.raises(ApplicationError) as refused:
        artifact_register(actor=personas.requester, team=personas.team, data=data)
    assert "weights_digest" in refused.value.extra["fields"]
    assert ModelArtifact.objects.filter(weights_digest=ours.weights_digest, team=personas.team).count() == 1
