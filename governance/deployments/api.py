"""Deployment request API. Object permissions are in the selectors: an unauthorised request is a 404."""

from __future__ import annotations

import re
from typing import Any, cast

from django.contrib.auth.models import User
from django.db.models import QuerySet
from django.utils import timezone
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.generics import ListAPIView
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from governance.artifacts.selectors import artifacts_visible_to
from governance.core.errors import PermissionDeniedError
from governance.core.models import ApiToken
from governance.core.permissions import role_permission
from governance.core.roles import Role, has_role
from governance.core.selectors import team_choose
from governance.core.serializers import StrictSerializer
from governance.deployments import services
from governance.deployments.choices import Engine, Status
from governance.deployments.models import DeploymentRequest
from governance.deployments.selectors import (
    active_waivers,
    deployment_blockers,
    deployment_get,
    deployment_get_for_usage,
    deployments_visible_to,
    finding_is_waived,
    latest_capacity_plan,
    obligation_get,
)
from governance.evaluations.api import EvalRunOutputSerializer
from governance.evaluations.evals import eval_run_request
from governance.evaluations.selectors import cluster_by_name
from governance.licenses.selectors import fx_table
from planner.quant.schemes import SCHEMES
from planner.specs import gpus, precisions

USAGE_SCOPE = "usage:write"


# Any authenticated user reaches these views; the selectors decide what exists for them,
# so an outsider gets 404 (not 403) and learns nothing about other teams' requests.
VISIBLE_TO_ANY_USER = [IsAuthenticated]


def _user(request: Request) -> User:
    return cast(User, request.user)  # IsAuthenticated ran first


class ServingPlanSerializer(StrictSerializer):
    engine = serializers.ChoiceField(choices=Engine.choices, default=Engine.VLLM)
    precision = serializers.ChoiceField(choices=sorted(precisions()))
    gpu = serializers.ChoiceField(choices=sorted(gpus()))
    kv_dtype = serializers.ChoiceField(choices=["bf16", "fp8"], default="bf16")
    tp = serializers.IntegerField(required=False, min_value=1, max_value=16)
    pp = serializers.IntegerField(required=False, min_value=1, max_value=64)
    ep = serializers.IntegerField(required=False, min_value=1, max_value=256)
    dp = serializers.IntegerField(required=False, min_value=1, max_value=256)
    max_model_len = serializers.IntegerField(min_value=16)
    gpu_memory_utilization = serializers.FloatField(default=0.9, min_value=0.1, max_value=0.99)
    concurrency = serializers.IntegerField(default=1, min_value=1, max_value=100_000)


ENVIRONMENT = re.compile(r"^[a-z][a-z0-9-]{0,39}$")


class DeploymentInputSerializer(StrictSerializer):
    team = serializers.CharField(max_length=120, required=False)
    artifact = serializers.UUIDField()
    product_name = serializers.CharField(max_length=200)
    environments = serializers.ListField(child=serializers.RegexField(ENVIRONMENT), default=list, max_length=10)
    facts = serializers.JSONField()
    serving_plan = ServingPlanSerializer()
    target_cluster = serializers.CharField(max_length=120, required=False, allow_blank=True)

    def validate_artifact(self, value: Any) -> Any:
        artifact = artifacts_visible_to(self.context["user"]).filter(code=value).first()
        if artifact is None:
            raise serializers.ValidationError("no such artifact")
        return artifact

    def validate_facts(self, value: Any) -> Any:
        if not isinstance(value, dict):
            raise serializers.ValidationError("must be a JSON object")
        return value


class DeploymentUpdateSerializer(DeploymentInputSerializer):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs["partial"] = True
        super().__init__(*args, **kwargs)
        self.fields.pop("team")


class DeploymentOutputSerializer(serializers.ModelSerializer):
    team = serializers.CharField(source="team.name")
    requester = serializers.CharField(source="requester.username")
    artifact = serializers.UUIDField(source="artifact.code")
    licenses = serializers.SerializerMethodField()
    obligations = serializers.SerializerMethodField()
    waivers = serializers.SerializerMethodField()
    decisions = serializers.SerializerMethodField()
    capacity_plan = serializers.SerializerMethodField()
    blockers = serializers.SerializerMethodField()

    class Meta:
        model = DeploymentRequest
        fields = ["code", "team", "requester", "artifact", "product_name", "environments", "facts", "serving_plan",
                  "target_cluster", "status", "submitted_at", "approved_at", "approval_expires_at", "evidence_digest",
                  "flagged", "flag_reason", "licenses", "obligations", "waivers", "decisions", "capacity_plan",
                  "blockers", "created_at", "updated_at"]  # fmt: skip

    def get_licenses(self, obj: DeploymentRequest) -> list[dict[str, Any]]:
        waivers = active_waivers(obj)
        result = []
        for evaluation in (obj.evidence or {}).get("licenses", []):
            findings = [
                {**finding, "waived": finding_is_waived(evaluation["license"], finding, waivers)}
                for finding in evaluation["findings"]
            ]
            result.append({**evaluation, "findings": findings})
        return result

    def get_obligations(self, obj: DeploymentRequest) -> list[dict[str, Any]]:
        return [
            {"code": str(o.code), "license": o.license_key, "finding_code": o.finding_code, "clause": o.clause,
             "params": o.params, "message": o.message, "status": o.status, "how_met": o.how_met,
             "review_comment": o.review_comment}
            for o in obj.obligations.all()
        ]  # fmt: skip

    def get_waivers(self, obj: DeploymentRequest) -> list[dict[str, Any]]:
        now = timezone.now()
        return [
            {"license": w.license_key, "finding_code": w.finding_code, "clause": w.clause, "reason": w.reason,
             "expires_at": w.expires_at, "active": w.expires_at > now, "granted_by": w.granted_by.username}
            for w in obj.waivers.select_related("granted_by")
        ]  # fmt: skip

    def get_decisions(self, obj: DeploymentRequest) -> list[dict[str, Any]]:
        return [
            {"role": d.role, "verdict": d.verdict, "reviewer": d.reviewer.username, "evidence_digest": d.evidence_digest,
             "comment": d.comment, "voided": d.voided_at is not None, "void_reason": d.void_reason,
             "created_at": d.created_at}
            for d in obj.decisions.select_related("reviewer")
        ]  # fmt: skip

    def get_capacity_plan(self, obj: DeploymentRequest) -> dict[str, Any] | None:
        stored = latest_capacity_plan(obj)
        return None if stored is None else {"code": str(stored.code), "status": stored.status, "fits": stored.fits}

    def get_blockers(self, obj: DeploymentRequest) -> list[dict[str, Any]]:
        return deployment_blockers(obj) if obj.status not in (Status.DRAFT,) else []


def _output(request_obj: DeploymentRequest, status: int = 200) -> Response:
    return Response(DeploymentOutputSerializer(request_obj).data, status=status)


class DeploymentListCreateApi(ListAPIView):
    permission_classes = VISIBLE_TO_ANY_USER
    serializer_class = DeploymentOutputSerializer

    def get_queryset(self) -> QuerySet[DeploymentRequest]:
        requests = deployments_visible_to(self.request.user)
        params = self.request.query_params
        if params.get("status"):
            if params["status"] not in Status.values:
                raise serializers.ValidationError({"status": f"must be one of {', '.join(Status.values)}"})
            requests = requests.filter(status=params["status"])
        if params.get("team"):
            requests = requests.filter(team__name=params["team"])
        if params.get("product"):
            requests = requests.filter(product_name__icontains=params["product"])
        if params.get("flagged") in ("true", "false"):
            requests = requests.filter(flagged=params["flagged"] == "true")
        return requests.order_by("-created_at")

    @extend_schema(request=DeploymentInputSerializer, responses={201: DeploymentOutputSerializer})
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

    @extend_schema(responses=DeploymentOutputSerializer)
    def get(self, request: Request, code: str) -> Response:
        return _output(deployment_get(request.user, code))

    @extend_schema(request=DeploymentUpdateSerializer, responses=DeploymentOutputSerializer)
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
    @extend_schema(request=None, responses=DeploymentOutputSerializer)
    def post(self, request: Request, code: str) -> Response:
        return _output(services.deployment_submit(deployment=self.target(request, code), actor=_user(request)))


class DeploymentStartReviewApi(_ActionApi):
    @extend_schema(request=None, responses=DeploymentOutputSerializer)
    def post(self, request: Request, code: str) -> Response:
        return _output(services.deployment_start_review(deployment=self.target(request, code), actor=_user(request)))


# The review endpoint (`<code>/review`) is the approvals app's sign-off, wired in governance/urls.py:
# a decision is a signature on the approval packet now.


class ReasonInputSerializer(StrictSerializer):
    reason = serializers.CharField(max_length=4000)


class DeploymentRevokeApi(_ActionApi):
    @extend_schema(request=ReasonInputSerializer, responses=DeploymentOutputSerializer)
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


class AcknowledgeInputSerializer(StrictSerializer):
    how_met = serializers.CharField(max_length=4000)


class ObligationReviewInputSerializer(StrictSerializer):
    accept = serializers.BooleanField()
    comment = serializers.CharField(required=False, allow_blank=True, max_length=4000)


class ObligationAcknowledgeApi(_ActionApi):
    @extend_schema(request=AcknowledgeInputSerializer, responses=DeploymentOutputSerializer)
    def post(self, request: Request, code: str, item: str) -> Response:
        deployment = self.target(request, code)
        serializer = AcknowledgeInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        services.obligation_acknowledge(
            item=obligation_get(deployment, item), actor=_user(request), how_met=serializer.validated_data["how_met"]
        )
        return _output(deployment_get(request.user, code))


class ObligationReviewApi(_ActionApi):
    @extend_schema(request=ObligationReviewInputSerializer, responses=DeploymentOutputSerializer)
    def post(self, request: Request, code: str, item: str) -> Response:
        deployment = self.target(request, code)
        serializer = ObligationReviewInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        services.obligation_review(
            item=obligation_get(deployment, item), actor=_user(request), **serializer.validated_data
        )
        return _output(deployment_get(request.user, code))


class WaiverInputSerializer(StrictSerializer):
    license = serializers.RegexField(r"^[a-z0-9][a-z0-9.-]{0,63}$")
    finding_code = serializers.CharField(max_length=40)
    clause = serializers.CharField(max_length=120, required=False, allow_blank=True, default="")
    reason = serializers.CharField(max_length=4000)
    expires_at = serializers.DateTimeField()


class WaiverCreateApi(_ActionApi):
    @extend_schema(request=WaiverInputSerializer, responses={201: DeploymentOutputSerializer})
    def post(self, request: Request, code: str) -> Response:
        deployment = self.target(request, code)
        serializer = WaiverInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        services.waiver_grant(
            deployment=deployment,
            actor=_user(request),
            license_key=data["license"],
            finding_code=data["finding_code"],
            clause=data["clause"],
            reason=data["reason"],
            expires_at=data["expires_at"],
        )
        return _output(deployment_get(request.user, code), status=201)


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

    @extend_schema(request=UsageInputSerializer, responses={201: DeploymentOutputSerializer})
    def post(self, request: Request, code: str) -> Response:
        if not request.user or not request.user.is_authenticated:
            raise PermissionDeniedError("authentication required")
        token = request.auth if isinstance(request.auth, ApiToken) else None
        scoped = token is not None and USAGE_SCOPE in (token.scopes or [])
        deployment = deployment_get_for_usage(request.user, code, token_scoped=scoped)
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
        return _output(DeploymentRequest.objects.get(pk=deployment.pk), status=201)


class EvalRequestInputSerializer(serializers.Serializer):
    cluster = serializers.CharField(max_length=100)
    scheme = serializers.ChoiceField(choices=sorted(SCHEMES))
    model_path = serializers.RegexField(r"^/[A-Za-z0-9_./-]{1,400}$", help_text="checkpoint directory on the cluster")
    threshold = serializers.FloatField(default=0.05, min_value=0.001, max_value=0.5)
    max_cases_per_category = serializers.IntegerField(required=False, min_value=1, max_value=10_000)
    eval_set = serializers.CharField(required=False, max_length=20_000_000, trim_whitespace=False,
                                     help_text="your own eval set as JSONL (id, category, turns, key_items per line)")  # fmt: skip


class DeploymentEvalCreateApi(APIView):
    permission_classes = [role_permission(Role.ENGINEERING_REVIEWER, Role.ADMIN)]

    @extend_schema(request=EvalRequestInputSerializer, responses={202: EvalRunOutputSerializer},
                   summary="Run the quantization eval of this request's model on a cluster")  # fmt: skip
    def post(self, request: Request, code: str) -> Response:
        deployment = deployment_get(request.user, code)
        serializer = EvalRequestInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        cluster = cluster_by_name(data["cluster"])
        if cluster is None:
            raise serializers.ValidationError({"cluster": "no such cluster"})
        evaluation = eval_run_request(
            cluster=cluster,
            scheme=data["scheme"],
            model={"path": data["model_path"], "dtype": "bfloat16"},
            actor=cast(User, request.user),
            deployment=deployment,
            threshold=data["threshold"],
            max_cases_per_category=data.get("max_cases_per_category"),
            eval_set=data.get("eval_set"),
        )
        return Response(EvalRunOutputSerializer(evaluation).data, status=202)
