"""The data migration of issue 27: rows stored twice before (deployments.ReviewDecision and
approvals.SignOff) become one sign-off and its PDF signature, every fact kept, a void recorded on
either side kept, and the API's sign-off code unchanged."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [
    ("deployments", "0004_request_withdrawn_status"),
    ("approvals", "0003_signoff_signature_status_packet_rendering"),
]
AFTER = [("deployments", "0005_signoff_one_record"), ("approvals", "0006_packetsignature_drop_decision_copies")]
DIGEST = "a" * 64
DECIDED = datetime(2026, 11, 3, 9, 30, tzinfo=UTC)


def _migrate(targets: list[tuple[str, str]]) -> MigrationExecutor:
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)
    return MigrationExecutor(connection)


def _old_rows(state_apps) -> dict[str, uuid.UUID]:
    User = state_apps.get_model("auth", "User")
    Team = state_apps.get_model("core", "Team")
    Artifact = state_apps.get_model("artifacts", "ModelArtifact")
    Request = state_apps.get_model("deployments", "DeploymentRequest")
    Decision = state_apps.get_model("deployments", "ReviewDecision")
    Packet = state_apps.get_model("approvals", "ApprovalPacket")
    Certificate = state_apps.get_model("approvals", "SigningCertificate")
    SignOff = state_apps.get_model("approvals", "SignOff")
    legal = User.objects.create(username="lena", first_name="Lena", last_name="Kraus")
    engineer = User.objects.create(username="ede")
    team = Team.objects.create(name="search")
    License = state_apps.get_model("licenses", "License")
    license = License.objects.create(key="one-record-test", name="t", source_url="https://example.org/license")
    version = state_apps.get_model("licenses", "LicenseVersion").objects.create(
        license=license, version="1", effective_date=DECIDED.date()
    )
    artifact = Artifact.objects.create(
        team=team,
        name="m",
        source_repo="org/m",
        revision="r",
        weights_digest="sha256:" + "b" * 64,
        license=license,
        license_version=version,
    )
    request = Request.objects.create(
        team=team,
        requester=engineer,
        artifact=artifact,
        product_name="p",
        facts={},
        serving_plan={},
        evidence_digest=DIGEST,
    )
    packet = Packet.objects.create(
        deployment=request, evidence_digest=DIGEST, status="partial", pdf=b"%PDF", pdf_sha256="c" * 64
    )
    codes = {}
    for user, role, voided_side in ((legal, "legal", None), (engineer, "engineering", "approvals")):
        certificate = Certificate.objects.create(
            user=user,
            role=role,
            serial_number=str(uuid.uuid4().int),
            subject=user.username,
            certificate_pem="-",
            encrypted_key_pem="-",
            fingerprint_sha256=uuid.uuid4().hex * 2,
            not_after=DECIDED,
        )
        decision = Decision.objects.create(
            request=request, role=role, verdict="approve", reviewer=user, evidence_digest=DIGEST, comment="ok"
        )
        signoff = SignOff.objects.create(
            deployment=request,
            review_decision=decision,
            packet=packet,
            role=role,
            decision="approve",
            signer=user,
            signer_name=f"printed {user.username}",
            meaning=f"I, {user.username}, approve",
            comment="ok",
            signed_at=DECIDED,
            evidence_digest=DIGEST,
            certificate=certificate,
            field_name=f"{role}Approval",
            pdf_sha256="d" * 64 if role == "legal" else "",
            auth_method="oidc_step_up" if role == "legal" else "password",
            signature_status="signed" if role == "legal" else "failed",
            signature_error="" if role == "legal" else "did not verify",
            voided_at=DECIDED if voided_side == "approvals" else None,
            void_reason="did not verify" if voided_side == "approvals" else "",
        )
        codes[role] = signoff.code
    return codes


def test_each_decision_becomes_one_signoff_and_its_signature() -> None:
    executor = _migrate(BEFORE)
    try:
        codes = _old_rows(executor.loader.project_state(BEFORE).apps)
        state_apps = _migrate(AFTER).loader.project_state(AFTER).apps
        SignOff = state_apps.get_model("deployments", "SignOff")
        Signature = state_apps.get_model("approvals", "PacketSignature")
        legal = SignOff.objects.get(role="legal")
        assert legal.code == codes["legal"]  # the API's sign-off code is kept
        assert (legal.decision, legal.signer.username, legal.evidence_digest, legal.comment) == (
            "approve",
            "lena",
            DIGEST,
            "ok",
        )
        assert (legal.signer_name, legal.meaning, legal.signed_at, legal.auth_method) == (
            "printed lena",
            "I, lena, approve",
            DECIDED,
            "oidc_step_up",
        )
        assert legal.voided_at is None
        signature = Signature.objects.get(signoff=legal)
        assert (signature.status, signature.pdf_sha256, signature.field_name) == ("signed", "d" * 64, "legalApproval")
        assert signature.code != legal.code
        # a void recorded only on the approvals side stays a void
        engineering = SignOff.objects.get(role="engineering")
        assert engineering.voided_at == DECIDED
        assert engineering.void_reason == "did not verify"
        assert Signature.objects.get(signoff=engineering).status == "failed"
        assert SignOff.objects.count() == 2
        assert Signature.objects.count() == 2
    finally:
        # Leave the schema as the other tests expect it: every app at its latest migration (AFTER
        # alone would leave out what later migrations added, e.g. the request's language column,
        # and every test after this one on the same database would fail).
        _migrate(MigrationExecutor(connection).loader.graph.leaf_nodes())
