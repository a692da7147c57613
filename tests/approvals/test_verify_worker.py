"""Issue 29, finding 2 (the rest of it): an uploaded packet is verified by the heavy worker under a
time limit, never in the web request. The API answers 202 and a status URL at once, whatever the
file costs to verify; the result appears there (and on the upload's web page); a verification past
its time limit ends as a failure naming the limit; the uploaded bytes are emptied once the worker is
done with them. Before: the web request ran pyHanko itself (31-47 s for a crafted upload)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from governance.approvals.models import PacketVerification, VerificationJob
from governance.approvals.services import verification_jobs_expire
from tests.approvals.conftest import as_file, run_verifications
from tests.approvals.crafted import Signed, signed_packet, with_fields_pointing_at_the_first_signature
from tests.approvals.slow_verify_hook import SLOW_MARKER
from tests.conftest import Personas, WorkerHandle, start_worker, stop_worker, wait_for_worker


@pytest.fixture(scope="module")
def signed() -> Signed:
    return signed_packet()


def _client(user: Any) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


@pytest.fixture
def no_verification_in_the_request(monkeypatch: pytest.MonkeyPatch) -> None:
    """The request only queues the file: in this (the web's) process, reaching the verifier is a
    failure (asserted by behaviour, not by timing the request)."""
    from governance.approvals import verification

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the upload was verified inside the request, not queued for the worker")

    monkeypatch.setattr(verification, "_verify_packet", refuse)


def _upload(client: APIClient, data: bytes) -> Any:
    return client.post("/api/v1/approvals/verify", {"file": as_file(data)}, format="multipart")


def _until_finished(client: APIClient, url: str, timeout_s: float = 60) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    while True:
        body: dict[str, Any] = client.get(url).json()
        if body["status"] not in ("queued", "running") or time.monotonic() > deadline:
            return body
        time.sleep(0.2)


# --- in this process: the request only queues ------------------------------------------------------


def test_an_upload_is_queued_not_verified_in_the_request(personas: Personas, org_pki: Any, signed: Signed) -> None:
    client = _client(personas.auditor)
    answer = _upload(client, signed.pdf)
    assert answer.status_code == 202, answer.json()
    body = answer.json()
    assert body["status"] == "queued"
    assert body["report"] is None
    assert answer["Location"] == body["status_url"] == f"/api/v1/approvals/verifications/{body['verification']}"
    assert not PacketVerification.objects.exists()  # nothing was verified by the web request
    job = VerificationJob.objects.get(code=body["verification"])
    assert bytes(job.upload) == signed.pdf
    assert job.upload_size == len(signed.pdf)

    assert run_verifications() == ["done"]
    done = client.get(body["status_url"]).json()
    assert done["status"] == "done", done
    assert done["report"]["pdf_sha256"] == job.upload_sha256
    assert [s["field"] for s in done["report"]["signatures"]] == ["LegalApproval", "EngineeringApproval"]
    assert done["report"]["all_valid"] is False  # signed under another organisation's CA
    job.refresh_from_db()
    assert bytes(job.upload) == b""  # the bytes are not kept once verified
    assert run_verifications() == []  # a second delivery finds nothing to do


def test_only_the_uploader_reads_a_verification(personas: Personas, org_pki: Any, signed: Signed) -> None:
    answer = _upload(_client(personas.auditor), signed.pdf)
    url = answer.json()["status_url"]
    for other in (personas.requester, personas.admin, personas.outsider):
        assert _client(other).get(url).status_code == 404, other.username
    assert _client(personas.auditor).get(url.replace(answer.json()["verification"][:8], "0" * 8)).status_code == 404
    assert _client(personas.auditor).get("/api/v1/approvals/verifications/not-a-uuid").status_code == 404
    browser = Client()
    browser.force_login(personas.requester)
    assert browser.get(f"/verify/{answer.json()['verification']}/").status_code == 404


def test_what_is_refused_at_once_and_what_the_worker_refuses(personas: Personas, org_pki: Any, signed: Signed) -> None:
    client = _client(personas.auditor)
    not_pdf = _upload(client, b"GIF89a" + b"\0" * 2000)
    assert not_pdf.status_code == 400
    assert "not a PDF" in not_pdf.json()["extra"]["fields"]["file"][0]
    crafted = _upload(client, with_fields_pointing_at_the_first_signature(signed.pdf, 20))
    assert crafted.status_code == 202
    run_verifications()
    body = client.get(crafted.json()["status_url"]).json()
    assert body["status"] == "refused"
    assert "22 signature fields" in body["error"]
    assert body["fields"]["file"] == [body["error"]]


def test_a_user_has_a_bounded_number_of_files_waiting(
    personas: Personas, org_pki: Any, signed: Signed, settings: Any
) -> None:
    settings.APPROVALS_VERIFY_MAX_PENDING = 2
    client = _client(personas.auditor)
    assert [_upload(client, signed.pdf).status_code for _ in range(3)] == [202, 202, 429]
    refused = _upload(client, signed.pdf).json()
    assert "at most 2" in refused["message"]
    assert "file" in refused["extra"]["fields"]
    assert _upload(_client(personas.legal), signed.pdf).status_code == 202  # another user's files
    run_verifications()
    assert _upload(client, signed.pdf).status_code == 202


def test_jobs_no_worker_took_fail_and_old_rows_go(personas: Personas, org_pki: Any, signed: Signed) -> None:
    client = _client(personas.auditor)
    stuck = _upload(client, signed.pdf).json()
    old = _upload(client, signed.pdf).json()
    run_verifications()
    later = timezone.now() + timedelta(seconds=1000)
    VerificationJob.objects.filter(code=old["verification"]).update(finished_at=timezone.now() - timedelta(days=2))
    assert verification_jobs_expire(now=later) == {"failed": 0, "deleted": 1}
    # the first one was verified above too; queue one more and let it sit past the expiry
    waiting = _upload(client, signed.pdf).json()
    assert verification_jobs_expire(now=later) == {"failed": 1, "deleted": 0}
    body = client.get(waiting["status_url"]).json()
    assert body["status"] == "failed"
    assert "APPROVALS_VERIFY_JOB_EXPIRE_S" in body["error"]
    assert bytes(VerificationJob.objects.get(code=waiting["verification"]).upload) == b""
    assert client.get(stuck["status_url"]).json()["status"] == "done"


LIMIT_ERROR = (
    "the file was not verified: verification ran past its time limit of {s} s (APPROVALS_VERIFY_SOFT_TIME_LIMIT_S)"
)


def test_a_time_limit_pyhanko_swallowed_still_fails_naming_the_limit(
    personas: Personas, org_pki: Any, signed: Signed, monkeypatch: pytest.MonkeyPatch, settings: Any
) -> None:
    """pyHanko turns any exception inside some of its parsers into its own: the soft time limit struck
    there became an unreadable-file refusal (or, in its metadata diff rule, a verdict). Before, the job
    ended `refused` or `done` with that verdict; now it fails naming the limit, as when the limit reaches
    the task (the worker test above)."""
    from celery.exceptions import SoftTimeLimitExceeded

    from governance.approvals.services import verifications
    from governance.approvals.verification import UploadRefused

    client = _client(personas.auditor)

    def refused_on_the_limit(data: bytes) -> Any:
        try:
            raise SoftTimeLimitExceeded()
        except SoftTimeLimitExceeded as exc:
            raise UploadRefused("not a readable PDF: Failed to read dictionary key") from exc

    monkeypatch.setattr(verifications, "verify_bytes", refused_on_the_limit)
    first = _upload(client, signed.pdf).json()
    assert run_verifications() == ["failed"]
    body = client.get(first["status_url"]).json()
    assert body["error"] == LIMIT_ERROR.format(s=settings.APPROVALS_VERIFY_SOFT_TIME_LIMIT_S)
    monkeypatch.undo()
    # A verdict reached only past the limit (the exception swallowed into a report) is not trusted.
    ticks = iter([0.0, settings.APPROVALS_VERIFY_SOFT_TIME_LIMIT_S + 1.0])
    monkeypatch.setattr(verifications, "_clock", lambda: next(ticks))
    late = _upload(client, signed.pdf).json()
    assert run_verifications() == ["failed"]
    assert client.get(late["status_url"]).json()["error"] == LIMIT_ERROR.format(
        s=settings.APPROVALS_VERIFY_SOFT_TIME_LIMIT_S
    )
    assert not PacketVerification.objects.exists()
    monkeypatch.undo()
    ontime = _upload(client, signed.pdf).json()
    assert run_verifications() == ["done"]
    assert client.get(ontime["status_url"]).json()["status"] == "done"


def test_the_web_page_follows_the_worker(personas: Personas, org_pki: Any, signed: Signed) -> None:
    browser = Client()
    browser.force_login(personas.auditor)
    from django.core.files.uploadedfile import SimpleUploadedFile

    posted = browser.post("/verify/", {"file": SimpleUploadedFile("p.pdf", signed.pdf, "application/pdf")})
    assert posted.status_code == 302
    waiting = browser.get(posted["Location"]).content.decode()
    assert 'data-status="queued"' in waiting
    assert 'hx-trigger="every 2s"' in waiting  # asks again until the worker is done
    chinese = Client()
    chinese.force_login(personas.auditor)
    chinese.post("/i18n/setlang/", {"language": "zh-hans", "next": "/"})
    page = chinese.get(posted["Location"]).content.decode()
    assert "正在等待验证" in page
    run_verifications()
    done = browser.get(posted["Location"]).content.decode()
    assert 'data-status="done"' in done
    assert 'id="report"' in done
    assert 'hx-trigger="every 2s"' not in done


# --- through real workers ----------------------------------------------------------------------


def _route_to(queue: str, settings: Any) -> None:
    settings.CELERY_HEAVY_QUEUE = queue  # the heavy route, read when the outbox sends


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_a_crafted_upload_answers_at_once_and_the_worker_refuses_it(
    celery_worker: WorkerHandle,
    settings: Any,
    personas: Personas,
    org_pki: Any,
    signed: Signed,
    no_verification_in_the_request: None,
) -> None:
    _route_to(celery_worker.queue, settings)
    client = _client(personas.auditor)
    answer = _upload(client, with_fields_pointing_at_the_first_signature(signed.pdf, 20))
    assert answer.status_code == 202, answer.json()
    body = _until_finished(client, answer.json()["status_url"])
    assert body["status"] == "refused", body
    assert "22 signature fields" in body["error"]
    good = _upload(client, signed.pdf)
    assert _until_finished(client, good.json()["status_url"])["status"] == "done"


@pytest.fixture(scope="module")
def limited_worker(
    django_db_setup: None, django_db_blocker: object, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[WorkerHandle]:
    """A prefork worker (the pool that enforces time limits) with a 2 s verification limit, whose
    verifier loops on a file carrying SLOW_MARKER (tests/approvals/slow_verify_hook.py)."""
    import uuid

    queue = f"test-limit-{uuid.uuid4().hex[:10]}"
    log_path = Path(tmp_path_factory.mktemp("limited")) / "worker.log"
    process = start_worker(
        queue,
        log_path,
        pool="prefork",
        extra_env={"APPROVALS_VERIFY_SOFT_TIME_LIMIT_S": "2"},
        include=("tests.approvals.slow_verify_hook",),
    )
    try:
        wait_for_worker(process, queue, log_path)
        yield WorkerHandle(queue=queue, process=process, log_path=log_path)
    finally:
        stop_worker(process)


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_a_verification_past_its_time_limit_fails_naming_it(
    limited_worker: WorkerHandle,
    settings: Any,
    personas: Personas,
    org_pki: Any,
    signed: Signed,
    no_verification_in_the_request: None,
) -> None:
    _route_to(limited_worker.queue, settings)
    client = _client(personas.auditor)
    answer = _upload(client, signed.pdf + SLOW_MARKER + b"\n")
    assert answer.status_code == 202, answer.json()
    started = time.monotonic()
    body = _until_finished(client, answer.json()["status_url"], timeout_s=30)
    assert body["status"] == "failed", body
    assert body["error"] == (
        "the file was not verified: verification ran past its time limit of 2 s (APPROVALS_VERIFY_SOFT_TIME_LIMIT_S)"
    )
    assert time.monotonic() - started < 15
    assert bytes(VerificationJob.objects.get(code=body["verification"]).upload) == b""
    assert not PacketVerification.objects.exists()
    # the worker goes on: the next file is verified
    good = _upload(client, signed.pdf)
    assert _until_finished(client, good.json()["status_url"])["status"] == "done"
