"""Registering model artifacts."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import User
from django.db import IntegrityError, transaction

from governance.artifacts.models import Derivation, ModelArtifact
from governance.artifacts.selectors import artifact_parent_settable_by, artifact_usable_by
from governance.artifacts.signals import artifact_changed
from governance.audit.actions import AuditAction
from governance.audit.services import audit_record
from governance.core.errors import PermissionDeniedError, invalid_input
from governance.core.models import Team
from governance.core.services import write_service
from governance.licenses.selectors import license_current_version
from planner.hf_config import checkpoint_quantization, parse_config
from planner.specs import closest_models
from planner.specs import models as planner_models


@write_service
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
        near = closest_models(architecture_key)
        hint = f"closest: {', '.join(near)}; " if near else ""
        raise invalid_input(
            "architecture_key",
            f"unknown; {hint}or paste the checkpoint's config.json; known: {', '.join(sorted(planner_models()))}",
        )
    quantization = data.get("quantization_config")
    if config is not None:
        try:
            parse_config(config)
        except ValueError as exc:  # "config.<field>: message": named by the config's own field
            field, _, message = str(exc).partition(": ")
            named = field.startswith("config.") and " " not in field
            raise invalid_input(field if named else "config", message if named else str(exc)) from None
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
    if parent is not None and not artifact_usable_by(parent, team):
        raise invalid_input("parent", "belongs to another team and is not shared with yours")
    for other in merged:
        if not artifact_usable_by(other, team):
            raise invalid_input("merged_with", f"{other.code} belongs to another team and is not shared with yours")
    try:
        return _artifact_create(actor, team, data, version, architecture_key, config, quantization, parent, merged)
    except IntegrityError:
        # Two registrations of the same weights by one team at the same moment: the unique index
        # decides; the loser gets the answer the serializer gives when it sees the row first.
        raise invalid_input(
            "weights_digest", "an artifact with this digest is registered in your team already"
        ) from None


@write_service
def _artifact_create(
    actor: User,
    team: Team,
    data: dict[str, Any],
    version: Any,
    architecture_key: str,
    config: Any,
    quantization: Any,
    parent: ModelArtifact | None,
    merged: list[ModelArtifact],
) -> ModelArtifact:
    derivation = data.get("derivation", Derivation.NONE)
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


@write_service
def artifact_share(*, artifact: ModelArtifact, team: Team, actor: User) -> ModelArtifact:
    """Let `team` build on `artifact`. Only a requester of the owning team shares its artifacts."""
    if not artifact_parent_settable_by(actor, artifact):
        raise PermissionDeniedError("only a requester of the artifact's team shares it")
    if team.pk == artifact.team_id:
        raise invalid_input("team", "the artifact already belongs to this team")
    with transaction.atomic():
        if not artifact.shared_with.filter(pk=team.pk).exists():
            artifact.shared_with.add(team)
            audit_record(
                actor=actor,
                action=AuditAction.ARTIFACT_SHARED,
                obj=artifact,
                data={"team": team.name, "team_code": str(team.code)},
            )
    return artifact


@write_service
def artifact_parent_set(
    *, artifact: ModelArtifact, parent: ModelArtifact, derivation: str, actor: User
) -> ModelArtifact:
    """Name the checkpoint `artifact` was made from, after it was registered (a quantized checkpoint
    registered as an original has no baseline to be evaluated against until it has a parent). Only a
    requester of the artifact's team; the parent must be usable by the team and not the artifact or
    one made from it. Whether the parent's files are the derivative's baseline is checked against
    both inspections (readiness: artifact.parent_mismatch), not here."""
    if not artifact_parent_settable_by(actor, artifact):
        raise PermissionDeniedError("only a requester of the artifact's team names its parent")
    if derivation not in Derivation.values or derivation in (Derivation.NONE, Derivation.MERGE):
        raise invalid_input("derivation", "how the artifact was made from its parent: fine_tune, quantize or distill")
    if not artifact_usable_by(parent, artifact.team):
        raise invalid_input("parent", "belongs to another team and is not shared with yours")
    with transaction.atomic():
        # Parent changes of the teams involved go one at a time (their rows locked in one order), so the
        # cycle check below reads every parent named before it: A -> B and B -> A asked at once cannot
        # both pass a check made before either was written.
        list(Team.objects.select_for_update().filter(pk__in={artifact.team_id, parent.team_id}).order_by("pk"))
        current = ModelArtifact.objects.get(pk=parent.pk)  # as now committed, not as the caller read it
        if any(ancestor.pk == artifact.pk for ancestor in current.lineage()):
            raise invalid_input("parent", f"{parent.name} is {artifact.name} or was made from it")
        locked = ModelArtifact.objects.select_for_update(of=("self",)).get(pk=artifact.pk)
        before = str(locked.parent.code) if locked.parent_id else None  # type: ignore[union-attr]
        locked.parent, locked.derivation = parent, derivation
        locked.save(update_fields=["parent", "derivation", "updated_at"])
        audit_record(
            actor=actor,
            action=AuditAction.ARTIFACT_UPDATED,
            obj=locked,
            data={"parent": str(parent.code), "previous_parent": before, "derivation": derivation},
        )
        transaction.on_commit(lambda: artifact_changed.send(sender=ModelArtifact, artifact=locked))
    return locked
