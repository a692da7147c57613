"""Clusters (test connection, discovery) and job-run progress / cancel."""

from __future__ import annotations

from typing import cast

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
from governance.evaluations.models import Cluster, JobRun
from governance.evaluations.services import cluster_discover, cluster_test_connection, jobrun_cancel

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
