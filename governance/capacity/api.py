"""POST /api/v1/planner/plan (stateless, docs/contracts.md contract) and stored plans."""

from __future__ import annotations

from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from governance.capacity.models import CapacityPlan
from governance.capacity.selectors import capacity_plan_get
from governance.capacity.serializers import PlanInputSerializer
from governance.capacity.services import capacity_plan_request, capacity_plan_run
from governance.core.exceptions import validation_error_response


def _validated(request: Request) -> dict[str, Any] | Response:
    if not isinstance(request.data, dict):
        return validation_error_response({"non_field_errors": ["expected a JSON object"]})
    serializer = PlanInputSerializer(data=request.data)
    serializer.is_valid(raise_exception=True)
    return dict(serializer.validated_data)


class PlannerPlanApi(APIView):
    @extend_schema(request=PlanInputSerializer, responses=OpenApiTypes.OBJECT, summary="Plan a deployment (stateless)")
    def post(self, request: Request) -> Response:
        inputs = _validated(request)
        if isinstance(inputs, Response):
            return inputs
        return Response(capacity_plan_run(inputs))


class CapacityPlanOutputSerializer(serializers.ModelSerializer):
    class Meta:
        model = CapacityPlan
        fields = ["code", "status", "fits", "inputs", "result", "error", "planner_version", "created_at", "computed_at"]


class CapacityPlanCreateApi(APIView):
    @extend_schema(
        request=PlanInputSerializer,
        responses={202: CapacityPlanOutputSerializer},
        summary="Store a plan and compute it in the background",
    )
    def post(self, request: Request) -> Response:
        inputs = _validated(request)
        if isinstance(inputs, Response):
            return inputs
        stored = capacity_plan_request(inputs=inputs, actor=request.user)
        return Response(CapacityPlanOutputSerializer(stored).data, status=202)


class CapacityPlanDetailApi(APIView):
    @extend_schema(responses=CapacityPlanOutputSerializer, summary="A stored capacity plan (status, result)")
    def get(self, request: Request, code: str) -> Response:
        return Response(CapacityPlanOutputSerializer(capacity_plan_get(request.user, code)).data)
