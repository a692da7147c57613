"""Inspections: what an artifact's own files say of it, read on the cluster where they lie.

Registering a location queues one (planner.inspectjob through the same job path as evals: the local
executor or Slurm over SSH, bounded in time and memory). The node hashes every file into the
manifest, reads the safetensors headers (never the tensors), config.json's quantization_config, the
model card's front matter and the LICENSE / USE_POLICY / NOTICE texts, and refuses a hostile
checkpoint naming the file. The report is stored on the inspection; each license text once, by
fingerprint (licenses.LicenseText), for legal to classify and for the audit bundle.
"""

from __future__ import annotations

import logging
from typing import Any

from django.contrib.auth.models import User
from django.db import transaction

from governance.artifacts.models import ModelArtifact
from governance.audit.actions import AuditAction
from governance.audit.services import audit_record
from governance.core.services import write_service
from governance.evaluations.models import (
    ArtifactInspection,
    ArtifactLocation,
    InspectionStatus,
    JobKind,
    JobRun,
    JobRunState,
)
from governance.evaluations.selectors import artifact_known_manifest
from governance.evaluations.services import jobrun_create
from governance.evaluations.signals import artifact_inspected
from governance.licenses.services import license_text_keep
from planner.inspectjob.validate import report_fault
from planner.manifest import digest_matches

logger = logging.getLogger(__name__)
SYSTEM = "system:inspection"
SUBJECT = "evaluations.artifactinspection"
# A checkpoint's headers and small files read in seconds; hashing a TB-sized MoE takes the time.
INSPECTION_TIME_LIMIT_S = 6 * 3600
INSPECTION_MEMORY_MB = 2048


def _time_limit(location: ArtifactLocation) -> int:
    return min(INSPECTION_TIME_LIMIT_S, location.cluster.default_time_limit_s or INSPECTION_TIME_LIMIT_S)


@write_service
def artifact_inspection_request(*, location: ArtifactLocation, actor: User | None) -> ArtifactInspection:
    """Queue a reading of the files at `location` (its path was resolved inside a model root when
    the location was registered; the node resolves it again before reading anything)."""
    # a location without a manifest is read against the names the service already holds, if any
    manifest = location.manifest or artifact_known_manifest(location.artifact)
    files = {"manifest.txt": manifest} if manifest else {}
    command = [location.cluster.python, "-m", "planner.inspectjob", location.path, "--out", "result.json", "--job"]
    command += ["--max-memory-mb", str(INSPECTION_MEMORY_MB), "--max-seconds", str(_time_limit(location))]
    for root in location.cluster.model_roots or []:  # the path was checked as written; the node sees links
        command += ["--within", str(root)]
    if files:
        command += ["--manifest", "manifest.txt"]
    with transaction.atomic():
        inspection = ArtifactInspection.objects.create(
            artifact=location.artifact, cluster=location.cluster, path=location.path, requested_by=actor
        )
        inspection.job = jobrun_create(
            cluster=location.cluster,
            kind=JobKind.INSPECTION,
            command=command,
            files=files,
            time_limit_s=_time_limit(location) + 60,  # the payload stops itself first and says why
            subject=inspection,
            actor=actor,
        )
        inspection.save(update_fields=["job", "updated_at"])
    return inspection


def _refusal(inspection: ArtifactInspection, job: JobRun) -> tuple[str, str, str] | None:
    """(status, reason, file) when the job's outcome is not a report of the registered files."""
    if job.state != JobRunState.SUCCEEDED or not job.result:
        return InspectionStatus.ERROR, job.reason or f"job {job.state}", ""
    refused = job.result.get("refused")
    if isinstance(refused, dict):
        file = str(refused.get("file") or "")[:400]
        return InspectionStatus.REFUSED, f"{file}: {refused.get('message', 'refused')}".strip(": "), file
    found = str(job.result.get("weights_digest") or "").lower()
    registered = inspection.artifact.weights_digest.lower()
    manifest = job.result.get("manifest")
    # An artifact registered before the OpenSSF digest carries the legacy form of the same manifest.
    if found != registered and not (isinstance(manifest, str) and digest_matches(manifest, registered)):
        # Never the digest the files do have: it could name another team's weights.
        return InspectionStatus.REFUSED, "the files do not match the artifact's registered weights digest", ""
    fault = report_fault(job.result)  # whole is not right: the node's report is checked before it is believed
    if fault:
        return InspectionStatus.REFUSED, f"the node's report cannot be believed: {fault}", ""
    return None


@write_service
def artifact_inspection_complete(*, inspection_id: int) -> ArtifactInspection:
    """Record the finished job's report, once (row locked; a second delivery changes nothing)."""
    with transaction.atomic():
        inspection = (
            ArtifactInspection.objects.select_for_update(of=("self",))
            .select_related("artifact", "job")
            .get(pk=inspection_id)
        )
        if inspection.status != InspectionStatus.RUNNING or inspection.job is None:
            return inspection
        job = inspection.job
        refusal = _refusal(inspection, job)
        if refusal is not None:
            inspection.status, inspection.reason, inspection.refused_file = refusal
        else:
            report = dict(job.result or {})
            files = []
            for item in report.pop("license_files", None) or []:
                kept = license_text_keep(
                    text=str(item.get("text") or ""), sha256=str(item.get("sha256") or ""), path=str(item.get("path"))
                )
                files.append({k: item.get(k) for k in ("path", "kind", "sha256")} | {"fingerprint": kept.fingerprint})
            report["license_files"] = files
            inspection.status = InspectionStatus.PASSED
            inspection.weights_digest = str(report.get("weights_digest") or "")
            inspection.precision = report.get("precision")
            inspection.report = report
        inspection.save()
        audit_record(
            actor=SYSTEM,
            action=AuditAction.ARTIFACT_INSPECTED,
            obj=inspection.artifact,
            data={
                "inspection": str(inspection.code),
                "cluster": inspection.cluster.name,
                "status": inspection.status,
                "reason": inspection.reason[:500],
                "precision": (inspection.precision or {}).get("key"),
                "license_files": [f["fingerprint"] for f in (inspection.report or {}).get("license_files", [])],
            },
        )
        artifact: ModelArtifact = inspection.artifact
        transaction.on_commit(lambda: artifact_inspected.send(sender=ArtifactInspection, artifact=artifact))
    return inspection


def on_job_finished(sender: Any = None, *, run: JobRun, **kwargs: Any) -> None:
    """Receiver of signals.job_finished: only inspection jobs."""
    if run.subject_type != SUBJECT:
        return
    found = ArtifactInspection.objects.filter(job=run).values_list("pk", flat=True).first()
    if found is not None:
        artifact_inspection_complete(inspection_id=found)
