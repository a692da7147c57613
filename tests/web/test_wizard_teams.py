"""A user in several teams picks the team in the wizard (it used to file silently under the first);
a user in one team is not asked."""

from __future__ import annotations

from typing import Any

from django.test import Client

from governance.deployments.models import DeploymentRequest
from tests.conftest import Personas

FORM = {
    "product_name": "Acme Assistant",
    "environments": "production",
    "use_case": "internal",
    "commercial_entity": "on",
    "production": "on",
    "monthly_active_users": "200",
    "org_country": "US",
    "revenue_currency": "USD",
    "derivative_kind": "none",
    "derivative_distribution": "none",
    "engine": "vllm",
    "precision": "fp8",
    "gpu": "h200",
    "kv_dtype": "bf16",
    "max_model_len": "32768",
    "concurrency": "8",
    "create": "1",
}


def _client(personas: Personas) -> Client:
    client = Client()
    client.force_login(personas.requester)
    return client


def test_a_user_in_two_teams_must_choose_and_gets_the_team_chosen(personas: Personas, artifacts: Any) -> None:
    personas.other_team.members.add(personas.requester)
    client = _client(personas)
    page = client.get("/requests/new").content.decode()
    assert 'name="team"' in page
    assert ">platform<" in page
    assert ">research<" in page
    form = {**FORM, "artifact": str(artifacts["apache"].code)}
    refused = client.post("/requests/new", form)
    assert refused.status_code == 200
    assert "Choose the team" in refused.content.decode()
    assert DeploymentRequest.objects.count() == 0
    made = client.post("/requests/new", {**form, "team": "platform"})
    assert made.status_code == 302, made.content.decode()[:2000]
    assert DeploymentRequest.objects.get().team == personas.team


def test_a_new_artifact_is_registered_under_the_team_chosen(personas: Personas, artifacts: Any) -> None:
    personas.other_team.members.add(personas.requester)
    client = _client(personas)
    form = {
        **FORM,
        "team": "research",
        "new_name": "Qwen3-30B-A3B-copy",
        "new_source_repo": "Qwen/Qwen3-30B-A3B",
        "new_revision": "main",
        "new_weights_digest": "sha256:" + "ab" * 32,
        "new_license": "apache-2.0",
        "new_architecture_key": "qwen3-30b-a3b",
    }
    made = client.post("/requests/new", form)
    assert made.status_code == 302, made.content.decode()[:2000]
    created = DeploymentRequest.objects.get()
    assert created.team == personas.other_team
    assert created.artifact.team == personas.other_team


def test_a_team_the_user_is_not_in_is_refused(personas: Personas, artifacts: Any) -> None:
    client = _client(personas)
    response = client.post("/requests/new", {**FORM, "artifact": str(artifacts["apache"].code), "team": "research"})
    assert response.status_code == 200
    assert DeploymentRequest.objects.count() == 0


def test_a_user_in_one_team_is_not_asked(personas: Personas, artifacts: Any) -> None:
    client = _client(personas)
    made = client.post("/requests/new", {**FORM, "artifact": str(artifacts["apache"].code)})
    assert made.status_code == 302, made.context["form"].errors
    assert DeploymentRequest.objects.get().team == personas.team
