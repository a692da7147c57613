"""Calibration runs per cluster: start one (engineering), list a cluster's runs, read one with its profile."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import User
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from governance.calibration.models import CalibrationRun
from governance.calibration.selectors import calibration_get, calibration_latest, calibration_runs, cluster_get
from governance.calibration.services import MAX_GPUS, calibration_run_request
from governance.core.errors import NotFoundError
from governance.core.serializers import KeyOrObjectField, StrictSerializer
from governance.evaluations.api import CanRead, Engineering, JobRunOutputSerializer
from governance.evaluations.models import Cluster
from planner.specs import gpus


class CalibrationInputSerializer(StrictSerializer):
    gpu = serializers.ChoiceField(choices=sorted(gpus()), help_text="planner catalog key of the cluster's GPUs")
    model = KeyOrObjectField(help_text="catalog key, or a config.json object, whose GEMM shapes to time")
    gpus = serializers.IntegerField(default=1, min_value=1, max_value=MAX_GPUS, help_text="GPUs of one node")
    time_limit_s = serializers.IntegerField(required=False, min_value=60, max_value=86_400)

    def validate_model(self, value: Any) -> Any:
        if not isinstance(value, str | dict):
            raise serializers.ValidationError("must be a catalog key or a config.json object")
        return value


class CalibrationOutputSerializer(serializers.ModelSerializer):
    cluster = serializers.CharField(source="cluster.name")
    job = JobRunOutputSerializer(read_only=True)
    latest = serializers.SerializerMethodField(help_text="the profile this cluster's plans for this GPU use")

    class Meta:
        model = CalibrationRun
        fields = [
            "code",
            "cluster",
            "gpu",
            "model",
            "status",
            "gpu_name",
            "versions",
            "profile_sha256",
            "error",
            "created_at",
            "updated_at",
            "latest",
            "job",
        ]

    def get_latest(self, obj: CalibrationRun) -> bool:
        latest = self.context.setdefault("latest", {})
        key = (obj.cluster_id, obj.gpu)
        if key not in latest:
            found = calibration_latest(cluster=obj.cluster, gpu=obj.gpu)
            latest[key] = found.pk if found else None
        return bool(latest[key] == obj.pk)


class CalibrationDetailSerializer(CalibrationOutputSerializer):
    class Meta(CalibrationOutputSerializer.Meta):
        fields = [*CalibrationOutputSerializer.Meta.fields, "profile"]


def _cluster(code: str) -> Cluster:
    found = cluster_get(code=code)
    if found is None:
        raise NotFoundError("no such cluster")
    return found


class ClusterCalibrationsApi(APIView):
    def get_permissions(self) -> list[Any]:
        return [Engineering()] if self.request.method == "POST" else [CanRead()]

    @extend_schema(responses=CalibrationOutputSerializer(many=True), summary="A cluster's calibration runs")
    def get(self, request: Request, code: str) -> Response:
        runs = calibration_runs(cluster=_cluster(code))
        return Response(CalibrationOutputSerializer(runs, many=True).data)

    @extend_schema(
        request=CalibrationInputSerializer,
        responses={202: CalibrationOutputSerializer},
        summary="Measure the cluster's GPUs (a job); the latest profile feeds its plans",
    )
    def post(self, request: Request, code: str) -> Response:
        cluster = _cluster(code)
        inputs = CalibrationInputSerializer(data=request.data)
        inputs.is_valid(raise_exception=True)
        data = inputs.validated_data
        actor = request.user if isinstance(request.user, User) else None
        run = calibration_run_request(
            cluster=cluster,
            gpu=data["gpu"],
            model=data["model"],
            actor=actor,
            gpus_per_job=data["gpus"],
            time_limit_s=data.get("time_limit_s"),
        )
        return Response(CalibrationOutputSerializer(run).data, status=202)


class CalibrationDetailApi(APIView):
    permission_classes = [CanRead]

    @extend_schema(responses=CalibrationDetailSerializer, summary="A calibration run with its measured profile")
    def get(self, request: Request, code: str) -> Response:
        run = calibration_get(code=code)
        if run is None:
            raise NotFoundError("no such calibration run")
        return Response(CalibrationDetailSerializer(run).data)
