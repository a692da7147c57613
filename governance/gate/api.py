"""Gate API: the check CI calls (its contract: docs/gate.md), the decision log, and team CI tokens."""

from __future__ import annotations

import json
import logging
import time
import uuid
from typing import Any, cast

from django.contrib.auth.models import User
from django.core.exceptions import RequestDataTooBig
from django.db import connection
from django.db.models import QuerySet
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.exceptions import AuthenticationFailed
from rest_framework.generics import ListAPIView
from rest_framework.permissions import BasePermission, IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.throttling import ScopedRateThrottle, SimpleRateThrottle
from rest_framework.views import APIView

from governance.capacity.serializers import GPU_KEY
from governance.core.authentication import BearerTokenAuthentication
from governance.core.errors import NotFoundError, PermissionDeniedError, invalid_input
from governance.core.logging import current_request_id
from governance.core.metrics import GATE_LATENCY, gate_decision_observe
from governance.core.models import ApiToken
from governance.core.roles import Role, has_role
from governance.core.selectors import team_by_name
from governance.core.serializers import PrebuiltFieldsSerializer, StrictSerializer
from governance.core.tokens import ENVIRONMENT_PATTERN, TokenScope, api_token_resolve, api_token_well_formed
from governance.deployments.choices import ENGINE_CHOICES, SERVING_PRECISIONS
from governance.deployments.selectors import deployment_get
from governance.gate import services
from governance.gate.conditions import GateCheck
from governance.gate.models import GateDecision
from governance.gate.selectors import (
    GateDecisionFilter,
    ci_tokens_visible_to,
    gate_decisions_visible_to,
    gate_deployment_for_token,
    gate_token_and_state,
)

logger = logging.getLogger(__name__)


class ErrorSerializer(serializers.Serializer):
    message = serializers.CharField()
    extra = serializers.DictField()


# --- the check ---------------------------------------------------------------------------------


class GateServingSerializer(StrictSerializer):
    engine = serializers.ChoiceField(choices=ENGINE_CHOICES)
    engine_version = serializers.RegexField(
        r"^[A-Za-z0-9_.+-]{1,40}$", required=False, help_text="when given, the passed eval must have run this version"
    )
    precision = serializers.ChoiceField(choices=SERVING_PRECISIONS)
    # A catalog key or a custom GPU's (a request's serving_plan.gpu_spec): compared with the envelope.
    gpu = serializers.RegexField(GPU_KEY, max_length=40, help_text="the GPU's catalog key, or the custom GPU's key")
    kv_dtype = serializers.ChoiceField(choices=["bf16", "fp8"], required=False)
    tp = serializers.IntegerField(min_value=1, max_value=1024, default=1)
    pp = serializers.IntegerField(min_value=1, max_value=1024, default=1)
    ep = serializers.IntegerField(min_value=1, max_value=1024, default=1)
    dp = serializers.IntegerField(min_value=1, max_value=4096, required=False)
    max_model_len = serializers.IntegerField(min_value=1, max_value=100_000_000)
    gpu_memory_utilization = serializers.FloatField(min_value=0.01, max_value=1.0, default=0.9)


class GateCheckInputSerializer(PrebuiltFieldsSerializer):  # the hot path: fields built once
    """What CI asks about: the request, the environment, the artifact's digest and the serving config."""

    deployment = serializers.UUIDField()
    environment = serializers.RegexField(ENVIRONMENT_PATTERN)
    artifact_digest = serializers.RegexField(r"^sha256:[0-9a-fA-F]{64}$")
    serving = GateServingSerializer()


class ReasonSerializer(serializers.Serializer):
    code = serializers.CharField()
    message = serializers.CharField()
    fix = serializers.CharField()


class ApprovalRefSerializer(serializers.Serializer):
    pdf_url = serializers.CharField(allow_null=True)
    sha256 = serializers.CharField(allow_null=True)


class GateCheckOutputSerializer(serializers.Serializer):
    decision = serializers.ChoiceField(choices=["allow", "deny"])
    decision_id = serializers.UUIDField()
    reasons = ReasonSerializer(many=True)
    evidence_digest = serializers.CharField(allow_blank=True)
    approval = ApprovalRefSerializer()


class HasGateScope(BasePermission):
    message = f"The gate takes a CI token with scope {TokenScope.GATE_CHECK}."

    def has_permission(self, request: Request, view: Any) -> bool:
        token = request.auth
        return isinstance(token, ApiToken) and TokenScope.GATE_CHECK in (token.scopes or [])


class TokenRateThrottle(SimpleRateThrottle):
    """Per token (not per user: a team's tokens share one service user)."""

    scope = "gate"

    def get_cache_key(self, request: Request, view: Any) -> str | None:
        token = request.auth
        if not isinstance(token, ApiToken):
            return self.get_ident(request)
        return self.cache_format % {"scope": self.scope, "ident": token.pk}


def _deployment_code(request: Request) -> uuid.UUID | None:
    """The `deployment` of a small JSON body, read without DRF's parser (whose errors the view
    reports: anything odd here is left to it)."""
    if not (request.content_type or "").startswith("application/json"):
        return None
    try:
        body = request._request.body
        if len(body) > _PEEK_LIMIT:
            return None
        data = json.loads(body)
        code = data.get("deployment") if isinstance(data, dict) else None
        return uuid.UUID(code) if isinstance(code, str) else None
    except (ValueError, TypeError, RecursionError, RequestDataTooBig):
        return None


_PEEK_LIMIT = 16 * 1024  # a check's body is under 1 KiB


class GateCheckApi(APIView):
    authentication_classes = [BearerTokenAuthentication]  # CI only: no session, so no CSRF surface
    permission_classes = [HasGateScope]
    throttle_classes = [TokenRateThrottle]

    def dispatch(self, request: Any, *args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        response = super().dispatch(request, *args, **kwargs)
        GATE_LATENCY.labels(status=str(response.status_code)).observe(time.perf_counter() - started)
        return response

    def resolve_token(self, request: Request, credentials: str) -> Any:
        """The bearer token, checked in the same statement that reads the state of the request the
        body names (gate.selectors.gate_token_and_state): a check costs two round trips, this read
        and the decision's write. The token rules are core.tokens' (api_token_accept); scope and
        coverage are checked as for any token. A body without a readable request code (malformed
        JSON included: the view reports it) and other databases take the ordinary resolution."""
        code = _deployment_code(request)
        if code is None or connection.vendor != "postgresql" or not api_token_well_formed(credentials):
            return api_token_resolve(credentials)
        token, deployment = gate_token_and_state(credentials, code)
        if token is not None:
            request._request.gate_preloaded = (code, deployment)  # type: ignore[attr-defined]
        return token

    @extend_schema(
        request=GateCheckInputSerializer,
        responses={
            200: GateCheckOutputSerializer,
            400: ErrorSerializer,
            401: ErrorSerializer,
            403: ErrorSerializer,
            429: ErrorSerializer,
            503: OpenApiResponse(ErrorSerializer, description="internal failure: CI must treat it as deny"),
        },
        summary="May this artifact and serving config roll out now? (always 200 for a decision)",
    )
    def post(self, request: Request) -> Response:
        serializer = GateCheckInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        token = cast(ApiToken, request.auth)
        deployment = gate_deployment_for_token(
            token, data["deployment"], data["environment"], getattr(request._request, "gate_preloaded", None)
        )
        check = GateCheck(
            environment=data["environment"], artifact_digest=data["artifact_digest"], serving=dict(data["serving"])
        )
        try:
            decision, approval = services.gate_decide(token=token, deployment=deployment, check=check)
        except services.GateTokenRevokedError:
            # Revoked while this check ran: the answer a revoked token gets (nothing was logged).
            raise AuthenticationFailed(BearerTokenAuthentication.REFUSED) from None
        except PermissionDeniedError:
            raise  # the request, read again, is no longer one this token was issued for
        except Exception:
            # Fail closed: no logged decision, no answer but 503 (CI treats it as deny).
            logger.exception("gate decision could not be logged", extra={"deployment": str(deployment.code)})
            gate_decision_observe("error", ())
            return Response(
                {
                    "message": "The gate could not record its decision; treat this as deny.",
                    "extra": {"request_id": current_request_id()},
                },
                status=status.HTTP_503_SERVICE_UNAVAILABLE,
            )
        gate_decision_observe(str(decision.decision), (reason["code"] for reason in decision.reasons))
        # Already JSON types in GateCheckOutputSerializer's shape (the schema's; tests check the
        # answers against it), so no output serializer on the hot path.
        body = {
            "decision": str(decision.decision),
            "decision_id": str(decision.code),
            "reasons": decision.reasons,
            "evidence_digest": decision.evidence_digest,
            "approval": approval,
        }
        return Response(body)


# --- the decision log --------------------------------------------------------------------------


class TokenRefSerializer(serializers.Serializer):
    name = serializers.CharField(source="token_name")
    prefix = serializers.CharField(source="token_prefix")


class GateDecisionOutputSerializer(serializers.ModelSerializer):
    decision_id = serializers.UUIDField(source="code")
    deployment = serializers.UUIDField(source="deployment.code")
    reasons = ReasonSerializer(many=True)
    serving = serializers.DictField()
    token = TokenRefSerializer(source="*")

    class Meta:
        model = GateDecision
        fields = [
            "decision_id",
            "deployment",
            "environment",
            "decision",
            "reasons",
            "artifact_digest",
            "serving",
            "evidence_digest",
            "approval_pdf_sha256",
            "token",
            "created_at",
        ]


class GateDecisionListApi(ListAPIView):
    """The decision log, newest first, filtered by request, outcome, environment, token prefix, time."""

    serializer_class = GateDecisionOutputSerializer
    filterset_class = GateDecisionFilter

    def get_queryset(self) -> QuerySet[GateDecision]:
        return gate_decisions_visible_to(self.request.user).order_by("-created_at")


class DeploymentGateDecisionsApi(ListAPIView):
    """The gate decisions of one request (404 when the request is not visible to the caller)."""

    serializer_class = GateDecisionOutputSerializer
    permission_classes = [IsAuthenticated]  # the request's own visibility rules decide

    def get_queryset(self) -> QuerySet[GateDecision]:
        if getattr(self, "swagger_fake_view", False):  # schema generation: no request to scope by
            return GateDecision.objects.none()
        deployment = deployment_get(self.request.user, self.kwargs["code"])
        return GateDecision.objects.filter(deployment=deployment).select_related("deployment").order_by("-created_at")


# --- CI tokens ---------------------------------------------------------------------------------


class CiTokenInputSerializer(StrictSerializer):
    name = serializers.CharField(max_length=120)
    team = serializers.CharField(max_length=120)
    scopes = serializers.ListField(
        child=serializers.CharField(max_length=40), default=[TokenScope.GATE_CHECK], max_length=10
    )
    deployments = serializers.ListField(child=serializers.UUIDField(), default=list, max_length=100)
    environments = serializers.ListField(child=serializers.RegexField(ENVIRONMENT_PATTERN), default=list, max_length=20)
    expires_at = serializers.DateTimeField()


def ci_token_issue_from_input(actor: User, team: Any, data: dict[str, Any]) -> tuple[ApiToken, str]:
    """ci_token_issue for CiTokenInputSerializer's validated data (the API and the web form)."""
    return services.ci_token_issue(
        actor=actor,
        team=team,
        name=data["name"],
        expires_at=data["expires_at"],
        scopes=data["scopes"],
        deployment_codes=data["deployments"],
        environments=data["environments"],
    )


class CiTokenOutputSerializer(serializers.ModelSerializer):
    team = serializers.CharField(source="team.name")
    deployments = serializers.ListField(source="deployment_codes", child=serializers.UUIDField())
    scopes = serializers.ListField(child=serializers.CharField())
    environments = serializers.ListField(child=serializers.CharField())
    created_by = serializers.CharField(source="created_by.username", allow_null=True, default=None)

    class Meta:
        model = ApiToken
        fields = [
            "code",
            "name",
            "prefix",
            "team",
            "scopes",
            "deployments",
            "environments",
            "expires_at",
            "revoked_at",
            "last_used_at",
            "created_by",
            "created_at",
        ]


class CiTokenIssuedSerializer(CiTokenOutputSerializer):
    """The answer to an issue (schema only): the row plus the clear token, shown this once."""

    token = serializers.CharField(help_text="the clear token: shown once, never stored")

    class Meta(CiTokenOutputSerializer.Meta):
        fields = [*CiTokenOutputSerializer.Meta.fields, "token"]


class CiTokenListCreateApi(ListAPIView):
    """Team CI tokens: an admin manages all, a team lead those of their teams."""

    serializer_class = CiTokenOutputSerializer
    permission_classes = [IsAuthenticated]
    throttle_scope = "tokens"

    def get_throttles(self) -> list[Any]:
        return [ScopedRateThrottle()] if self.request.method == "POST" else []

    def get_queryset(self) -> QuerySet[ApiToken]:
        if getattr(self, "swagger_fake_view", False):  # schema generation: no request to scope by
            return ApiToken.objects.none()
        return ci_tokens_visible_to(self.request.user).select_related("created_by").order_by("-created_at")

    @extend_schema(request=CiTokenInputSerializer, responses={201: CiTokenIssuedSerializer})
    def post(self, request: Request) -> Response:
        serializer = CiTokenInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        team = team_by_name(data["team"])
        if team is None:
            # Only an admin (who manages every team) learns that a name is unknown; anyone else gets
            # the answer a team they may not manage gets, so the endpoint is no oracle of team names.
            if not has_role(request.user, Role.ADMIN):
                raise PermissionDeniedError(services.NOT_TOKEN_MANAGER)
            raise invalid_input("team", f"no team named {data['team']!r}")
        token, clear_text = ci_token_issue_from_input(cast(User, request.user), team, data)
        return Response({**CiTokenOutputSerializer(token).data, "token": clear_text}, status=status.HTTP_201_CREATED)


class CiTokenRevokeApi(APIView):
    permission_classes = [IsAuthenticated]

    @extend_schema(
        request=None, responses=CiTokenOutputSerializer, summary="Revoke a team CI token (admin or team lead)"
    )
    def post(self, request: Request, code: str) -> Response:
        token = ci_tokens_visible_to(request.user).filter(code=code).first()
        if token is None:
            raise NotFoundError("no such CI token")
        revoked = services.ci_token_revoke(actor=cast(User, request.user), token=token)
        return Response(CiTokenOutputSerializer(revoked).data)
