"""Object permissions for each persona, and bad input that names the field and changes nothing."""

import hashlib
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from governance.artifacts.manifest import weights_digest
from governance.artifacts.models import ModelArtifact
from governance.deployments.models import DeploymentRequest
from planner.manifest import digest_of_manifest
from tests.conftest import Personas
from tests.deployments.conftest import FACTS, SERVING, Flow, digest_of


def test_visibility_per_persona(flow: Flow, artifacts, personas) -> None:
    draft = flow.create(artifacts["apache"])["code"]
    submitted = flow.create(artifacts["apache"])["code"]
    flow.post(personas.requester, submitted, "submit")

    def visible(user) -> set[str]:
        response = flow.client(user).get("/api/v1/deployments/")
        assert response.status_code == 200
        return {row["code"] for row in response.json()["results"]}

    assert visible(personas.requester) == {draft, submitted}
    assert visible(personas.other_requester) == set()
    assert visible(personas.legal) == {submitted}  # reviewers do not see drafts
    assert visible(personas.engineer) == {submitted}
    assert visible(personas.auditor) == {draft, submitted}
    assert visible(personas.outsider) == set()
    for user in (personas.other_requester, personas.outsider):
        assert flow.client(user).get(f"/api/v1/deployments/{submitted}").status_code == 404
        assert flow.post(user, submitted, "submit").status_code == 404
    assert flow.client(personas.legal).get(f"/api/v1/deployments/{draft}").status_code == 404
    assert flow.client(None).get("/api/v1/deployments/").status_code in (401, 403)
    # Auditors read but cannot act.
    assert flow.post(personas.auditor, submitted, "start-review").status_code == 403


def test_list_filters_and_pagination(flow: Flow, artifacts, personas) -> None:
    for _ in range(3):
        flow.create(artifacts["apache"])
    response = flow.client(personas.requester).get("/api/v1/deployments/", {"status": "draft", "page_size": "2"})
    body = response.json()
    assert body["count"] == 3
    assert len(body["results"]) == 2
    assert body["next"] is not None
    bad = flow.client(personas.requester).get("/api/v1/deployments/", {"status": "pending"})
    assert bad.status_code == 400
    assert "status" in bad.json()["extra"]["fields"]


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"facts": {**FACTS, "monthly_active_users": -1}}, "facts.monthly_active_users"),
        ({"facts": {**FACTS, "org_country": "ZZ"}}, "facts.org_country"),
        ({"serving_plan": {**SERVING, "gpu": "h900"}}, "serving_plan.gpu"),
        ({"serving_plan": {**SERVING, "tp": 0}}, "serving_plan.tp"),
        ({"serving_plan": {**SERVING, "turbo": True}}, "serving_plan.turbo"),
        ({"environments": ["Prod!"]}, "environments[0]"),
        ({"artifact": "00000000-0000-0000-0000-000000000000"}, "artifact"),
        ({"colour": "blue"}, "colour"),
    ],
)
def test_bad_edit_names_the_field_and_changes_nothing(flow: Flow, artifacts, personas, change, field) -> None:
    code = flow.create(artifacts["apache"])["code"]
    before = DeploymentRequest.objects.get(code=code)
    response = flow.client(personas.requester).patch(f"/api/v1/deployments/{code}", change, format="json")
    assert response.status_code == 400
    assert any(name.startswith(field) for name in response.json()["extra"]["fields"]), response.json()
    after = DeploymentRequest.objects.get(code=code)
    assert (after.facts, after.serving_plan, after.environments, after.evidence_digest, after.updated_at) == (
        before.facts,
        before.serving_plan,
        before.environments,
        before.evidence_digest,
        before.updated_at,
    )


def test_bad_create_names_the_field_and_creates_nothing(flow: Flow, artifacts, personas) -> None:
    body = {
        "artifact": str(artifacts["apache"].code),
        "product_name": "X",
        "facts": {**FACTS, "intended_uses": ["fun"]},
        "serving_plan": SERVING,
    }
    response = flow.client(personas.requester).post("/api/v1/deployments/", body, format="json")
    assert response.status_code == 400
    assert "facts.intended_uses[0]" in response.json()["extra"]["fields"]
    assert DeploymentRequest.objects.count() == 0
    other_team = flow.client(personas.other_requester).post(
        "/api/v1/deployments/", {**body, "facts": FACTS}, format="json"
    )
    assert other_team.status_code == 400  # another team's artifact is not found
    assert "artifact" in other_team.json()["extra"]["fields"]


def test_review_and_obligation_bad_input(flow: Flow, artifacts, personas) -> None:
    code = flow.to_review(artifacts["llama"])
    assert (
        "verdict"
        in flow.post(personas.legal, code, "review", {"verdict": "maybe", "evidence_digest": "0" * 64}).json()["extra"][
            "fields"
        ]
    )
    assert (
        "evidence_digest"
        in flow.post(personas.legal, code, "review", {"verdict": "approve", "evidence_digest": "x"}).json()["extra"][
            "fields"
        ]
    )
    item = flow.get(personas.requester, code)["obligations"][0]
    response = flow.post(personas.requester, code, f"obligations/{item['code']}/acknowledge", {"how_met": "  "})
    assert response.status_code == 400
    assert "how_met" in response.json()["extra"]["fields"]
    assert flow.get(personas.requester, code)["obligations"][0]["status"] == "open"
    assert flow.post(personas.legal, code, f"obligations/{item['code']}/review", {"accept": True}).status_code == 409


# --- artifacts ---------------------------------------------------------------------------------


def test_weights_digest_streams_a_manifest(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "model-00001.safetensors").write_bytes(b"a" * 3_000_000)
    (tmp_path / "sub" / "config.json").write_text("{}")
    manifest = (
        f"{hashlib.sha256(b'a' * 3_000_000).hexdigest()} 3000000 model-00001.safetensors\n"
        f"{hashlib.sha256(b'{}').hexdigest()} 2 sub/config.json\n"
    )
    assert weights_digest(tmp_path) == digest_of_manifest(manifest)
    before = weights_digest(tmp_path)
    (tmp_path / "sub" / "config.json").write_text("{ }")
    assert weights_digest(tmp_path) != before
    with pytest.raises(CommandError, match="not a directory"):
        call_command("artifact_digest", str(tmp_path / "missing"))


def test_derivative_inherits_and_merge_unions_licenses(flow: Flow, artifacts, personas) -> None:
    client = flow.client(personas.requester)
    base = {"source_repo": "acme/x", "revision": "1", "license": "apache-2.0", "architecture_key": "qwen3-30b-a3b"}
    tune = client.post(
        "/api/v1/artifacts",
        {
            **base,
            "name": "tune",
            "weights_digest": digest_of("tune"),
            "parent": str(artifacts["llama"].code),
            "derivation": "fine_tune",
        },
        format="json",
    )
    assert tune.status_code == 201, tune.json()
    assert tune.json()["licenses"] == ["apache-2.0 2.0", "llama-3.1 2024-07-23.r2"]
    merged = client.post(
        "/api/v1/artifacts",
        {
            **base,
            "name": "merge",
            "weights_digest": digest_of("merge"),
            "parent": str(artifacts["kimi"].code),
            "derivation": "merge",
            "merged_with": [str(artifacts["qwen"].code)],
        },
        format="json",
    )
    assert merged.json()["licenses"] == ["apache-2.0 2.0", "kimi-k2-modified-mit 2025-07-11", "qwen 2024-09-19"]
    code = flow.create(ModelArtifact.objects.get(name="merge"))["code"]
    evaluated = {e["license"] for e in flow.get(personas.requester, code)["licenses"]}
    assert evaluated == {"apache-2.0", "kimi-k2-modified-mit", "qwen"}


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"weights_digest": "md5:abc"}, "weights_digest"),
        ({"license": "nope"}, "license"),
        ({"architecture_key": "gpt-5"}, "architecture_key"),
        ({"architecture_key": "", "config": {"architectures": ["BertModel"]}}, "config"),
        ({"derivation": "fine_tune"}, "parent"),
        ({"parent": "00000000-0000-0000-0000-000000000000", "derivation": "fine_tune"}, "parent"),
    ],
)
def test_artifact_bad_input(flow: Flow, artifacts, personas, change, field) -> None:
    body = {
        "name": "n",
        "source_repo": "a/b",
        "revision": "1",
        "weights_digest": digest_of("n"),
        "license": "mit",
        "architecture_key": "qwen3-30b-a3b",
        **change,
    }
    count = ModelArtifact.objects.count()
    response = flow.client(personas.requester).post("/api/v1/artifacts", body, format="json")
    assert response.status_code in (400, 404)
    assert field in response.json()["extra"].get("fields", {field: 1}) or field in response.json()["message"]
    assert ModelArtifact.objects.count() == count
    assert (
        flow.client(personas.legal)
        .post("/api/v1/artifacts", {**body, "weights_digest": digest_of("z")}, format="json")
        .status_code
        == 403
    )


def test_a_registered_digest_and_an_unknown_share_team_answer_400_naming_the_field(
    flow: Flow, artifacts: dict[str, ModelArtifact], personas: Personas
) -> None:
    client = flow.client(personas.requester)
    existing = artifacts["apache"]
    body = {"name": "again", "source_repo": "acme/x", "revision": "1", "license": "apache-2.0"}
    again = client.post("/api/v1/artifacts", {**body, "weights_digest": existing.weights_digest}, format="json")
    assert again.status_code == 400
    assert list(again.json()["extra"]["fields"]) == ["weights_digest"]
    nowhere = client.post(f"/api/v1/artifacts/{existing.code}/share", {"team": "no-such-team"}, format="json")
    assert nowhere.status_code == 400
    assert list(nowhere.json()["extra"]["fields"]) == ["team"]
