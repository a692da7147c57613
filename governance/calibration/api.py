"""Calibration runs per cluster: start one (engineering), list a cluster's runs, read one with its profile.
Startup logs per cluster: record one (engineering), list them (issue 47)."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import User
from django.db.models import QuerySet
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from governance.calibration.models import CalibrationRun, StartupLog
from governance.calibration.selectors import (
    calibration_get,
    calibration_latest,
    calibration_runs,
    cluster_get,
    startup_logs,
)
from governance.calibration.services import MAX_GPUS, MAX_LOG_CHARS, calibration_run_request, startup_log_record
from governance.core.errors import NotFoundError, invalid_input
from governance.core.serializers import EngineVersionField, KeyOrObjectField, StrictSerializer
from governance.core.visibility import hidden_objects, object_visible
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


DEPLOYMENT_SUBJECT = "deployments.deploymentrequest"  # as capacity plans name a request (a label, no import)


class StartupLogInputSerializer(StrictSerializer):
    text = serializers.CharField(max_length=MAX_LOG_CHARS, trim_whitespace=False, help_text="the engine's log")
    gpu = serializers.ChoiceField(choices=sorted(gpus()), help_text="planner catalog key of the GPUs it ran on")
    model = KeyOrObjectField(help_text="catalog key, or a config.json object, of the model it served")
    precision = serializers.CharField(default="auto", max_length=20, help_text="as served; auto: the checkpoint's")
    engine_version = EngineVersionField(required=False)
    deployment = serializers.UUIDField(required=False, help_text="the deployment request whose deployment it is")

    def validate_model(self, value: Any) -> Any:
        if not isinstance(value, str | dict):
            raise serializers.ValidationError("must be a catalog key or a config.json object")
        return value


class StartupLogOutputSerializer(serializers.ModelSerializer):
    cluster = serializers.CharField(source="cluster.name")
    deployment = serializers.SerializerMethodField()

    class Meta:
        model = StartupLog
        fields = [
            "code",
            "cluster",
            "gpu",
            "engine",
            "engine_version",
            "release_line",
            "model",
            "precision",
            "text_sha256",
            "log_settings",
            "figures",
            "planned",
            "kv_pool_residual_bytes",
            "weights_ratio",
            "deployment",
            "created_at",
        ]

    def get_deployment(self, obj: StartupLog) -> str | None:
        if obj.subject_type != DEPLOYMENT_SUBJECT or obj.subject_id in self.context.get("hidden_deployments", ()):
            return None
        return obj.subject_id


def _deployments_hidden_in(user: Any, logs: QuerySet[StartupLog]) -> set[str]:
    """The request codes `logs` name that `user` would get 404 for (core.visibility: the deployments
    app's own rule, as the audit trail applies it): any reader lists a cluster's logs, but which
    request of another team printed one is that team's. Fails closed: no rule registered, all hidden."""
    named = logs.filter(subject_type=DEPLOYMENT_SUBJECT).values_list("subject_id", flat=True)
    hidden = hidden_objects(user).get(DEPLOYMENT_SUBJECT)
    if hidden is None:
        return set(named)
    return set(named.filter(subject_id__in=hidden))


class ClusterStartupLogsApi(APIView):
    def get_permissions(self) -> list[Any]:
        return [Engineering()] if self.request.method == "POST" else [CanRead()]

    @extend_schema(responses=StartupLogOutputSerializer(many=True), summary="A cluster's startup logs")
    def get(self, request: Request, code: str) -> Response:
        logs = startup_logs(cluster=_cluster(code))
        context = {"hidden_deployments": _deployments_hidden_in(request.user, logs)}
        return Response(StartupLogOutputSerializer(logs, many=True, context=context).data)

    @extend_schema(
        request=StartupLogInputSerializer,
        responses={201: StartupLogOutputSerializer},
        summary="Record an engine startup log: plans for this cluster, GPU, engine and release line use it",
    )
    def post(self, request: Request, code: str) -> Response:
        cluster = _cluster(code)
        inputs = StartupLogInputSerializer(data=request.data)
        inputs.is_valid(raise_exception=True)
        data = inputs.validated_data
        if data.get("deployment") and not object_visible(request.user, DEPLOYMENT_SUBJECT, str(data["deployment"])):
            # a mistyped code would be stored as the evidence of no request: nothing held against any plan
            raise invalid_input("deployment", "no such deployment request (or not one you may see)")
        actor = request.user if isinstance(request.user, User) else None
        stored = startup_log_record(
            cluster=cluster,
            text=data["text"],
            gpu=data["gpu"],
            model=data["model"],
            precision=data["precision"],
            engine_version=data.get("engine_version"),
            subject=(DEPLOYMENT_SUBJECT, str(data["deployment"])) if data.get("deployment") else None,
            actor=actor,
        )
        return Response(StartupLogOutputSerializer(stored).data, status=201)
