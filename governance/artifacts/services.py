"""Registering model artifacts."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import User
from django.db import transaction

from governance.artifacts.models import Derivation, ModelArtifact
from governance.audit.actions import AuditAction
from governance.audit.services import audit_record
from governance.core.errors import invalid_input
from governance.core.models import Team
from governance.licenses.selectors import license_current_version
from planner.hf_config import checkpoint_quantization, parse_config
from planner.specs import models as planner_models


def artifact_register(*, actor: User, team: Team, data: dict[str, Any]) -> ModelArtifact:
    """Validate and store an artifact. `data` comes from ArtifactInputSerializer."""
    if not team.members.filter(pk=actor.pk).exists():
        raise invalid_input("team", "you are not a member of this team")
    version = license_current_version(data["license"])
    architecture_key = data.get("architecture_key") or ""
    config = data.get("config")
    if not architecture_key and config is None:
        raise invalid_input("architecture_key", "give a planner catalog key or the checkpoint's config.json")
    if architecture_key and architecture_key not in planner_models():
        raise invalid_input("architecture_key", f"unknown; known: {', '.join(sorted(planner_models()))}")
    quantization = data.get("quantization_config")
    if config is not None:
        try:
            parse_config(config)
        except ValueError as exc:
            raise invalid_input("config", str(exc)) from None
        quantization = quantization or checkpoint_quantization(config)
    derivation = data.get("derivation", Derivation.NONE)
    parent = data.get("parent")
    merged = list(data.get("merged_with") or [])
    if derivation == Derivation.NONE and (parent or merged):
        raise invalid_input("derivation", "an artifact with a parent must say how it was derived")
    if derivation != Derivation.NONE and parent is None:
        raise invalid_input("parent", f"a {derivation} needs its parent artifact")
    if merged and derivation != Derivation.MERGE:
        raise invalid_input("merged_with", "only a merge combines other artifacts")
    with transaction.atomic():
        artifact = ModelArtifact.objects.create(
            team=team,
            name=data["name"],
            source_repo=data["source_repo"],
            revision=data["revision"],
            weights_digest=data["weights_digest"],
            license=version.license,
            license_version=version,
            architecture_key=architecture_key,
            config=config,
            modality=data.get("modality", "text"),
            quantization_config=quantization,
            parent=parent,
            derivation=derivation,
            registered_by=actor,
        )
        artifact.merged_with.set(merged)
        audit_record(
            actor=actor,
            action=AuditAction.ARTIFACT_REGISTERED,
            obj=artifact,
            data={
                "name": artifact.name,
                "weights_digest": artifact.weights_digest,
                "license": version.license.key,
                "license_version": version.version,
                "derivation": derivation,
                "parent": str(parent.code) if parent else None,
            },
        )
    return artifact
