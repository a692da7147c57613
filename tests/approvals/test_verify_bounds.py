"""Findings 2, 3, 4 and 7 on the verifier: a crafted upload is refused (400 naming the problem)
before any costly work, verification needs a role and is throttled per user, a request's timeline
shows only verifications by those who may read it, and "evidence current" needs a valid packet.

The signed packet here is made in memory (no database, no request flow): one per module."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

from governance.approvals import pki
from governance.approvals.packet_render import html_to_pdfa, render_packet
from governance.approvals.verification import UploadRefused, VerifyLimits, verify_packet
from governance.audit.actions import AuditAction
from governance.audit.models import AuditEvent
from governance.deployments.models import DeploymentRequest
from tests.approvals.conftest import as_file, run_verifications
from tests.approvals.crafted import Signed, packet_input, signed_packet, with_fields_pointing_at_the_first_signature
from tests.conftest import Personas


@pytest.fixture(scope="module")
def signed() -> Signed:
    return signed_packet()


def _verify(signed: Signed, data: bytes, limits: VerifyLimits | None = None) -> Any:
    return verify_packet(data, trust_root=signed.ca, crls=[signed.crl], limits=limits)


def test_the_signed_packet_verifies(signed: Signed) -> None:
    assert _verify(signed, signed.pdf).all_valid


def test_the_report_holds_plain_values_not_the_parsed_file(signed: Signed) -> None:
    """The stored verification is `as_dict()` of the report (dataclasses.asdict, a deep copy). The
    field name was pyHanko's string object, which refers to the parsed PDF: each stored report
    deep-copied the whole document (44 ms for this small packet, growing with the file: the largest
    single cost of an approval's last signature in the worker after pyHanko's own work)."""
    report = _verify(signed, signed.pdf)
    for signature in report.signatures:
        for name, value in vars_of(signature).items():
            assert type(value) in (str, bool, type(None)), (name, type(value))
    assert report.as_dict()["signatures"][0]["field"] in ("LegalApproval", "EngineeringApproval")


def vars_of(report: Any) -> dict[str, Any]:
    return {name: getattr(report, name) for name in report.__slots__}


def test_twenty_fields_on_one_signature_are_refused_before_any_is_validated(
    signed: Signed, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Counted, not timed: pyHanko's validation is the costly step (each field would be validated
    again), and a refused upload reaches it not once."""
    from governance.approvals import verification

    validated: list[object] = []
    real = verification.validate_pdf_signature

    def counting(*args: Any, **kwargs: Any) -> Any:
        validated.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(verification, "validate_pdf_signature", counting)
    crafted = with_fields_pointing_at_the_first_signature(signed.pdf, 20)
    with pytest.raises(UploadRefused, match="22 signature fields"):
        _verify(signed, crafted)
    assert validated == []
    _verify(signed, signed.pdf)
    assert len(validated) == 2  # the count reaches the validation: the good packet's two signatures
    with pytest.raises(UploadRefused, match="same signature value"):
        _verify(signed, with_fields_pointing_at_the_first_signature(signed.pdf, 1))


def test_too_many_revisions_are_refused(signed: Signed) -> None:
    with pytest.raises(UploadRefused, match="revisions"):
        _verify(signed, signed.pdf, VerifyLimits(max_revisions=3))


def test_deeply_nested_evidence_is_a_refusal_not_a_crash() -> None:
    data = html_to_pdfa("<p>x</p>", b"[" * 200_000)
    ca = pki.make_root_ca("Other Org")
    with pytest.raises(UploadRefused, match="nests deeper"):
        verify_packet(data, trust_root=ca.certificate, crls=[])


def test_a_deflate_bomb_is_decoded_only_up_to_the_limit() -> None:
    data = html_to_pdfa("<p>x</p>", b'{"evidence": "' + b" " * (2 * 1024 * 1024) + b'"}')
    assert len(data) < 100_000  # it compresses well: that is the attack
    ca = pki.make_root_ca("Other Org")
    with pytest.raises(UploadRefused, match="decodes to more than 1048576 bytes"):
        verify_packet(data, trust_root=ca.certificate, crls=[], limits=VerifyLimits(max_evidence_bytes=1024 * 1024))


def test_garbage_is_refused_naming_the_problem() -> None:
    ca = pki.make_root_ca("Other Org")
    with pytest.raises(UploadRefused, match="not a readable PDF"):
        verify_packet(b"%PDF-1.7\n" + b"(" * 5000, trust_root=ca.certificate, crls=[])


# --- the API ---------------------------------------------------------------------------------


def _client(user: Any) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def _upload(user: Any, data: bytes) -> Any:
    return _client(user).post("/api/v1/approvals/verify", {"file": as_file(data)}, format="multipart")


def _verified(user: Any, data: bytes) -> Any:
    """Upload (202), the heavy worker's part run here, then the status URL's answer."""
    queued = _upload(user, data)
    assert queued.status_code == 202, queued.json()
    run_verifications()
    return _client(user).get(queued.json()["status_url"])


def test_the_worker_refuses_a_crafted_file_naming_the_problem(personas: Personas, org_pki: Any) -> None:
    response = _verified(personas.auditor, html_to_pdfa("<p>x</p>", b"[" * 200_000))
    assert response.status_code == 200, response.json()
    body = response.json()
    assert body["status"] == "refused"
    assert body["report"] is None
    assert "nests deeper" in body["fields"]["file"][0]


def test_verifying_needs_a_role(personas: Personas, org_pki: Any) -> None:
    response = _upload(personas.outsider, b"%PDF-1.7 nothing")
    assert response.status_code == 403


def test_verifying_is_throttled_per_user(personas: Personas, org_pki: Any, settings: Any) -> None:
    from django.core.cache import cache

    cache.clear()
    settings.VERIFY_RATE = "2/m"
    statuses = [_upload(personas.auditor, b"not a PDF").status_code for _ in range(3)]
    assert statuses == [400, 400, 429]
    assert _upload(personas.requester, b"not a PDF").status_code == 400  # another user's budget
    cache.clear()


def test_the_timeline_shows_only_uploads_by_readers_and_forgeries_are_not_current(
    personas: Personas, org_pki: Any, artifacts: Any
) -> None:
    from tests.deployments.conftest import Flow

    code = Flow(personas).create(artifacts["apache"])["code"]
    deployment = DeploymentRequest.objects.get(code=code)
    forged = render_packet(packet_input(code, deployment.evidence_digest))  # states the current digest, unsigned
    outsider_upload = _verified(personas.other_requester, forged)
    assert outsider_upload.json()["status"] == "done", outsider_upload.json()
    assert outsider_upload.json()["report"]["evidence_current"] is False
    assert not AuditEvent.objects.filter(action=AuditAction.PACKET_VERIFIED, object_id=code).exists()
    own = _verified(personas.requester, forged)
    assert own.json()["status"] == "done"
    assert own.json()["report"]["evidence_current"] is False  # not a trusted, valid packet
    assert AuditEvent.objects.filter(action=AuditAction.PACKET_VERIFIED, object_id=code).count() == 1
