"""Clusters (test connection, discovery) and job-run progress / cancel."""

from __future__ import annotations

from typing import Any, cast

from django.contrib.auth.models import User
from django.db.models import QuerySet
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.generics import ListAPIView
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from governance.core.errors import NotFoundError
from governance.core.permissions import role_permission
from governance.core.roles import Role
from governance.evaluations.evals import eval_run_request
from governance.evaluations.models import Cluster, EvalRun, JobRun
from governance.evaluations.services import cluster_discover, cluster_test_connection, jobrun_cancel
from planner.quant.schemes import SCHEMES

Engineering = role_permission(Role.ENGINEERING_REVIEWER, Role.ADMIN)
CanRead = role_permission(Role.ENGINEERING_REVIEWER, Role.ADMIN, Role.AUDITOR, Role.LEGAL_REVIEWER, Role.REQUESTER)


class ClusterOutputSerializer(serializers.ModelSerializer):
    class Meta:
        model = Cluster
        # key_path and host keys are configuration, not shown; the private key is never stored at all
        fields = ["code", "name", "executor", "host", "port", "user", "remote_root", "partition", "account", "qos",
                  "gres_pattern", "default_time_limit_s", "last_test_at", "last_test_ok", "last_test_message",
                  "inventory", "discovered_at"]  # fmt: skip


class JobRunOutputSerializer(serializers.ModelSerializer):
    cluster = serializers.CharField(source="cluster.name")
    elapsed_s = serializers.SerializerMethodField()

    class Meta:
        model = JobRun
        fields = ["code", "cluster", "kind", "state", "attempt", "max_attempts", "job_id", "slurm_state", "reason",
                  "submitted_at", "finished_at", "elapsed_s", "log_tail", "result", "time_limit_s"]  # fmt: skip

    def get_elapsed_s(self, obj: JobRun) -> float | None:
        from django.utils import timezone

        if obj.submitted_at is None:
            return None
        return round(((obj.finished_at or timezone.now()) - obj.submitted_at).total_seconds(), 1)


def _cluster(code: str) -> Cluster:
    found = Cluster.objects.filter(code=code).first()
    if found is None:
        raise NotFoundError("no such cluster")
    return found


class ClusterListApi(ListAPIView):
    permission_classes = [CanRead]
    serializer_class = ClusterOutputSerializer

    def get_queryset(self) -> QuerySet[Cluster]:
        return Cluster.objects.all()


class ClusterTestApi(APIView):
    permission_classes = [Engineering]

    @extend_schema(request=None, responses=ClusterOutputSerializer, summary="Test the SSH connection (sinfo --version)")
    def post(self, request: Request, code: str) -> Response:
        return Response(ClusterOutputSerializer(cluster_test_connection(cluster=_cluster(code))).data)


class ClusterDiscoverApi(APIView):
    permission_classes = [Engineering]

    @extend_schema(request=None, responses={202: JobRunOutputSerializer}, summary="Record nodes and GPUs (a job)")
    def post(self, request: Request, code: str) -> Response:
        run = cluster_discover(cluster=_cluster(code), actor=cast(User, request.user))
        return Response(JobRunOutputSerializer(run).data, status=202)


class JobRunDetailApi(APIView):
    permission_classes = [CanRead]

    @extend_schema(responses=JobRunOutputSerializer, summary="Progress of a job run: state, elapsed, last log lines")
    def get(self, request: Request, code: str) -> Response:
        run = JobRun.objects.select_related("cluster").filter(code=code).first()
        if run is None:
            raise NotFoundError("no such job run")
        return Response(JobRunOutputSerializer(run).data)


class JobRunCancelApi(APIView):
    permission_classes = [Engineering]

    @extend_schema(request=None, responses=JobRunOutputSerializer)
    def post(self, request: Request, code: str) -> Response:
        run = JobRun.objects.select_related("cluster").filter(code=code).first()
        if run is None:
            raise NotFoundError("no such job run")
        return Response(JobRunOutputSerializer(jobrun_cancel(run=run, actor=cast(User, request.user))).data)


class EvalRequestInputSerializer(serializers.Serializer):
    cluster = serializers.CharField(max_length=100)
    scheme = serializers.ChoiceField(choices=sorted(SCHEMES))
    model_path = serializers.RegexField(r"^/[A-Za-z0-9_./-]{1,400}$", help_text="checkpoint directory on the cluster")
    threshold = serializers.FloatField(default=0.05, min_value=0.001, max_value=0.5)
    max_cases_per_category = serializers.IntegerField(required=False, min_value=1, max_value=10_000)
    eval_set = serializers.CharField(required=False, max_length=20_000_000, trim_whitespace=False,
                                     help_text="your own eval set as JSONL (id, category, turns, key_items per line)")  # fmt: skip


class EvalRunOutputSerializer(serializers.ModelSerializer):
    job = serializers.SerializerMethodField()

    class Meta:
        model = EvalRun
        fields = ["code", "scheme", "status", "threshold", "eval_set_sha256", "summary", "job", "created_at"]

    def get_job(self, obj: EvalRun) -> dict[str, Any] | None:
        return dict(JobRunOutputSerializer(obj.job).data) if obj.job else None


class DeploymentEvalCreateApi(APIView):
    permission_classes = [Engineering]

    @extend_schema(request=EvalRequestInputSerializer, responses={202: EvalRunOutputSerializer},
                   summary="Run the quantization eval of this request's model on a cluster")  # fmt: skip
    def post(self, request: Request, code: str) -> Response:
        from governance.deployments.selectors import deployment_get

        deployment = deployment_get(request.user, code)
        serializer = EvalRequestInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        cluster = Cluster.objects.filter(name=data["cluster"]).first()
        if cluster is None:
            raise serializers.ValidationError({"cluster": "no such cluster"})
        evaluation = eval_run_request(
            cluster=cluster,
            scheme=data["scheme"],
            model={"path": data["model_path"], "dtype": "bfloat16"},
            actor=cast(User, request.user),
            request=deployment,
            threshold=data["threshold"],
            max_cases_per_category=data.get("max_cases_per_category"),
            eval_set=data.get("eval_set"),
        )
        return Response(EvalRunOutputSerializer(evaluation).data, status=202)


class EvalRunDetailApi(APIView):
    permission_classes = [CanRead]

    @extend_schema(
        responses=EvalRunOutputSerializer, summary="An eval run: per-category bound vs threshold, failing cases"
    )
    def get(self, request: Request, code: str) -> Response:
        evaluation = EvalRun.objects.select_related("job", "job__cluster").filter(code=code).first()
        if evaluation is None:
            raise NotFoundError("no such eval run")
        return Response(EvalRunOutputSerializer(evaluation).data)
