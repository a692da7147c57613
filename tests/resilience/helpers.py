"""Seed data for the fault suite: a team with requesters (one per client, each with an API token),
reviewers and an artifact, written in the test database the stack's processes read."""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib.auth.models import Group, User

from governance.artifacts.models import ModelArtifact
from governance.artifacts.services import artifact_register
from governance.core.models import Team
from governance.core.roles import Role
from governance.core.tokens import api_token_issue
from governance.licenses.services import license_catalog_load
from tests.deployments.conftest import digest_of


@dataclass
class Seed:
    team: Team
    artifact: ModelArtifact
    requesters: list[User]
    tokens: list[str]  # tokens[i] belongs to requesters[i]
    legal_token: str
    engineer_token: str


def seed(clients: int) -> Seed:
    license_catalog_load(actor="system:test")
    team = Team.objects.create(name="fault")
    requesters, tokens = [], []
    for n in range(clients):
        user = User.objects.create_user(username=f"req{n}", password="x")
        user.groups.add(Group.objects.get_or_create(name=Role.REQUESTER)[0])
        team.members.add(user)
        requesters.append(user)
        tokens.append(api_token_issue(user=user, name="fault").clear_text)
    reviewer_tokens = []
    for name, role in (("legal", Role.LEGAL_REVIEWER), ("eng", Role.ENGINEERING_REVIEWER)):
        user = User.objects.create_user(username=name, password="x")
        user.groups.add(Group.objects.get_or_create(name=role)[0])
        reviewer_tokens.append(api_token_issue(user=user, name="fault").clear_text)
    artifact = artifact_register(
        actor=requesters[0],
        team=team,
        data={
            "name": "Qwen3-30B-A3B",
            "source_repo": "org/Qwen3-30B-A3B",
            "revision": "abc123",
            "weights_digest": digest_of("fault-base"),
            "license": "apache-2.0",
            "architecture_key": "qwen3-30b-a3b",
        },
    )
    return Seed(team, artifact, requesters, tokens, *reviewer_tokens)
