"""Deployment request API. Object permissions are in the selectors: an unauthorised request is a 404."""

from __future__ import annotations

from typing import Any, cast

from django.conf import settings
from django.contrib.auth.models import User
from django.db.models import QuerySet
from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import serializers
from rest_framework.generics import ListAPIView
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from governance.core.errors import PermissionDeniedError, invalid_input
from governance.core.models import ApiToken
from governance.core.parsers import SafeJSONParser
from governance.core.permissions import role_permission
from governance.core.roles import Role, has_role
from governance.core.selectors import team_choose
from governance.core.serializers import StrictSerializer
from governance.deployments import services
from governance.deployments.choices import ENGINE_CHOICES
from governance.deployments.models import DeploymentRequest, ObligationItem
from governance.deployments.selectors import (
    DeploymentFilter,
    deployment_get,
    deployment_get_for_usage,
    deployments_attach_capacity_plans,
    deployments_list,
    latest_capacity_plan,
    obligation_get,
    waiver_get,
)
from governance.deployments.serializers import (
    DeploymentInputSerializer,
    DeploymentOutputSerializer,
    DeploymentUpdateSerializer,
)
from governance.evaluations.api import EvalRunOutputSerializer
from governance.evaluations.evals import eval_screening_of_deployment, eval_served_request
from governance.evaluations.selectors import cluster_by_name
from governance.licenses.selectors import fx_table
from planner.quant.names import SCHEME_NAMES

# Any authenticated user reaches these views; the selectors decide what exists for them,
# so an outsider gets 404 (not 403) and learns nothing about other teams' requests.
VISIBLE_TO_ANY_USER = [IsAuthenticated]


def _user(request: Request) -> User:
    return cast(User, request.user)  # IsAuthenticated ran first


def _output(deployment: DeploymentRequest, status: int = 200) -> Response:
    return Response(DeploymentOutputSerializer(deployment).data, status=status)


@extend_schema_view(
    get=extend_schema(summary="Deployment requests you may see (filters: status, team, product, flagged)")
)
class DeploymentListCreateApi(ListAPIView):
    permission_classes = VISIBLE_TO_ANY_USER
    serializer_class = DeploymentOutputSerializer
    filterset_class = DeploymentFilter  # unknown query parameters answer 400 (StrictFilterBackend)

    def get_queryset(self) -> QuerySet[DeploymentRequest]:
        return deployments_list(self.request.user)

    def paginate_queryset(self, queryset: QuerySet[Any, Any]) -> list[Any] | None:
        page = super().paginate_queryset(queryset)
        if page is not None:
            deployments_attach_capacity_plans(page)
        return page

    @extend_schema(
        request=DeploymentInputSerializer,
        responses={201: DeploymentOutputSerializer},
        summary="Create a deployment request (draft) for one of your teams",
    )
    def post(self, request: Request) -> Response:
        if not has_role(request.user, Role.REQUESTER):
            raise PermissionDeniedError("only requesters create deployment requests")
        serializer = DeploymentInputSerializer(data=request.data, context={"user": request.user})
        serializer.is_valid(raise_exception=True)
        data = dict(serializer.validated_data)
        data["team"] = team_choose(request.user, data.pop("team", None))
        return _output(services.deployment_create(actor=_user(request), data=data), status=201)


class DeploymentDetailApi(APIView):
    permission_classes = VISIBLE_TO_ANY_USER

    @extend_schema(responses=DeploymentOutputSerializer, summary="A deployment request: evidence, findings, blockers")
    def get(self, request: Request, code: str) -> Response:
        return _output(deployment_get(request.user, code))

    @extend_schema(
        request=DeploymentUpdateSerializer,
        responses=DeploymentOutputSerializer,
        summary="Edit facts, serving plan or environments (approved: back to review)",
    )
    def patch(self, request: Request, code: str) -> Response:
        target = deployment_get(request.user, code)
        serializer = DeploymentUpdateSerializer(data=request.data, context={"user": request.user})
        serializer.is_valid(raise_exception=True)
        return _output(
            services.deployment_update(deployment=target, actor=_user(request), changes=dict(serializer.validated_data))
        )


class _ActionApi(APIView):
    permission_classes = VISIBLE_TO_ANY_USER

    def target(self, request: Request, code: str) -> DeploymentRequest:
        return deployment_get(request.user, code)


class DeploymentSubmitApi(_ActionApi):
    @extend_schema(
        request=None, responses=DeploymentOutputSerializer, summary="Submit a draft (evaluates every license)"
    )
    def post(self, request: Request, code: str) -> Response:
        return _output(services.deployment_submit(deployment=self.target(request, code), actor=_user(request)))


class DeploymentStartReviewApi(_ActionApi):
    @extend_schema(request=None, responses=DeploymentOutputSerializer, summary="A reviewer takes a submitted request")
    def post(self, request: Request, code: str) -> Response:
        return _output(services.deployment_start_review(deployment=self.target(request, code), actor=_user(request)))


# The review endpoint (`<code>/review`) is the approvals app's sign-off, wired in governance/urls.py:
# a decision is a signature on the approval packet now.


class ReasonInputSerializer(StrictSerializer):
    reason = serializers.CharField(max_length=4000)


class DeploymentRevokeApi(_ActionApi):
    @extend_schema(
        request=ReasonInputSerializer,
        responses=DeploymentOutputSerializer,
        summary="Revoke an approval, with a reason (legal or admin)",
    )
    def post(self, request: Request, code: str) -> Response:
        serializer = ReasonInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        return _output(
            services.deployment_revoke(
                deployment=self.target(request, code),
                actor=_user(request),
                reason=serializer.validated_data["reason"],
            )
        )


class WithdrawInputSerializer(StrictSerializer):
    reason = serializers.CharField(max_length=4000, required=False, allow_blank=True)


class DeploymentWithdrawApi(_ActionApi):
    @extend_schema(
        request=WithdrawInputSerializer,
        responses=DeploymentOutputSerializer,
        summary="Withdraw a draft or submitted request (its requester or a team lead)",
    )
    def post(self, request: Request, code: str) -> Response:
        serializer = WithdrawInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        return _output(
            services.deployment_withdraw(
                deployment=self.target(request, code),
                actor=_user(request),
                reason=serializer.validated_data.get("reason", ""),
            )
        )


class AcknowledgeInputSerializer(StrictSerializer):
    how_met = serializers.CharField(max_length=4000)


class ObligationReviewInputSerializer(StrictSerializer):
    accept = serializers.BooleanField()
    comment = serializers.CharField(required=False, allow_blank=True, max_length=4000)


def _obligation_action(input_serializer: type[StrictSerializer], summary: str) -> Any:
    """Declare an obligation action's input (validated by _ObligationApi.post) and its schema."""

    def declare(view: type[_ObligationApi]) -> type[_ObligationApi]:
        view.input_serializer = input_serializer
        schema = extend_schema(request=input_serializer, responses=DeploymentOutputSerializer, summary=summary)
        return extend_schema_view(post=schema)(view)

    return declare


# An action on one obligation of a request; answers with the request as it now stands. (A comment,
# not a docstring: a view's docstring becomes its description in the OpenAPI schema.)
class _ObligationApi(_ActionApi):
    input_serializer: type[StrictSerializer]

    def act(self, item: ObligationItem, actor: User, data: dict[str, Any]) -> None:
        raise NotImplementedError

    def post(self, request: Request, code: str, item: str) -> Response:
        deployment = self.target(request, code)
        serializer = self.input_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        self.act(obligation_get(deployment, item), _user(request), dict(serializer.validated_data))
        return _output(deployment_get(request.user, code))


@_obligation_action(AcknowledgeInputSerializer, "Say how an obligation is met (requester)")
class ObligationAcknowledgeApi(_ObligationApi):
    def act(self, item: ObligationItem, actor: User, data: dict[str, Any]) -> None:
        services.obligation_acknowledge(item=item, actor=actor, how_met=data["how_met"])


@_obligation_action(ObligationReviewInputSerializer, "Accept or reject how an obligation is met (legal)")
class ObligationReviewApi(_ObligationApi):
    def act(self, item: ObligationItem, actor: User, data: dict[str, Any]) -> None:
        services.obligation_review(item=item, actor=actor, **data)


class WaiverInputSerializer(StrictSerializer):
    license = serializers.RegexField(r"^[a-z0-9][a-z0-9.-]{0,63}$")
    finding_code = serializers.CharField(max_length=40)
    clause = serializers.CharField(max_length=120, required=False, allow_blank=True, default="")
    reason = serializers.CharField(max_length=4000)
    expires_at = serializers.DateTimeField()
    permission_document = serializers.FileField(
        required=False,
        allow_empty_file=True,  # the service answers "empty" naming this field
        help_text="the licensor's written permission (multipart upload); required to waive a blocker",
    )


class WaiverCreateApi(_ActionApi):
    parser_classes = [SafeJSONParser, MultiPartParser, FormParser]

    @extend_schema(
        request={"multipart/form-data": WaiverInputSerializer, "application/json": WaiverInputSerializer},
        responses={201: DeploymentOutputSerializer},
        summary="Waive one finding until a date (legal); a blocker's waiver is proposed with the "
        "licensor's permission attached and needs a second legal reviewer's confirmation",
    )
    def post(self, request: Request, code: str) -> Response:
        deployment = self.target(request, code)
        serializer = WaiverInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        upload = data.get("permission_document")
        permission = None
        if upload is not None:
            if upload.size > settings.APPROVALS_MAX_UPLOAD_BYTES:
                raise invalid_input("permission_document", f"larger than {settings.APPROVALS_MAX_UPLOAD_BYTES} bytes")
            permission = services.PermissionDocument(name=upload.name or "", content=upload.read())
        services.waiver_grant(
            deployment=deployment,
            actor=_user(request),
            license_key=data["license"],
            finding_code=data["finding_code"],
            clause=data["clause"],
            reason=data["reason"],
            expires_at=data["expires_at"],
            permission=permission,
        )
        return _output(deployment_get(request.user, code), status=201)


class WaiverConfirmApi(_ActionApi):
    @extend_schema(
        request=None,
        responses=DeploymentOutputSerializer,
        summary="Confirm a proposed waiver of a blocker (a second legal reviewer, not the proposer)",
    )
    def post(self, request: Request, code: str, waiver: str) -> Response:
        deployment = self.target(request, code)
        services.waiver_confirm(deployment=deployment, waiver=waiver_get(deployment, waiver), actor=_user(request))
        return _output(deployment_get(request.user, code))


class RevenueSerializer(StrictSerializer):
    amount = serializers.DecimalField(max_digits=20, decimal_places=2, min_value=0)
    currency = serializers.CharField(max_length=3)

    def validate_currency(self, value: str) -> str:
        if value not in fx_table().currencies:
            raise serializers.ValidationError(f"unknown currency {value!r}")
        return value


class UsageInputSerializer(StrictSerializer):
    month = serializers.RegexField(r"^\d{4}-(0[1-9]|1[0-2])$", help_text="YYYY-MM")
    monthly_active_users = serializers.IntegerField(min_value=0)
    monthly_revenue = RevenueSerializer(required=False, allow_null=True)


class DeploymentUsageApi(APIView):
    """Billing or CI posts a month's usage (token scope usage:write), or a requester of the team."""

    permission_classes: list[type] = []

    @extend_schema(
        request=UsageInputSerializer,
        responses={201: DeploymentOutputSerializer},
        summary="Report a month's usage (token scope usage:write, or a requester of the team)",
    )
    def post(self, request: Request, code: str) -> Response:
        if not request.user or not request.user.is_authenticated:
            raise PermissionDeniedError("authentication required")
        token = request.auth if isinstance(request.auth, ApiToken) else None
        deployment = deployment_get_for_usage(request.user, code, token=token)
        serializer = UsageInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        revenue = data.get("monthly_revenue")
        services.usage_report_record(
            deployment=deployment,
            actor=_user(request),
            month=data["month"],
            monthly_active_users=data["monthly_active_users"],
            revenue={"amount": float(revenue["amount"]), "currency": revenue["currency"]} if revenue else None,
        )
        return _output(deployment_get_for_usage(request.user, code, token=token), status=201)


class EvalRequestInputSerializer(StrictSerializer):
    strict_types = True

    cluster = serializers.CharField(max_length=100)
    kind = serializers.ChoiceField(
        choices=["served", "screening"],
        default="served",
        help_text="served: the request's artifact vs its parent through the plan's engine (counts for approval); "
        "screening: quantization simulated in one process on the baseline (a what-if, never counts)",
    )
    engine = serializers.ChoiceField(
        choices=ENGINE_CHOICES,
        required=False,
        help_text="default: the plan's engine; `transformers` (CPU) on the local cluster",
    )
    scheme = serializers.ChoiceField(
        choices=sorted(SCHEME_NAMES), required=False, help_text="screening only; default: the plan's precision"
    )
    threshold = serializers.FloatField(default=0.05, min_value=0.001, max_value=0.5)
    max_cases_per_category = serializers.IntegerField(required=False, min_value=1, max_value=10_000)
    max_new_tokens = serializers.IntegerField(
        default=64, min_value=1, max_value=4096, help_text="tokens each model generates per turn (greedy)"
    )
    concurrency = serializers.IntegerField(default=4, min_value=1, max_value=256, help_text="requests in flight")
    eval_set = serializers.CharField(
        required=False,
        max_length=20_000_000,
        trim_whitespace=False,
        help_text="your own eval set as JSONL (id, category, turns, key_items per line)",
    )
    lm_eval_tasks = serializers.ListField(
        child=serializers.RegexField(r"^[A-Za-z0-9_.-]{1,100}$", max_length=100),
        required=False,
        max_length=50,
        help_text="served only: lm-eval-harness tasks run against the same engine, from the cluster's offline "
        "task directory (lm_eval_dir); per task the baseline's and candidate's scores with standard errors",
    )
    lm_eval_limit = serializers.IntegerField(
        required=False, min_value=1, max_value=100_000, help_text="documents per lm-eval task (default: all)"
    )


class DeploymentEvalCreateApi(APIView):
    permission_classes = [role_permission(Role.ENGINEERING_REVIEWER, Role.ADMIN)]

    @extend_schema(
        request=EvalRequestInputSerializer,
        responses={202: EvalRunOutputSerializer},
        summary="Evaluate this request's artifact on a cluster (served through the plan's engine, or screening)",
    )
    def post(self, request: Request, code: str) -> Response:
        deployment = deployment_get(request.user, code)
        serializer = EvalRequestInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        cluster = cluster_by_name(data["cluster"])
        if cluster is None:
            raise serializers.ValidationError({"cluster": "no such cluster"})
        if data["kind"] == "screening":
            evaluation = eval_screening_of_deployment(
                deployment=deployment,
                cluster=cluster,
                scheme=data.get("scheme") or deployment.serving_plan["precision"],
                actor=cast(User, request.user),
                threshold=data["threshold"],
                max_cases_per_category=data.get("max_cases_per_category"),
                max_new_tokens=data["max_new_tokens"],
                eval_set=data.get("eval_set"),
            )
        else:
            stored = latest_capacity_plan(deployment)
            evaluation = eval_served_request(
                deployment=deployment,
                cluster=cluster,
                actor=cast(User, request.user),
                engine=data.get("engine"),
                plan_result=stored.result if stored is not None else None,
                threshold=data["threshold"],
                max_cases_per_category=data.get("max_cases_per_category"),
                max_new_tokens=data["max_new_tokens"],
                concurrency=data["concurrency"],
                eval_set=data.get("eval_set"),
                lm_eval_tasks=data.get("lm_eval_tasks"),
                lm_eval_limit=data.get("lm_eval_limit"),
            )
        return Response(EvalRunOutputSerializer(evaluation).data, status=202)
