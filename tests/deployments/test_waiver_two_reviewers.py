"""Issue 13, governance rules: a blocker (a prohibited use) is waived only with the licensor's
written permission attached and two distinct legal reviewers; other waivers keep one reviewer."""

from __future__ import annotations

import hashlib
from datetime import timedelta
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.utils import timezone

from governance.approvals.packet_render import render_html
from governance.approvals.services import packet_input
from governance.artifacts.services import artifact_register
from governance.audit.actions import AuditAction
from governance.audit.models import AuditEvent
from governance.core.errors import ApplicationError
from governance.deployments.models import DeploymentRequest
from governance.deployments.readiness import ReadinessState, readiness
from governance.deployments.services.waivers import PermissionDocument, waiver_grant
from tests.conftest import Personas, make_user
from tests.deployments.conftest import FACTS, Flow, digest_of

PERMISSION = b"%PDF-1.7\nGoogle LLC grants Acme a written exception to the Prohibited Use Policy, 2.c.ii.\n"


@pytest.fixture
def gemma_request(flow: Flow, personas: Personas) -> str:
    artifact = artifact_register(
        actor=personas.requester,
        team=personas.team,
        data={
            "name": "gemma-3-27b-it",
            "source_repo": "google/gemma-3-27b-it",
            "revision": "abc123",
            "weights_digest": digest_of("gemma"),
            "license": "gemma",
            "architecture_key": "qwen3-30b-a3b",
        },
    )
    return flow.to_review(artifact, {**FACTS, "intended_uses": ["malware"]})


def _blocker(body: dict[str, Any]) -> dict[str, Any]:
    return next(
        f
        for e in body["licenses"]
        for f in e["findings"]
        if f["code"] == "aup.prohibited_use" and f["params"]["category"] == "malware"
    )


def _waiver_body(clause: str, **extra: Any) -> dict[str, Any]:
    return {
        "license": "gemma",
        "finding_code": "aup.prohibited_use",
        "clause": clause,
        "reason": "Google's written exception for our red-team sandbox",
        "expires_at": (timezone.now() + timedelta(days=30)).isoformat(),
        **extra,
    }


def _upload(content: bytes = PERMISSION, name: str = "google-exception.pdf") -> SimpleUploadedFile:
    return SimpleUploadedFile(name, content, content_type="application/pdf")


def test_one_legal_reviewer_cannot_waive_a_prohibited_use(flow: Flow, personas: Personas, gemma_request: str) -> None:
    code = gemma_request
    before = flow.get(personas.legal, code)
    clause = _blocker(before)["clause"]
    assert _blocker(before)["severity"] == "blocker"
    # Today's attack: one reviewer, a JSON body, no permission: refused, naming the field.
    alone = flow.post(personas.legal, code, "waivers", _waiver_body(clause))
    assert alone.status_code == 400, alone.json()
    assert "permission_document" in alone.json()["extra"]["fields"]
    # A blocker's waiver names the clause it waives (a blank clause would waive every category).
    blank = flow.client(personas.legal).post(
        f"/api/v1/deployments/{code}/waivers", {**_waiver_body(""), "permission_document": _upload()}
    )
    assert blank.status_code == 400
    assert "clause" in blank.json()["extra"]["fields"]
    empty = flow.client(personas.legal).post(
        f"/api/v1/deployments/{code}/waivers", {**_waiver_body(clause), "permission_document": _upload(b"")}
    )
    assert empty.status_code == 400
    assert "permission_document" in empty.json()["extra"]["fields"]
    assert DeploymentRequest.objects.get(code=code).waivers.count() == 0

    proposed = flow.client(personas.legal).post(
        f"/api/v1/deployments/{code}/waivers", {**_waiver_body(clause), "permission_document": _upload()}
    )
    assert proposed.status_code == 201, proposed.json()
    body = proposed.json()
    # Proposed, not in force: the blocker stands and the evidence (so any sign-off) is unchanged.
    assert any(b.get("finding") == "aup.prohibited_use" for b in body["blockers"]), body["blockers"]
    assert _blocker(body)["waived"] is False
    assert body["evidence_digest"] == before["evidence_digest"]
    [waiver] = body["waivers"]
    sha = hashlib.sha256(PERMISSION).hexdigest()
    assert waiver["status"] == "awaiting_confirmation"
    assert waiver["active"] is False
    assert waiver["permission"] == {"name": "google-exception.pdf", "size": len(PERMISSION), "sha256": sha}
    assert waiver["granted_by"] == personas.legal.username
    assert waiver["confirmed_by"] is None
    event = AuditEvent.objects.get(action=AuditAction.WAIVER_PROPOSED, object_id=code)
    assert event.data["permission"]["sha256"] == sha
    assert not AuditEvent.objects.filter(action=AuditAction.WAIVER_GRANTED, object_id=code).exists()

    confirm = f"waivers/{waiver['code']}/confirm"
    # The proposer cannot confirm their own proposal; a requester is no legal reviewer.
    assert flow.post(personas.legal, code, confirm).status_code == 403
    assert flow.post(personas.requester, code, confirm).status_code == 403
    assert flow.post(personas.engineer, code, confirm).status_code == 403
    assert any(b.get("finding") == "aup.prohibited_use" for b in flow.get(personas.legal, code)["blockers"])

    second = make_user("legal2", "legal_reviewer")
    confirmed = flow.post(second, code, confirm)
    assert confirmed.status_code == 200, confirmed.json()
    body = confirmed.json()
    assert not any(b.get("finding") == "aup.prohibited_use" for b in body["blockers"])
    assert _blocker(body)["waived"] is True
    assert body["evidence_digest"] != before["evidence_digest"]
    [in_force] = body["waivers"]
    assert (in_force["status"], in_force["confirmed_by"]) == ("active", "legal2")
    # The evidence the sign-offs bind to names the document's digest and both reviewers.
    evidence = DeploymentRequest.objects.get(code=code).evidence
    assert evidence is not None
    [entry] = evidence["waivers"]
    assert entry["permission"]["sha256"] == sha
    assert (entry["granted_by"], entry["confirmed_by"], entry["severity"]) == ("legal", "legal2", "blocker")
    assert AuditEvent.objects.get(action=AuditAction.WAIVER_CONFIRMED, object_id=code).data["proposed_by"] == "legal"
    assert flow.post(second, code, confirm).status_code == 409  # once

    # The approval packet lists the waiver with the permission digest and both reviewers.
    html = render_html(packet_input(DeploymentRequest.objects.get(code=code)))
    assert sha in html
    assert "legal2" in html
    assert "google-exception.pdf" in html


def test_a_permission_file_name_with_hidden_characters_is_refused(
    flow: Flow, personas: Personas, gemma_request: str
) -> None:
    """Issue 43: the file name is printed in the signed packet; "exception<U+202E>fdp.exe" would
    print as "exceptionexe.pdf" reversed. Django's multipart parser drops unprintable characters
    from an upload's name; the service refuses them from any other caller (governance.core.names)."""
    clause = _blocker(flow.get(personas.legal, gemma_request))["clause"]
    with pytest.raises(ApplicationError) as refused:
        waiver_grant(
            deployment=DeploymentRequest.objects.get(code=gemma_request),
            actor=personas.legal,
            license_key="gemma",
            finding_code="aup.prohibited_use",
            clause=clause,
            reason="Google's written exception",
            expires_at=timezone.now() + timedelta(days=30),
            permission=PermissionDocument(name="exception\u202efdp.exe", content=PERMISSION),
        )
    assert "U+202E" in str(refused.value.extra["fields"]["permission_document"])
    assert DeploymentRequest.objects.get(code=gemma_request).waivers.count() == 0
    # Through the API the same name arrives without the override, and is stored as it prints.
    proposed = flow.client(personas.legal).post(
        f"/api/v1/deployments/{gemma_request}/waivers",
        {**_waiver_body(clause), "permission_document": _upload(name="exception\u202efdp.exe")},
    )
    assert proposed.status_code == 201, proposed.json()
    assert proposed.json()["waivers"][0]["permission"]["name"] == "exceptionfdp.exe"


def test_a_changed_permission_document_is_another_evidence_digest(
    flow: Flow, personas: Personas, gemma_request: str
) -> None:
    code = gemma_request
    clause = _blocker(flow.get(personas.legal, code))["clause"]
    second = make_user("legal2", "legal_reviewer")
    digests = []
    for content in (PERMISSION, PERMISSION + b"amended\n"):
        response = flow.client(personas.legal).post(
            f"/api/v1/deployments/{code}/waivers", {**_waiver_body(clause), "permission_document": _upload(content)}
        )
        assert response.status_code == 201, response.json()
        waiver = response.json()["waivers"][-1]["code"]
        assert flow.post(second, code, f"waivers/{waiver}/confirm").status_code == 200
        digests.append(DeploymentRequest.objects.get(code=code).evidence_digest)
    assert digests[0] != digests[1]


def test_gate_keeps_a_blocker_whose_waiver_lacks_permission_or_second_reviewer() -> None:
    """The readiness rule (the gate's too) reads stored evidence; an evidence document with a one-reviewer waiver (written
    before this rule, or forged) does not clear a blocker."""
    finding = {"code": "aup.prohibited_use", "severity": "blocker", "clause": "PUP 2", "message": "m"}
    waiver = {
        "license": "gemma",
        "code": "aup.prohibited_use",
        "clause": "PUP 2",
        "severity": "blocker",
        "expires_at": (timezone.now() + timedelta(days=1)).isoformat(),
        "granted_by": "legal",
        "confirmed_by": None,
        "permission": None,
    }

    def reasons(w: dict[str, Any]) -> list[str]:
        evidence = {"licenses": [{"license": "gemma", "findings": [finding]}], "waivers": [w], "obligations": []}
        state = ReadinessState(evidence=evidence, evidence_digest="d", signatures={})
        return [r.code for r in readiness(state, timezone.now()) if r.code.startswith("license.")]

    assert reasons(waiver) == ["license.blocker"]
    assert reasons({**waiver, "confirmed_by": "legal2"}) == ["license.blocker"]
    assert reasons({**waiver, "confirmed_by": "legal2", "permission": {"sha256": "ab" * 32}}) == []


def test_waiver_proposal_mails_the_other_legal_reviewers(
    flow: Flow, personas: Personas, gemma_request: str, mailoutbox: list[Any], django_capture_on_commit_callbacks: Any
) -> None:
    code = gemma_request
    personas.legal.email = "legal@example.com"
    personas.legal.save()
    second = make_user("legal2", "legal_reviewer")
    second.email = "legal2@example.com"
    second.save()
    clause = _blocker(flow.get(personas.legal, code))["clause"]
    mailoutbox.clear()
    with django_capture_on_commit_callbacks(execute=True):
        response = flow.client(personas.legal).post(
            f"/api/v1/deployments/{code}/waivers", {**_waiver_body(clause), "permission_document": _upload()}
        )
    assert response.status_code == 201
    assert [m.to for m in mailoutbox] == [["legal2@example.com"]]
    assert hashlib.sha256(PERMISSION).hexdigest() in mailoutbox[0].body
    assert f"waivers/{response.json()['waivers'][0]['code']}/confirm" in mailoutbox[0].body
