"""Verifying signed packets (an upload, a local file, or the packet just completed) and storing
the result under the file's SHA-256.

An upload is never verified in the web request: `verification_job_create` stores the bytes (bounded)
and queues `approvals.verify_upload` on the heavy queue through the outbox; the worker runs
`verification_job_run` under a soft time limit (`verification_job_timed_out` past it) and empties
the stored bytes whatever the outcome. pyHanko runs outside every transaction."""

from __future__ import annotations

import hashlib
import logging
import time
import uuid
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.contrib.auth.models import User
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from governance.approvals import pki
from governance.approvals.choices import VerificationStatus
from governance.approvals.models import PacketVerification, VerificationJob
from governance.approvals.services.certificates import Actor, require_pki
from governance.audit.actions import AuditAction
from governance.audit.services import audit_record
from governance.core.errors import ApplicationError, invalid_input
from governance.core.outbox import outbox_enqueue
from governance.core.services import write_service
from governance.deployments.choices import ReviewRole
from governance.deployments.models import DeploymentRequest

if TYPE_CHECKING:
    from governance.approvals.verification import PacketReport, VerifyLimits

# verification (pyHanko) is imported where it is used: it takes seconds to import.

logger = logging.getLogger(__name__)

VERIFY_TASK = "approvals.verify_upload"
# A PDF starts with this header; PDF readers accept it within the first KiB (garbage before it).
PDF_HEADER, PDF_HEADER_WITHIN = b"%PDF-", 1024
VERIFY_HARD_EXTRA_S = 10  # the task's hard limit comes this long after the soft one
MAX_ERROR_CHARS = 2000
FINISHED = (VerificationStatus.DONE, VerificationStatus.REFUSED, VerificationStatus.FAILED)


def verify_limits() -> VerifyLimits:
    from governance.approvals.verification import VerifyLimits

    return VerifyLimits(
        max_signatures=settings.APPROVALS_VERIFY_MAX_SIGNATURES,
        max_revisions=settings.APPROVALS_VERIFY_MAX_REVISIONS,
        max_evidence_bytes=settings.APPROVALS_VERIFY_MAX_EVIDENCE_BYTES,
    )


def verify_bytes(data: bytes) -> PacketReport:
    """Verify a file within the configured bounds; a file over one raises UploadRefused."""
    from governance.approvals.verification import verify_packet

    root = require_pki()
    return verify_packet(
        data, trust_root=pki.load_cert(root.certificate_pem), crls=[bytes(root.crl_der or b"")], limits=verify_limits()
    )


def verification_store(
    data: bytes, *, deployment: DeploymentRequest | None, actor: Actor
) -> tuple[PacketReport, PacketVerification]:
    """Verify `data` and store the result (in the caller's transaction); the request is found from
    the packet's embedded evidence when not given."""
    return verification_record(verify_bytes(data), deployment=deployment, actor=actor)


def verification_record(
    report: PacketReport, *, deployment: DeploymentRequest | None, actor: Actor
) -> tuple[PacketReport, PacketVerification]:
    """Store a verification already made (pyHanko's work done outside any lock), with its audit event:
    the service's own verifications (a packet just completed, `manage.py verify_approval`), which
    replace what is stored for the same bytes. The request named inside the file is linked (and the
    event put on its timeline) only when the actor may read that request; "evidence current" only
    for a valid, trusted packet."""
    if deployment is None and report.deployment_code:
        deployment = _readable_deployment(report.deployment_code, actor)
    current = _evidence_current(report, deployment)
    verification, _ = PacketVerification.objects.update_or_create(
        pdf_sha256=report.pdf_sha256, defaults=_stored_fields(report, deployment, current)
    )
    _audit_verified(report, verification, deployment, current, actor)
    return report, verification


def upload_verification_record(
    report: PacketReport, *, actor: User
) -> tuple[PacketVerification, bool, DeploymentRequest | None]:
    """Store an upload's verification: only when nothing is stored for these bytes yet. The stored
    row of an approved packet is what the gate and the request page read; an upload of the same
    bytes (by anyone with a role, of any team) must not rewrite its time, its request or "evidence
    current". Returns the stored row, and what this uploader sees: evidence current, and the
    request when they may read it."""
    deployment = _readable_deployment(report.deployment_code, actor) if report.deployment_code else None
    current = _evidence_current(report, deployment)
    verification, _ = PacketVerification.objects.get_or_create(
        pdf_sha256=report.pdf_sha256, defaults=_stored_fields(report, deployment, current)
    )
    _audit_verified(report, verification, deployment, current, actor)
    return verification, current, deployment


def _evidence_current(report: PacketReport, deployment: DeploymentRequest | None) -> bool:
    return bool(
        report.all_valid
        and deployment is not None
        and report.evidence_digest
        and report.evidence_digest == deployment.evidence_digest
    )


def _stored_fields(report: PacketReport, deployment: DeploymentRequest | None, current: bool) -> dict[str, Any]:
    return {
        "deployment": deployment,
        "evidence_digest": report.evidence_digest,
        "evidence_current": current,
        "signatures": report.as_dict()["signatures"],
        "legal_valid": report.valid_for(ReviewRole.LEGAL),
        "engineering_valid": report.valid_for(ReviewRole.ENGINEERING),
        "all_valid": report.all_valid,
        "problems": report.problems,
        "verified_at": datetime.now(UTC),
    }


def _audit_verified(
    report: PacketReport,
    verification: PacketVerification,
    deployment: DeploymentRequest | None,
    current: bool,
    actor: Actor,
) -> None:
    audit_record(
        actor=actor,
        action=AuditAction.PACKET_VERIFIED,
        obj=deployment if deployment is not None else ("approvals.packet", report.pdf_sha256),
        data={
            "pdf_sha256": report.pdf_sha256,
            "all_valid": report.all_valid,
            "legal_valid": report.valid_for(ReviewRole.LEGAL),
            "engineering_valid": report.valid_for(ReviewRole.ENGINEERING),
            "evidence_current": current,
        },
    )


def _readable_deployment(code: str, actor: Actor) -> DeploymentRequest | None:
    """The request a file names, if the actor may read it (a system actor reads every request)."""
    from governance.deployments.selectors import deployments_visible_to

    try:
        parsed = uuid.UUID(code)
    except ValueError:
        return None
    requests = DeploymentRequest.objects.all() if isinstance(actor, str) else deployments_visible_to(actor)
    return requests.filter(code=parsed).first()


@write_service
def packet_verify(*, data: bytes, actor: Actor) -> tuple[PacketReport, PacketVerification]:
    """Verify an uploaded (or local) PDF and store the result under its SHA-256."""
    with transaction.atomic():
        return verification_store(data, deployment=None, actor=actor)


# --- uploads, verified by the heavy worker ----------------------------------------------------


@write_service
def verification_job_create(*, data: bytes, actor: User) -> VerificationJob:
    """Keep an uploaded file for the heavy worker and queue its verification. Only checks costing
    no parsing happen here (size, the PDF header, the PKI, the uploader's files still waiting):
    each refusal names `file`. The API answers 202 with the job's status URL."""
    limit = settings.APPROVALS_MAX_UPLOAD_BYTES
    if len(data) > limit:
        raise invalid_input("file", f"larger than {limit} bytes")
    if PDF_HEADER not in data[:PDF_HEADER_WITHIN]:
        raise invalid_input(
            "file", f"not a PDF: no {PDF_HEADER.decode()} header in its first {PDF_HEADER_WITHIN} bytes"
        )
    require_pki()  # 503 now rather than a failed job: nothing to verify against yet
    pending = settings.APPROVALS_VERIFY_MAX_PENDING
    with transaction.atomic():
        # The uploader's row lock serialises two uploads racing past the bound below.
        User.objects.select_for_update().filter(pk=actor.pk).first()
        waiting = VerificationJob.objects.filter(
            requested_by=actor, status__in=(VerificationStatus.QUEUED, VerificationStatus.RUNNING)
        ).count()
        if waiting >= pending:
            raise ApplicationError(
                f"{waiting} of your files are still being verified (at most {pending} at a time): "
                "wait for one to finish",
                extra={"fields": {"file": [f"at most {pending} files waiting for verification per user"]}},
                status=429,
            )
        job = VerificationJob.objects.create(
            requested_by=actor, upload=data, upload_size=len(data), upload_sha256=hashlib.sha256(data).hexdigest()
        )
        outbox_enqueue(VERIFY_TASK, job.pk)
    return job


def _claim(job_id: int) -> VerificationJob | None:
    """The worker takes a queued job (a duplicate delivery finds it taken and does nothing). A job
    still `running` past the soft time limit when its message comes again was being verified by a
    worker that was killed (the hard limit, or a crash; the soft limit would have ended it): it fails,
    naming the limit, rather than being tried again on the same file."""
    now = timezone.now()
    hard = settings.APPROVALS_VERIFY_SOFT_TIME_LIMIT_S + VERIFY_HARD_EXTRA_S
    stale = VerificationJob.objects.filter(
        pk=job_id,
        status=VerificationStatus.RUNNING,
        started_at__lt=now - timedelta(seconds=settings.APPROVALS_VERIFY_SOFT_TIME_LIMIT_S + 1),
    )
    if stale.exists():
        _finish(job_id, VerificationStatus.FAILED, error=_limit_message(hard, "hard"))
        return None
    claimed = VerificationJob.objects.filter(pk=job_id, status=VerificationStatus.QUEUED).update(
        status=VerificationStatus.RUNNING, started_at=now, updated_at=now
    )
    return VerificationJob.objects.filter(pk=job_id).first() if claimed else None


def _limit_message(seconds: int, which: str) -> str:
    setting = "APPROVALS_VERIFY_SOFT_TIME_LIMIT_S" + ("" if which == "soft" else f" + {VERIFY_HARD_EXTRA_S}")
    return f"the file was not verified: verification ran past its time limit of {seconds} s ({setting})"


def _finish(job_id: int, status: str, *, error: str = "", **fields: Any) -> None:
    """Store the outcome and empty the stored bytes: they are not kept once the worker is done."""
    now = timezone.now()
    # A parser's message may quote the file; the page and the API show a bounded part of it.
    error = error if len(error) <= MAX_ERROR_CHARS else error[: MAX_ERROR_CHARS - 1] + "…"
    VerificationJob.objects.filter(pk=job_id).exclude(status__in=FINISHED).update(
        status=status, error=error, upload=b"", finished_at=now, updated_at=now, **fields
    )


def verification_job_run(*, job_id: int) -> str:
    """The task's service: verify the stored file (pyHanko outside any transaction), then store the
    result and its audit event in a short transaction. Returns the job's status."""
    from governance.approvals.verification import UploadRefused

    job = _claim(job_id)
    if job is None:
        status = VerificationJob.objects.filter(pk=job_id).values_list("status", flat=True).first()
        return str(status or "missing")
    started = _clock()
    failure: tuple[VerificationStatus, str, Exception] | None = None
    try:
        report = verify_bytes(bytes(job.upload))
    except UploadRefused as refused:
        failure = (VerificationStatus.REFUSED, str(refused), refused)
    except ApplicationError as exc:  # e.g. the PKI went away meanwhile
        failure = (VerificationStatus.FAILED, exc.message, exc)
    # Whatever the verifier answered, an answer reached past the soft time limit is not trusted.
    if _timed_out(started, failure[2] if failure else None):
        return verification_job_timed_out(job_id=job.pk, seconds=settings.APPROVALS_VERIFY_SOFT_TIME_LIMIT_S)
    if failure is not None:
        status, error, _ = failure
        _finish(job.pk, status, error=error)
        return str(status)
    with transaction.atomic():
        stored, current, deployment = upload_verification_record(report, actor=job.requested_by)
        result = {
            **report.as_dict(),
            "evidence_current": current,
            "verified_at": timezone.now().isoformat(),
            # the request the file names, when the uploader may read it (the page links its packet)
            "request": str(deployment.code) if deployment is not None else None,
        }
        _finish(job.pk, VerificationStatus.DONE, result=result, verification=stored)
    return str(VerificationStatus.DONE)


_clock = time.monotonic  # a module attribute, so tests can move it


def _timed_out(started: float, exc: BaseException | None = None) -> bool:
    """Whether the soft time limit struck inside the verifier though it did not reach the task. pyHanko
    turns any exception inside some of its parsers into its own (pdf_utils.generic: a dictionary key
    that fails to read becomes PdfReadError, which the verifier refuses as an unreadable file) or into a
    verdict (diff_analysis' metadata rule: SuspiciousModification): a verdict reached past the limit is
    not trusted, and the job fails naming the limit as when the exception reaches the task."""
    chain: BaseException | None = exc
    for _ in range(16):  # a bounded walk: a cycle of causes cannot hold the worker
        if chain is None:
            break
        if isinstance(chain, SoftTimeLimitExceeded):
            return True
        chain = chain.__cause__ or chain.__context__
    return _clock() - started >= settings.APPROVALS_VERIFY_SOFT_TIME_LIMIT_S


def verification_job_timed_out(*, job_id: int, seconds: int) -> str:
    """The soft time limit struck inside the verifier: the job fails naming the limit."""
    _finish(job_id, VerificationStatus.FAILED, error=_limit_message(seconds, "soft"))
    logger.warning("verification of an upload ran past %s s", seconds, extra={"verification_job": job_id})
    return str(VerificationStatus.FAILED)


def verification_jobs_expire(*, now: datetime | None = None) -> dict[str, int]:
    """Beat: a job no worker finished within APPROVALS_VERIFY_JOB_EXPIRE_S fails (its bytes
    emptied); finished job rows older than APPROVALS_VERIFY_JOB_KEEP_S are deleted."""
    now = now or timezone.now()
    expire_before = now - timedelta(seconds=settings.APPROVALS_VERIFY_JOB_EXPIRE_S)
    stuck = VerificationJob.objects.filter(
        Q(status=VerificationStatus.QUEUED) | Q(status=VerificationStatus.RUNNING), created_at__lt=expire_before
    )
    failed = stuck.update(
        status=VerificationStatus.FAILED,
        upload=b"",
        error=f"the file was not verified within {settings.APPROVALS_VERIFY_JOB_EXPIRE_S} s "
        "(APPROVALS_VERIFY_JOB_EXPIRE_S): no worker finished it; upload it again",
        finished_at=now,
        updated_at=now,
    )
    keep_after = now - timedelta(seconds=settings.APPROVALS_VERIFY_JOB_KEEP_S)
    deleted, _ = VerificationJob.objects.filter(status__in=FINISHED, finished_at__lt=keep_after).delete()
    return {"failed": failed, "deleted": deleted}
