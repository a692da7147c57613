"""The artifact page and the wizard's account of a picked artifact: what its own files say of it (the
latest inspection, per file), its lineage, and whether its parent is its baseline."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db.models import Q

from governance.artifacts.models import Derivation, ModelArtifact
from governance.artifacts.selectors import artifact_get, artifact_parent_settable_by, artifacts_visible_to
from governance.evaluations.models import ArtifactInspection, InspectionStatus
from governance.evaluations.selectors import artifact_inspections, artifact_self_description
from governance.web.selectors.catalog import wizard_artifact


def wizard_artifact_facts(user: Any, code: str) -> dict[str, Any] | None:
    """What the artifact picked in the wizard says of itself, None when none is picked or the user may
    not see it: the stored precision, the derivation and parent, the declared license and, once its
    files were read, the license texts found and what they match."""
    artifact = wizard_artifact(user, code)
    if artifact is None:
        return None
    return _described(artifact)


def _described(artifact: ModelArtifact) -> dict[str, Any]:
    return {
        "code": str(artifact.code),
        "name": artifact.name,
        "derivation": artifact.derivation,
        "parent": artifact.parent,
        **artifact_self_description(artifact),
    }


@dataclass(frozen=True, slots=True)
class ArtifactPage:
    artifact: ModelArtifact
    described: dict[str, Any]  # artifact_self_description, with the parent
    inspections: list[ArtifactInspection]
    latest: ArtifactInspection | None  # the newest passed one: its report is listed per file
    files: list[dict[str, Any]]  # the manifest's files, each with its safetensors header summary
    derivatives: list[ModelArtifact]
    parent_choices: list[tuple[str, str]]  # (code, label), for the parent form; empty: no form
    derivation_choices: list[str]


def _files(report: dict[str, Any]) -> list[dict[str, Any]]:
    headers = {entry.get("path"): entry for entry in report.get("safetensors") or []}
    rows = []
    for entry in report.get("files") or []:
        header = headers.get(entry.get("path")) or {}
        rows.append({**entry, "header": header})
    return rows


def _made_from(artifact: ModelArtifact) -> set[int]:
    """The artifact and every artifact made from it (derived or merged), by id: none may be its parent."""
    found, frontier = {artifact.pk}, {artifact.pk}
    while frontier:
        children = set(
            ModelArtifact.objects.filter(Q(parent__in=frontier) | Q(merged_with__in=frontier)).values_list(
                "pk", flat=True
            )
        )
        frontier = children - found
        found |= frontier
    return found


def artifact_page(user: Any, code: Any) -> ArtifactPage:
    """One artifact the user may see (else not found), with what its inspections found."""
    artifact = artifact_get(user, code)
    inspections = artifact_inspections(artifact)
    latest = next((i for i in inspections if i.status == InspectionStatus.PASSED), None)
    visible = artifacts_visible_to(user)
    may_name_parent = artifact_parent_settable_by(user, artifact)
    choices: list[tuple[str, str]] = []
    if may_name_parent:
        # usable by the artifact's team (its own and shared ones), never itself or one made from it
        made_from_it = _made_from(artifact)
        usable = (
            ModelArtifact.objects.filter(Q(team=artifact.team) | Q(shared_with=artifact.team))
            .exclude(pk__in=made_from_it)
            .distinct()
            .order_by("name")
        )
        choices = [(str(a.code), f"{a.name} ({a.weights_digest[:19]}…)") for a in usable]
    return ArtifactPage(
        artifact=artifact,
        described=_described(artifact),
        inspections=inspections,
        latest=latest,
        files=_files(latest.report or {}) if latest else [],
        derivatives=list(visible.filter(parent=artifact).order_by("name")),
        parent_choices=choices,
        derivation_choices=[Derivation.QUANTIZE, Derivation.FINE_TUNE, Derivation.DISTILL],
    )
