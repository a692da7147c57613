"""Quantize runs: request one (a requester of the parent's team), read one, list the recipes."""

from __future__ import annotations

from typing import Any, cast

from django.contrib.auth.models import User
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from governance.artifacts.selectors import artifacts_visible_to
from governance.core.errors import invalid_input
from governance.core.names import validate_printed_name
from governance.core.permissions import role_permission
from governance.core.roles import Role
from governance.evaluations.selectors import cluster_by_name
from governance.quantization.models import QuantizeRun
from governance.quantization.selectors import quantize_run_get
from governance.quantization.services import DISTRIBUTIONS, quantize_run_request
from planner.quantjob.recipes import RECIPES

Requester = role_permission(Role.REQUESTER)
CanRead = role_permission(Role.ENGINEERING_REVIEWER, Role.ADMIN, Role.AUDITOR, Role.LEGAL_REVIEWER, Role.REQUESTER)


class QuantizeRunInputSerializer(serializers.Serializer):
    parent = serializers.UUIDField(help_text="code of the parent artifact")  # type: ignore[assignment]  # DRF's Field.parent
    cluster = serializers.CharField(max_length=100)
    recipe = serializers.ChoiceField(choices=sorted(RECIPES))
    name = serializers.CharField(
        max_length=100,
        validators=[validate_printed_name],
        help_text="the derivative's name (its license's naming rules apply)",
    )
    model_path = serializers.CharField(max_length=500, help_text="the parent's checkpoint, inside a model root")
    calibration_path = serializers.CharField(max_length=500, required=False, allow_blank=True)
    distribution = serializers.ChoiceField(choices=DISTRIBUTIONS, default="public")
    time_limit_s = serializers.IntegerField(min_value=10, max_value=7 * 24 * 3600, required=False)


class QuantizeRunOutputSerializer(serializers.ModelSerializer):
    parent = serializers.UUIDField(source="parent.code")  # type: ignore[assignment]  # DRF's Field.parent
    cluster = serializers.CharField(source="cluster.name")
    derivative = serializers.UUIDField(source="derivative.code", allow_null=True, default=None)
    job = serializers.UUIDField(source="job.code", allow_null=True, default=None)

    class Meta:
        model = QuantizeRun
        fields = [
            "code",
            "parent",
            "cluster",
            "job",
            "recipe_name",
            "recipe",
            "scheme",
            "derivative_name",
            "output_path",
            "status",
            "reason",
            "derivative",
            "manifest_digest",
            "parent_digest",
            "calibration",
            "tool_versions",
            "license_findings",
            "flagged",
            "created_at",
        ]


class QuantizeRunCreateApi(APIView):
    permission_classes = [Requester]

    @extend_schema(
        request=QuantizeRunInputSerializer,
        responses={202: QuantizeRunOutputSerializer},
        summary="Quantize an artifact with llm-compressor on a cluster; the derivative is registered when done",
    )
    def post(self, request: Request) -> Response:
        given = QuantizeRunInputSerializer(data=request.data)
        given.is_valid(raise_exception=True)
        data: dict[str, Any] = dict(given.validated_data)
        parent = artifacts_visible_to(request.user).filter(code=data["parent"]).first()
        if parent is None:
            raise invalid_input("parent", "no such artifact")
        cluster = cluster_by_name(data["cluster"])
        if cluster is None:
            raise invalid_input("cluster", "no such cluster")
        run = quantize_run_request(
            parent=parent,
            cluster=cluster,
            recipe_name=data["recipe"],
            derivative_name=data["name"],
            actor=cast(User, request.user),
            model_path=data["model_path"],
            calibration_path=data.get("calibration_path") or None,
            distribution=data["distribution"],
            time_limit_s=data.get("time_limit_s"),
        )
        return Response(QuantizeRunOutputSerializer(run).data, status=202)


class QuantizeRunDetailApi(APIView):
    permission_classes = [CanRead]

    @extend_schema(responses=QuantizeRunOutputSerializer, summary="A quantize run: status, lineage, license findings")
    def get(self, request: Request, code: str) -> Response:
        return Response(QuantizeRunOutputSerializer(quantize_run_get(request.user, code)).data)


class RecipeListApi(APIView):
    permission_classes = [CanRead]

    @extend_schema(responses=dict, summary="The quantization recipes, as data")
    def get(self, request: Request) -> Response:
        return Response({name: {"name": name, **recipe} for name, recipe in sorted(RECIPES.items())})
