from __future__ import annotations

from typing import Any

from django.db.models import Q, QuerySet

from governance.artifacts.models import ModelArtifact
from governance.core.errors import NotFoundError
from governance.core.models import Team
from governance.core.roles import Role, has_role


def artifacts_visible_to(user: Any) -> QuerySet[ModelArtifact]:
    """Reviewers, auditors and admins see every artifact; requesters their teams' artifacts."""
    artifacts = ModelArtifact.objects.select_related("license", "license_version", "team", "parent")
    if has_role(user, Role.LEGAL_REVIEWER, Role.ENGINEERING_REVIEWER, Role.AUDITOR, Role.ADMIN):
        return artifacts
    if has_role(user, Role.REQUESTER):
        return artifacts.filter(Q(team__members=user) | Q(shared_with__members=user)).distinct()
    return artifacts.none()


def artifact_get(user: Any, code: Any) -> ModelArtifact:
    found = artifacts_visible_to(user).filter(code=code).first()
    if found is None:
        raise NotFoundError("no such artifact")
    return found


def artifact_digest_registered(weights_digest: str, team: Team) -> bool:
    """Whether `team` has an artifact with these weights (a digest is unique per team). Never asked
    across teams: the answer would tell which weights another team holds."""
    return ModelArtifact.objects.filter(team=team, weights_digest=weights_digest).exists()


def artifact_of_team_with_digest(team: Team, weights_digest: str) -> ModelArtifact | None:
    """The team's own artifact with these weights, if any (never another team's)."""
    return ModelArtifact.objects.filter(team=team, weights_digest=weights_digest).first()


def artifact_usable_by(artifact: ModelArtifact, team: Team) -> bool:
    """Whether `team` may build on `artifact` (a deployment request, a derivative): its own
    artifacts and those shared with it explicitly. Seeing an artifact (reviewers see all) is not enough."""
    return artifact.team_id == team.pk or artifact.shared_with.filter(pk=team.pk).exists()


def artifact_parent_settable_by(user: Any, artifact: ModelArtifact) -> bool:
    """Whether `user` may name the artifact's parent (artifact_parent_set's own rule): a requester of
    the artifact's team."""
    from governance.core.roles import Role, has_role

    return has_role(user, Role.REQUESTER) and artifact.team.members.filter(pk=user.pk).exists()


def artifact_signature_facts(artifact: ModelArtifact) -> dict[str, str] | None:
    """What evidence.json and the packet say of the artifact's OpenSSF model-signing bundle (None:
    not signed yet). The bundle itself is served by the API; its SHA-256 names it."""
    from governance.artifacts.models import ArtifactSignature
    from governance.artifacts.signing import FORMAT

    found = (
        ArtifactSignature.objects.filter(artifact=artifact)
        .values("bundle_sha256", "signer_sha256", "created_at")
        .first()
    )
    if found is None:
        return None
    return {
        "format": FORMAT,
        "bundle_sha256": found["bundle_sha256"],
        "signer_sha256": found["signer_sha256"],
        "signed_at": found["created_at"].isoformat(),
    }
