from __future__ import annotations

from typing import Any

from django.db.models import QuerySet

from governance.artifacts.models import ModelArtifact
from governance.core.errors import NotFoundError
from governance.core.roles import Role, has_role


def artifacts_visible_to(user: Any) -> QuerySet[ModelArtifact]:
    """Reviewers, auditors and admins see every artifact; requesters their teams' artifacts."""
    artifacts = ModelArtifact.objects.select_related("license", "license_version", "team", "parent")
    if has_role(user, Role.LEGAL_REVIEWER, Role.ENGINEERING_REVIEWER, Role.AUDITOR, Role.ADMIN):
        return artifacts
    if has_role(user, Role.REQUESTER):
        return artifacts.filter(team__members=user)
    return artifacts.none()


def artifact_get(user: Any, code: Any) -> ModelArtifact:
    found = artifacts_visible_to(user).filter(code=code).first()
    if found is None:
        raise NotFoundError("no such artifact")
    return found
