"""Canary analyses over the API: the pipeline names its canary (a CI token with gate:check for the
request and environment, or an engineering reviewer), anyone who may see the request reads the
analysis with its checks, and an engineering reviewer decides an inconclusive one."""

from __future__ import annotations

import csv
import io
import json
from typing import Any, cast

from django.contrib.auth.models import User
from django.http import HttpResponse
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.permissions import BasePermission
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from governance.canary.models import CanaryAnalysis, MeasurementSource, PlanMeasurement
from governance.canary.selectors import (
    EXPORT_LIMIT,
    calibration_groups,
    canary_analysis_get,
    plan_measurements_visible,
)
from governance.canary.services import canary_analysis_decide, canary_analysis_request
from governance.core.csvcells import csv_safe_row
from governance.core.errors import NotFoundError, PermissionDeniedError, invalid_input
from governance.core.models import ApiToken
from governance.core.permissions import HasAnyRole
from governance.core.roles import Role, has_role
from governance.core.serializers import StrictSerializer
from governance.core.tokens import ENVIRONMENT_PATTERN, TokenScope, token_covers_deployment, token_covers_environment
from governance.deployments.models import DeploymentRequest
from governance.deployments.selectors import deployment_get


class CanaryServingSerializer(StrictSerializer):
    """The serving envelope the canary runs: the gate check's `serving`, the same keys."""

    # transformers serve: the embedded default's CPU engine (its series read under vLLM's names)
    engine = serializers.ChoiceField(choices=["vllm", "sglang", "transformers"])
    engine_version = serializers.RegexField(r"^[A-Za-z0-9_.+-]{1,40}$", required=False)
    precision = serializers.CharField(max_length=20)
    gpu = serializers.CharField(max_length=40)
    kv_dtype = serializers.ChoiceField(choices=["bf16", "fp8"], required=False)
    tp = serializers.IntegerField(min_value=1, max_value=1024, default=1)
    pp = serializers.IntegerField(min_value=1, max_value=1024, default=1)
    ep = serializers.IntegerField(min_value=1, max_value=1024, default=1)
    dp = serializers.IntegerField(min_value=1, max_value=4096, required=False)
    max_model_len = serializers.IntegerField(min_value=1, max_value=100_000_000)
    gpu_memory_utilization = serializers.FloatField(min_value=0.01, max_value=1.0, default=0.9)


class CanaryRequestSerializer(StrictSerializer):
    deployment = serializers.UUIDField()
    environment = serializers.RegexField(ENVIRONMENT_PATTERN, default="production", help_text="where it then rolls")
    artifact_digest = serializers.RegexField(r"^sha256:[0-9a-fA-F]{64}$")
    serving = CanaryServingSerializer()
    endpoint = serializers.URLField(max_length=500, help_text="the canary's OpenAI-compatible base URL")
    model = serializers.CharField(max_length=200, required=False, allow_blank=True, default="")
    credential_ref = serializers.CharField(max_length=100, required=False, allow_blank=True, default="")
    canary_selector = serializers.DictField(child=serializers.CharField(max_length=200), required=False)
    stable_selector = serializers.DictField(child=serializers.CharField(max_length=200), required=False)
    sample_size = serializers.IntegerField(required=False, default=100)
    cluster = serializers.CharField(
        max_length=120, required=False, allow_blank=True, default="", help_text="where the canary runs"
    )


class CanaryDecideSerializer(StrictSerializer):
    decision = serializers.ChoiceField(choices=["promote", "roll_back"])
    reason = serializers.CharField(max_length=4000)


class CanaryAnalysisOutputSerializer(serializers.ModelSerializer):
    deployment = serializers.UUIDField(source="deployment.code")

    class Meta:
        model = CanaryAnalysis
        fields = [
            "code",
            "deployment",
            "digest",
            "envelope",
            "envelope_digest",
            "status",
            "endpoint",
            "model_name",
            "credential_ref",
            "sample_size",
            "cluster",
            "checks",
            "measurements",
            "reference_eval",
            "error",
            "decision_reason",
            "started_at",
            "finished_at",
            "created_at",
        ]


class PipelineOrRole(BasePermission):
    """A CI token of scope gate:check (the role-less pipeline), or a user with a role."""

    message = HasAnyRole.message

    def has_permission(self, request: Request, view: Any) -> bool:
        token = request.auth
        if isinstance(token, ApiToken) and token.scopes:
            return TokenScope.GATE_CHECK in token.scopes
        return HasAnyRole().has_permission(request, view)


def _deployment_for(request: Request, code: Any, environment: str) -> DeploymentRequest:
    """A CI token (gate:check) issued for the request and environment, or a user who sees it."""
    token = request.auth
    if isinstance(token, ApiToken) and token.scopes:
        if TokenScope.GATE_CHECK not in token.scopes:
            raise PermissionDeniedError(f"a canary is started with a CI token of scope {TokenScope.GATE_CHECK}")
        deployment = DeploymentRequest.objects.filter(code=code).first()
        if deployment is None or not token_covers_deployment(token, deployment):
            raise PermissionDeniedError(f"this token is not issued for deployment request {code}")
        if not token_covers_environment(token, environment):
            raise PermissionDeniedError(f"this token is not issued for environment {environment!r}")
        return deployment
    return deployment_get(request.user, code)


class CanaryAnalysisCreateApi(APIView):
    permission_classes = [PipelineOrRole]

    @extend_schema(
        request=CanaryRequestSerializer,
        responses={202: CanaryAnalysisOutputSerializer},
        summary="Start a canary analysis of a deployed canary (the team's CI token, or engineering)",
    )
    def post(self, request: Request) -> Response:
        token = request.auth
        if not (isinstance(token, ApiToken) and token.scopes) and not has_role(
            request.user, Role.ENGINEERING_REVIEWER, Role.ADMIN
        ):
            raise PermissionDeniedError("the pipeline (a CI token) or an engineering reviewer starts a canary analysis")
        serializer = CanaryRequestSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        deployment = _deployment_for(request, data["deployment"], data["environment"])
        analysis = canary_analysis_request(
            deployment=deployment,
            artifact_digest=data["artifact_digest"],
            serving=dict(data["serving"]),
            endpoint=data["endpoint"],
            model_name=data["model"],
            credential_ref=data["credential_ref"],
            canary_selector=data.get("canary_selector"),
            stable_selector=data.get("stable_selector"),
            sample_size=data["sample_size"],
            cluster=data["cluster"],
            actor=request.user if isinstance(request.user, User) else None,
        )
        return Response(CanaryAnalysisOutputSerializer(analysis).data, status=status.HTTP_202_ACCEPTED)


def _visible(request: Request, code: Any) -> CanaryAnalysis:
    analysis = canary_analysis_get(code)
    token = request.auth
    if isinstance(token, ApiToken) and token.scopes:
        if TokenScope.GATE_CHECK not in token.scopes or not token_covers_deployment(token, analysis.deployment):
            raise NotFoundError("no such canary analysis")
        return analysis
    deployment_get(request.user, analysis.deployment.code)  # 404 unless the caller sees the request
    return analysis


class CanaryAnalysisDetailApi(APIView):
    permission_classes = [PipelineOrRole]

    @extend_schema(
        responses={200: CanaryAnalysisOutputSerializer},
        summary="One canary analysis: status, each check's value, threshold and verdict",
    )
    def get(self, request: Request, code: Any) -> Response:
        return Response(CanaryAnalysisOutputSerializer(_visible(request, code)).data)


class CanaryAnalysisDecideApi(APIView):
    permission_classes = [PipelineOrRole]

    @extend_schema(
        request=CanaryDecideSerializer,
        responses={200: CanaryAnalysisOutputSerializer},
        summary="Promote or roll back an inconclusive analysis, with a reason (engineering reviewers)",
    )
    def post(self, request: Request, code: Any) -> Response:
        serializer = CanaryDecideSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        analysis = _visible(request, code)
        decided = canary_analysis_decide(
            analysis=analysis,
            decision=serializer.validated_data["decision"],
            reason=serializer.validated_data["reason"],
            actor=cast(User, request.user),  # authenticated: PipelineOrRole let it in
        )
        return Response(CanaryAnalysisOutputSerializer(decided).data)


class PlanMeasurementSerializer(serializers.ModelSerializer):
    deployment = serializers.UUIDField(source="deployment.code")
    analysis = serializers.UUIDField(source="analysis.code", allow_null=True, default=None)
    measured_at = serializers.DateTimeField(source="created_at")

    class Meta:
        model = PlanMeasurement
        fields = [
            "deployment",
            "analysis",
            "source",
            "cluster",
            "engine",
            "engine_version",
            "gpu",
            "precision",
            "layout",
            "figure",
            "planned",
            "low",
            "high",
            "measured",
            "client",
            "limit",
            "ratio",
            "catalog_ratio",
            "position",
            "verdict",
            "measured_at",
        ]


class CalibrationGroupSerializer(serializers.Serializer):
    """One group of calibration_groups(): per cluster, engine, GPU and figure."""

    cluster = serializers.CharField()
    engine = serializers.CharField()
    gpu = serializers.CharField()
    figure = serializers.CharField()
    n = serializers.IntegerField()
    median_ratio = serializers.FloatField(allow_null=True)
    worse = serializers.IntegerField()


class PlanMeasurementExportSerializer(serializers.Serializer):
    """The JSON export: the groups' median measured / planned ratios and the rows."""

    groups = CalibrationGroupSerializer(many=True)
    rows = PlanMeasurementSerializer(many=True)
    truncated = serializers.BooleanField(help_text="older rows are left: the groups stand on this page's rows only")
    next_before = serializers.UUIDField(allow_null=True, help_text="`before` for the next page; null on the last")


class PlanMeasurementFilterSerializer(StrictSerializer):
    cluster = serializers.CharField(max_length=120, required=False, allow_blank=True, default="")
    engine = serializers.CharField(max_length=40, required=False, allow_blank=True, default="")
    # named as the query parameter; DRF moves declared fields off the class (mypy sees Field.source)
    source = serializers.ChoiceField(choices=MeasurementSource.choices, required=False, allow_blank=True, default="")  # type: ignore[assignment]
    export = serializers.ChoiceField(choices=["json", "csv"], required=False, default="json")
    before = serializers.UUIDField(
        required=False, allow_null=True, default=None, help_text="the previous page's next_before: older rows"
    )


class PlanMeasurementExportApi(APIView):
    """The canary's (and the fleet's) measured figures against the capacity plan, for the planner's
    calibration per cluster and engine: JSON (the groups' median measured / planned ratios and the
    rows) or CSV (`?export=csv`, the rows). Engineering reviewers, auditors and admins; only the rows
    of requests the caller may see."""

    permission_classes = [HasAnyRole]

    @extend_schema(
        parameters=[PlanMeasurementFilterSerializer],
        responses={200: PlanMeasurementExportSerializer},
        summary="Measured vs planned TTFT / TPOT / KV usage per cluster and engine (calibration export)",
    )
    def get(self, request: Request) -> HttpResponse:
        if not has_role(request.user, Role.ENGINEERING_REVIEWER, Role.AUDITOR, Role.ADMIN):
            raise PermissionDeniedError("engineering reviewers, auditors and admins export the plan measurements")
        query = PlanMeasurementFilterSerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        filters = query.validated_data
        try:
            found = plan_measurements_visible(
                request.user,
                cluster=filters["cluster"],
                engine=filters["engine"],
                source=filters["source"],
                before=filters["before"],
            )
        except NotFoundError:
            raise invalid_input("before", "no such row of this export: give a next_before it answered") from None
        rows = list(found[: EXPORT_LIMIT + 1])  # one more: whether older rows are left
        truncated = len(rows) > EXPORT_LIMIT
        rows = rows[:EXPORT_LIMIT]
        next_before = str(rows[-1].code) if truncated else None
        data = PlanMeasurementSerializer(rows, many=True).data
        if filters["export"] == "csv":
            buffer = io.StringIO()
            writer = csv.DictWriter(buffer, fieldnames=PlanMeasurementSerializer.Meta.fields)
            writer.writeheader()
            for row in data:
                writer.writerow(csv_safe_row({**row, "layout": json.dumps(row["layout"], sort_keys=True)}))
            response = HttpResponse(buffer.getvalue(), content_type="text/csv; charset=utf-8")
            response["Content-Disposition"] = 'attachment; filename="plan-measurements.csv"'
            response["X-Export-Truncated"] = "true" if truncated else "false"
            if next_before:
                response["X-Export-Next-Before"] = next_before
            return response
        # A truncated page's groups stand on its rows only: `truncated` says so, `next_before` pages on.
        return Response(
            {"groups": calibration_groups(rows), "rows": data, "truncated": truncated, "next_before": next_before}
        )
