"""Reads of clusters, job runs and eval runs, with object scoping in the query: what a user may not
see is not found. Eval runs belong to a deployment request and are scoped like it."""

from __future__ import annotations

from typing import Any

from django.db.models import Q, QuerySet

from governance.artifacts.models import ModelArtifact
from governance.artifacts.weights import WeightsPrecision, weights_precision_of
from governance.core.errors import NotFoundError
from governance.core.roles import Role, has_role
from governance.evaluations.models import (
    ArtifactInspection,
    ArtifactLocation,
    Cluster,
    EvalRun,
    InspectionStatus,
    JobRun,
)
from governance.licenses.selectors import license_text_match
from planner.inspectjob.compare import compare_with_parent

# Roles that see every job and eval run.
SEE_ALL = (Role.AUDITOR, Role.ADMIN)
# The status of a request not submitted yet (deployments' Status.DRAFT; not imported: a lower layer).
_DRAFT = "draft"


def clusters_visible_to(user: Any) -> QuerySet[Cluster]:
    """Clusters are shared configuration: everyone with a role sees them (the API checks the role)."""
    return Cluster.objects.all()


def _found(queryset: QuerySet[Any], code: Any, what: str) -> Any:
    found = queryset.filter(code=code).first()
    if found is None:
        raise NotFoundError(f"no such {what}")
    return found


def cluster_get(user: Any, code: Any) -> Cluster:
    found: Cluster = _found(clusters_visible_to(user), code, "cluster")
    return found


def cluster_by_name(name: str) -> Cluster | None:
    return Cluster.objects.filter(name=name).first()


def jobruns_visible_to(user: Any) -> QuerySet[JobRun]:
    """An eval's job is scoped like its request (its team; reviewers once submitted); cluster
    operations (discovery, commands) are for engineering reviewers, and a requester follows the jobs
    they started themselves outside a request (a quantize run's: its state and log)."""
    runs = JobRun.objects.select_related("cluster")
    if has_role(user, *SEE_ALL):
        return runs
    condition = Q(pk__in=[])
    if has_role(user, Role.REQUESTER):
        condition |= Q(eval_run__request__team__members=user)
        condition |= Q(eval_run__isnull=True, requested_by=user)
    if has_role(user, Role.LEGAL_REVIEWER, Role.ENGINEERING_REVIEWER):
        condition |= Q(eval_run__request__isnull=False) & ~Q(eval_run__request__status=_DRAFT)
    if has_role(user, Role.ENGINEERING_REVIEWER):
        condition |= Q(eval_run__isnull=True)
    return runs.filter(condition).distinct()


def jobrun_get(user: Any, code: Any) -> JobRun:
    found: JobRun = _found(jobruns_visible_to(user), code, "job run")
    return found


def evalruns_visible_to(user: Any) -> QuerySet[EvalRun]:
    """Scoped like the request: its team sees them; reviewers once it is submitted, never a draft's."""
    runs = EvalRun.objects.select_related("job", "job__cluster")
    if has_role(user, *SEE_ALL):
        return runs
    condition = Q(pk__in=[])
    if has_role(user, Role.REQUESTER):
        condition |= Q(request__team__members=user)
    if has_role(user, Role.LEGAL_REVIEWER, Role.ENGINEERING_REVIEWER):
        condition |= Q(request__isnull=False) & ~Q(request__status=_DRAFT)
    return runs.filter(condition).distinct()


def evalrun_get(user: Any, code: Any) -> EvalRun:
    found: EvalRun = _found(evalruns_visible_to(user), code, "eval run")
    return found


def artifact_latest_inspection(artifact: ModelArtifact) -> ArtifactInspection | None:
    """The newest inspection of the artifact's files that ended (passed or refused), any cluster."""
    return (
        ArtifactInspection.objects.filter(
            artifact=artifact, status__in=[InspectionStatus.PASSED, InspectionStatus.REFUSED]
        )
        .select_related("cluster")
        .order_by("-created_at")
        .first()
    )


def artifact_known_manifest(artifact: ModelArtifact) -> str:
    """The manifest naming the artifact's files ("" while none is held): the first the service took,
    a location's, else the first passed inspection's reading. The OpenSSF digest counts the files'
    hashes in path order, not their names: the same bytes under other names (an unused file loaded as
    the weights) have the same digest, so every location goes by these names, a location registered
    again on the same cluster included (artifact_location_register, the eval and inspection jobs)."""
    locations = ArtifactLocation.objects.filter(artifact=artifact).exclude(manifest="")
    found = locations.order_by("created_at", "pk").values_list("manifest", flat=True).first()
    if found:
        return found
    passed = ArtifactInspection.objects.filter(artifact=artifact, status=InspectionStatus.PASSED)
    for report in passed.order_by("created_at", "pk").values_list("report", flat=True):
        read = (report or {}).get("manifest")
        if isinstance(read, str) and read:
            return read
    return ""


_UNREAD = object()  # the caller has not read the latest inspection yet


def artifact_weights_precision(artifact: ModelArtifact, inspection: Any = _UNREAD) -> WeightsPrecision:
    """How the artifact's weights are stored: its latest inspection's reading of the files when it
    passed, else its config.json as registered (artifacts.weights). A caller that already read the
    latest inspection passes it (None for none), so it is not read twice."""
    if inspection is _UNREAD:
        inspection = artifact_latest_inspection(artifact)
    inspected = inspection.precision if inspection and inspection.status == InspectionStatus.PASSED else None
    return weights_precision_of(
        architecture_key=artifact.architecture_key,
        config=artifact.config,
        quantization_config=artifact.quantization_config,
        inspected=inspected,
    )


def artifact_self_description(artifact: ModelArtifact) -> dict[str, Any]:
    """The evidence's account of what the artifact's own files say: the stored precision, the
    inspection it was read in, the model card's claims and each license text with what it matches.
    `inspection` is None until the files were read on a cluster (then only config.json speaks)."""
    inspection = artifact_latest_inspection(artifact)
    described: dict[str, Any] = {
        "weights": artifact_weights_precision(artifact, inspection).as_evidence(),
        "declared_license": artifact.license.key,
        "inspection": None,
    }
    if inspection is None:
        return described
    report = inspection.report or {}
    parent_check = artifact_parent_check(artifact, inspection)
    if parent_check is not None:
        described["parent_check"] = parent_check
    files = []
    for item in report.get("license_files") or []:
        match = license_text_match(str(item.get("fingerprint")))
        files.append(
            {
                "path": item.get("path"),
                "kind": item.get("kind"),
                "fingerprint": item.get("fingerprint"),
                "matches": f"{match.license} {match.version}" if match else None,
                "license": match.license if match else None,
                "matched_by": match.by if match else None,
            }
        )
    described["inspection"] = {
        "code": str(inspection.code),
        "cluster": inspection.cluster.name,
        "status": inspection.status,
        "reason": inspection.reason,
        "finished_at": inspection.updated_at.isoformat(),
        "model_card": report.get("model_card"),
        "license_files": files,
    }
    return described


def artifact_parent_check(artifact: ModelArtifact, inspection: ArtifactInspection | None) -> dict[str, Any] | None:
    """Whether the artifact named as the parent is the checkpoint these files were made from: the two
    latest passed inspections compared (planner.inspectjob.compare). None while either has not been
    read: nothing to say yet (the parent's eval would then be the requester's word)."""
    parent = artifact.parent
    if parent is None or inspection is None or inspection.status != InspectionStatus.PASSED:
        return None
    theirs = artifact_latest_inspection(parent)
    if theirs is None or theirs.status != InspectionStatus.PASSED:
        return None
    comparison = compare_with_parent(inspection.report or {}, theirs.report or {})
    if not comparison.comparable:
        return None
    return {
        "parent": str(parent.code),
        "parent_name": parent.name,
        "parent_digest": parent.weights_digest,
        "status": "match" if comparison.matches else "mismatch",
        "differences": list(comparison.differences),
    }


# The newest readings an artifact page shows; older ones stay in the database and the audit trail.
INSPECTIONS_SHOWN = 20


def artifact_inspections(artifact: ModelArtifact) -> list[ArtifactInspection]:
    """The artifact's inspections, newest first (the caller checked it may see the artifact)."""
    return list(
        ArtifactInspection.objects.filter(artifact=artifact)
        .select_related("cluster", "job")
        .order_by("-created_at")[:INSPECTIONS_SHOWN]
    )
