"""Approvals API: verify an uploaded packet, download packets, the CA certificate and the CRL,
and sign off (the same service as the deployments review endpoint)."""

from __future__ import annotations

from typing import Any, cast

from django.conf import settings
from django.contrib.auth.models import User
from django.http import HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.throttling import BaseThrottle, UserRateThrottle
from rest_framework.views import APIView

from governance.approvals import selectors, services
from governance.approvals.attempts import SignOffRateThrottle, signoff_attempt
from governance.approvals.choices import ROLE_GROUPS, PacketStatus, VerificationStatus
from governance.approvals.models import ApprovalPacket, VerificationJob
from governance.core.errors import NotFoundError, PermissionDeniedError, invalid_input
from governance.core.permissions import HasAnyRole
from governance.core.roles import has_role
from governance.core.serializers import StrictSerializer
from governance.deployments.api import DeploymentOutputSerializer
from governance.deployments.choices import ReviewRole, SignOffDecision
from governance.deployments.models import DeploymentRequest, SignOff
from governance.deployments.selectors import deployment_get
from governance.sso.selectors import step_up_of_session


def _user(request: Request) -> User:
    return cast(User, request.user)


def _pdf_response(data: bytes, filename: str) -> HttpResponse:
    response = HttpResponse(data, content_type="application/pdf")
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response


class VerifyInputSerializer(serializers.Serializer):
    file = serializers.FileField(help_text="the approval packet PDF")


class VerifyRateThrottle(UserRateThrottle):
    """Verifying costs CPU: uploads per user (VERIFY_THROTTLE_RATE), the web form counted in the same
    budget (it calls this throttle too)."""

    scope = "verify"

    def get_rate(self) -> str:
        return str(settings.VERIFY_RATE)


def verification_queue(upload: Any, actor: User) -> VerificationJob:
    """The API's and the web form's upload: bounded, then queued for the heavy worker (no parsing
    here). The size is checked before the bytes are read."""
    if upload.size > settings.APPROVALS_MAX_UPLOAD_BYTES:
        raise invalid_input("file", f"larger than {settings.APPROVALS_MAX_UPLOAD_BYTES} bytes")
    return services.verification_job_create(data=upload.read(), actor=actor)


def verification_dict(job: VerificationJob) -> dict[str, Any]:
    """A verification job as the API answers it: `report` once done, `error` (and `fields.file`
    for a refused file) when it ends without one."""
    body: dict[str, Any] = {
        "verification": str(job.code),
        "status": job.status,
        "status_url": selectors.verification_url(job),
        "file_sha256": job.upload_sha256,
        "file_size": job.upload_size,
        "queued_at": job.created_at,
        "started_at": job.started_at,
        "finished_at": job.finished_at,
        "time_limit_s": settings.APPROVALS_VERIFY_SOFT_TIME_LIMIT_S,
        "report": job.result if job.status == VerificationStatus.DONE else None,
        "error": job.error,
    }
    if job.status == VerificationStatus.REFUSED:
        body["fields"] = {"file": [job.error]}
    return body


class VerifyApi(APIView):
    """Anyone with a role may verify a packet: the answer says only what the file itself proves,
    plus whether its evidence digest is still the request's current one (for a valid packet).
    The heavy worker verifies the file (bounded by APPROVALS_VERIFY_*, under a time limit); this
    answers 202 at once with the job and its status URL."""

    permission_classes = [HasAnyRole]
    parser_classes = [MultiPartParser, FormParser]
    throttle_classes = [VerifyRateThrottle]

    @extend_schema(
        request={"multipart/form-data": VerifyInputSerializer},
        responses={202: OpenApiTypes.OBJECT},
        summary="Verify an approval packet PDF: 202 and a status URL; the heavy worker verifies it",
    )
    def post(self, request: Request) -> Response:
        serializer = VerifyInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        job = verification_queue(serializer.validated_data["file"], _user(request))
        body = verification_dict(job)
        return Response(body, status=202, headers={"Location": body["status_url"]})


class VerificationApi(APIView):
    """An upload's verification, for the user who uploaded it (404 for anyone else)."""

    permission_classes = [IsAuthenticated]

    @extend_schema(responses=OpenApiTypes.OBJECT, summary="Status and report of an uploaded packet's verification")
    def get(self, request: Request, code: str) -> Response:
        job = selectors.verification_job_of(_user(request), code)
        if job is None:
            raise NotFoundError("no such verification")
        return Response(verification_dict(job))


def _packet_status(deployment: DeploymentRequest, packet: ApprovalPacket) -> Response:
    """202 while the heavy worker renders the packet, 200 once it has a PDF."""
    return Response(
        {
            "packet": str(packet.code),
            "pdf_sha256": packet.pdf_sha256,
            "status": packet.status,
            "evidence_digest": packet.evidence_digest,
            "pdf_url": selectors.packet_url(deployment),
            "status_url": selectors.signoffs_url(deployment),
        },
        status=202 if packet.status == PacketStatus.RENDERING else 200,
    )


class PacketApi(APIView):
    """GET: the request's live packet (latest signed revision). POST (reviewers): render it now."""

    permission_classes = [IsAuthenticated]

    @extend_schema(
        responses={(200, "application/pdf"): OpenApiResponse(OpenApiTypes.BINARY)},
        summary="Download the packet PDF (latest revision)",
    )
    def get(self, request: Request, code: str) -> HttpResponse:
        deployment = deployment_get(_user(request), code)
        packet = selectors.live_packet(deployment, with_pdf=True)
        if packet is None:
            raise NotFoundError("no approval packet for this request yet")
        if packet.status == PacketStatus.RENDERING:
            return _packet_status(deployment, packet)
        return _pdf_response(bytes(packet.pdf), f"approval-{deployment.code}-{packet.pdf_sha256[:12]}.pdf")

    @extend_schema(
        request=None,
        responses=OpenApiTypes.OBJECT,
        summary="Render the packet before signing (reviewers): 202 while the heavy worker renders it",
    )
    def post(self, request: Request, code: str) -> Response:
        deployment = deployment_get(_user(request), code)
        packet = services.packet_render_for_review(deployment=deployment, actor=_user(request))
        return _packet_status(deployment, packet)


class PacketByHashApi(APIView):
    """Any signed revision by its SHA-256 (the audit bundle lists these), for those who may see the request."""

    permission_classes = [IsAuthenticated]

    @extend_schema(
        responses={(200, "application/pdf"): OpenApiResponse(OpenApiTypes.BINARY)},
        summary="A signed packet revision by its SHA-256",
    )
    def get(self, request: Request, sha256: str) -> HttpResponse:
        packet = selectors.packet_by_sha256(sha256)
        if packet is None:
            raise NotFoundError("no approval packet with this SHA-256")
        # 404 unless the user may see the request, before the PDF is loaded (or its revisions hashed)
        deployment = deployment_get(_user(request), packet.deployment.code)
        data = selectors.pdf_revision(packet, sha256)
        if data is None:
            raise NotFoundError("no approval packet with this SHA-256")
        return _pdf_response(data, f"approval-{deployment.code}-{sha256[:12]}.pdf")


class SignOffInputSerializer(StrictSerializer):
    role = serializers.ChoiceField(choices=ReviewRole.choices)
    decision = serializers.ChoiceField(choices=SignOffDecision.choices)
    # Left out under single sign-on: a fresh sign-in at the provider (GET /oidc/step-up/) re-authenticates.
    password = serializers.CharField(
        max_length=4096, trim_whitespace=False, write_only=True, required=False, allow_blank=True, default=""
    )
    evidence_digest = serializers.RegexField(r"^[0-9a-f]{64}$")
    comment = serializers.CharField(max_length=4000, required=False, allow_blank=True, default="")


def _attempt(
    request: Request, deployment: DeploymentRequest, user: User, role: str, decision: str, data: dict[str, Any]
) -> SignOff:
    """One sign-off attempt under django-axes' lockout (the throttle already spent one of the budget)."""
    return signoff_attempt(
        request._request,
        user,
        lambda: services.sign_off(
            deployment=deployment,
            user=user,
            role=role,
            decision=decision,
            password=data["password"],
            step_up_id=step_up_of_session(request._request, user),
            evidence_digest=data["evidence_digest"],
            comment=data.get("comment", ""),
        ),
        lambda: services.signoff_refuse_locked_out(
            deployment=deployment, user=user, role=role, decision=decision, evidence_digest=data["evidence_digest"]
        ),
    )


def signoff_dict(signoff: SignOff) -> dict[str, Any]:
    """A sign-off as the API shows it: the decision (deployments.SignOff) and its PDF signature."""
    signature = getattr(signoff, "signature", None)
    return {
        "code": str(signoff.code),
        "role": signoff.role,
        "decision": signoff.decision,
        "signer": signoff.signer.get_username(),
        "signer_name": signoff.signer_name,
        "meaning": signoff.meaning,
        "comment": signoff.comment,
        "signed_at": signoff.signed_at,
        "evidence_digest": signoff.evidence_digest,
        "certificate_sha256": signature.certificate.fingerprint_sha256 if signature else "",
        "pdf_sha256": signature.pdf_sha256 if signature else "",
        "auth_method": signoff.auth_method,
        # pending until the heavy worker signed the packet
        "signature_status": signature.status if signature else "",
        "signature_error": signature.error if signature else "",
        "voided_at": signoff.voided_at,
        "void_reason": signoff.void_reason,
    }


class SignOffApi(APIView):
    permission_classes = [IsAuthenticated]

    def get_throttles(self) -> list[BaseThrottle]:
        return [SignOffRateThrottle()] if self.request.method == "POST" else super().get_throttles()

    @extend_schema(responses=OpenApiTypes.OBJECT, summary="Sign-offs on a request and their meaning texts")
    def get(self, request: Request, code: str) -> Response:
        """The sign-offs of a request, and the meaning text each role would sign now."""
        user = _user(request)
        deployment = deployment_get(user, code)
        meanings = {
            role: {decision: selectors.signoff_meaning(role, decision, user) for decision in SignOffDecision.values}
            for role in ReviewRole.values
        }
        packet = selectors.live_packet(deployment)
        return Response(
            {
                "evidence_digest": deployment.evidence_digest,
                "deployment_status": deployment.status,
                "packet_status": packet.status if packet is not None else None,
                "meanings": meanings,
                "signoffs": [signoff_dict(s) for s in selectors.signoffs_of(deployment)],
            }
        )

    @extend_schema(
        request=SignOffInputSerializer,
        responses=OpenApiTypes.OBJECT,
        summary="Sign off (approve or reject) with your password: 202, the heavy worker then signs the packet",
    )
    def post(self, request: Request, code: str) -> Response:
        user = _user(request)
        deployment = deployment_get(user, code)
        serializer = SignOffInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        signoff = _attempt(request, deployment, user, data["role"], data["decision"], data)
        deployment.refresh_from_db(fields=["status"])
        body = {**signoff_dict(signoff), "deployment_status": deployment.status}
        return Response({**body, "status_url": selectors.signoffs_url(deployment)}, status=202)


class CaCertificateApi(APIView):
    permission_classes: list[Any] = []  # public: anyone verifying a packet needs the trust root

    @extend_schema(
        responses={(200, "application/x-pem-file"): OpenApiResponse(OpenApiTypes.STR)},
        summary="The organisation's root CA certificate (public)",
    )
    def get(self, request: Request) -> HttpResponse:
        root = selectors.root_ca()
        if root is None:
            raise NotFoundError("the approvals PKI is not initialised")
        return HttpResponse(root.certificate_pem, content_type="application/x-pem-file")


class CrlApi(APIView):
    permission_classes: list[Any] = []

    @extend_schema(
        responses={(200, "application/pkix-crl"): OpenApiResponse(OpenApiTypes.BINARY)},
        summary="The current certificate revocation list (public)",
    )
    def get(self, request: Request) -> HttpResponse:
        root = selectors.root_ca()
        if root is None or not root.crl_der:
            raise NotFoundError("the approvals PKI is not initialised")
        return HttpResponse(bytes(root.crl_der), content_type="application/pkix-crl")


class ReviewInputSerializer(StrictSerializer):
    verdict = serializers.ChoiceField(choices=SignOffDecision.choices)
    evidence_digest = serializers.RegexField(r"^[0-9a-f]{64}$")
    password = serializers.CharField(
        max_length=4096, trim_whitespace=False, write_only=True, required=False, allow_blank=True, default=""
    )
    role = serializers.ChoiceField(choices=ReviewRole.choices, required=False)
    comment = serializers.CharField(required=False, allow_blank=True, max_length=4000, default="")


class DeploymentReviewApi(APIView):
    """`POST /api/v1/deployments/{code}/review`: a reviewer's decision, now a signed sign-off.
    `role` may be left out by a user who holds one reviewer role only."""

    permission_classes = [IsAuthenticated]
    throttle_classes = [SignOffRateThrottle]

    @extend_schema(
        request=ReviewInputSerializer,
        responses={202: DeploymentOutputSerializer},
        summary="Approve or reject the evidence digest you saw (password): 202, the heavy worker signs the packet",
    )
    def post(self, request: Request, code: str) -> Response:
        user = _user(request)
        deployment = deployment_get(user, code)
        serializer = ReviewInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        if not has_role(user, *ROLE_GROUPS.values()):
            raise PermissionDeniedError("signing off needs the legal or engineering reviewer role")
        role = data.get("role") or selectors.only_signing_role(user)
        if role is None:
            raise invalid_input("role", f"say which role you sign as: {', '.join(ReviewRole.values)}")
        _attempt(request, deployment, user, role, data["verdict"], data)
        return Response(DeploymentOutputSerializer(deployment_get(user, code)).data, status=202)
