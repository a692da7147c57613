"""Clusters (test connection, discovery) and job-run progress / cancel."""

from __future__ import annotations

from typing import Any, cast

from django.contrib.auth.models import User
from django.db.models import QuerySet
from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import serializers
from rest_framework.generics import ListAPIView
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from governance.artifacts.selectors import artifact_get
from governance.core.errors import PermissionDeniedError
from governance.core.permissions import role_permission
from governance.core.roles import Role, has_role
from governance.evaluations.evals import artifact_location_register
from governance.evaluations.models import ArtifactInspection, ArtifactLocation, Cluster, EvalRun, JobRun
from governance.evaluations.selectors import (
    artifact_inspections,
    artifact_weights_precision,
    cluster_get,
    clusters_visible_to,
    evalrun_get,
    jobrun_get,
)
from governance.evaluations.services import cluster_discover, cluster_test_connection, jobrun_cancel
from governance.licenses.selectors import license_text_match

Engineering = role_permission(Role.ENGINEERING_REVIEWER, Role.ADMIN)
CanRead = role_permission(Role.ENGINEERING_REVIEWER, Role.ADMIN, Role.AUDITOR, Role.LEGAL_REVIEWER, Role.REQUESTER)


class ClusterOutputSerializer(serializers.ModelSerializer):
    class Meta:
        model = Cluster
        # key_path and host keys are configuration, not shown; the private key is never stored at all
        fields = [
            "code",
            "name",
            "executor",
            "host",
            "port",
            "user",
            "remote_root",
            "model_roots",
            "lm_eval_dir",
            "partition",
            "account",
            "qos",
            "gres_pattern",
            "default_time_limit_s",
            "last_test_at",
            "last_test_ok",
            "last_test_message",
            "inventory",
            "discovered_at",
        ]


class JobRunOutputSerializer(serializers.ModelSerializer):
    cluster = serializers.CharField(source="cluster.name")
    elapsed_s = serializers.SerializerMethodField()

    class Meta:
        model = JobRun
        fields = [
            "code",
            "cluster",
            "kind",
            "state",
            "attempt",
            "max_attempts",
            "job_id",
            "slurm_state",
            "reason",
            "submitted_at",
            "finished_at",
            "elapsed_s",
            "log_tail",
            "result",
            "time_limit_s",
        ]

    def get_elapsed_s(self, obj: JobRun) -> float | None:
        from django.utils import timezone

        if obj.submitted_at is None:
            return None
        return round(((obj.finished_at or timezone.now()) - obj.submitted_at).total_seconds(), 1)


@extend_schema_view(get=extend_schema(summary="Clusters jobs can run on (connection details are not shown)"))
class ClusterListApi(ListAPIView):
    permission_classes = [CanRead]
    serializer_class = ClusterOutputSerializer

    def get_queryset(self) -> QuerySet[Cluster]:
        return clusters_visible_to(self.request.user)


class ClusterTestApi(APIView):
    permission_classes = [Engineering]

    @extend_schema(request=None, responses=ClusterOutputSerializer, summary="Test the SSH connection (sinfo --version)")
    def post(self, request: Request, code: str) -> Response:
        return Response(ClusterOutputSerializer(cluster_test_connection(cluster=cluster_get(request.user, code))).data)


class ClusterDiscoverApi(APIView):
    permission_classes = [Engineering]

    @extend_schema(request=None, responses={202: JobRunOutputSerializer}, summary="Record nodes and GPUs (a job)")
    def post(self, request: Request, code: str) -> Response:
        run = cluster_discover(cluster=cluster_get(request.user, code), actor=cast(User, request.user))
        return Response(JobRunOutputSerializer(run).data, status=202)


class JobRunDetailApi(APIView):
    permission_classes = [CanRead]

    @extend_schema(responses=JobRunOutputSerializer, summary="Progress of a job run: state, elapsed, last log lines")
    def get(self, request: Request, code: str) -> Response:
        return Response(JobRunOutputSerializer(jobrun_get(request.user, code)).data)


class JobRunCancelApi(APIView):
    permission_classes = [Engineering]

    @extend_schema(request=None, responses=JobRunOutputSerializer, summary="Cancel a job run (it ends cancelled)")
    def post(self, request: Request, code: str) -> Response:
        run = jobrun_get(request.user, code)
        return Response(JobRunOutputSerializer(jobrun_cancel(run=run, actor=cast(User, request.user))).data)


class EvalRunOutputSerializer(serializers.ModelSerializer):
    job = serializers.SerializerMethodField()
    kind_label = serializers.CharField(source="get_kind_display", read_only=True)

    class Meta:
        model = EvalRun
        fields = [
            "code",
            "kind",  # served (counts for readiness) or screening (simulated quantization, never counts)
            "kind_label",
            "scheme",
            "status",
            "candidate_digest",
            "baseline_digest",
            "engine",
            "engine_version",
            "serving",
            "generation",
            "threshold",
            "eval_set_sha256",
            "summary",
            "job",
            "created_at",
        ]

    def get_job(self, obj: EvalRun) -> dict[str, Any] | None:
        return dict(JobRunOutputSerializer(obj.job).data) if obj.job else None


class ArtifactLocationInputSerializer(serializers.Serializer):
    artifact = serializers.UUIDField()
    path = serializers.RegexField(r"^/[A-Za-z0-9_./-]{1,400}$", help_text="the checkpoint directory on the cluster")
    manifest = serializers.CharField(
        required=False,
        max_length=10_000_000,
        trim_whitespace=False,
        help_text="the file manifest (sha256 size path per line) whose SHA-256 is the weights digest",
    )


class ArtifactLocationOutputSerializer(serializers.ModelSerializer):
    artifact = serializers.UUIDField(source="artifact.code")
    weights_digest = serializers.CharField(source="artifact.weights_digest")
    cluster = serializers.CharField(source="cluster.name")
    manifest_files = serializers.SerializerMethodField()

    class Meta:
        model = ArtifactLocation
        fields = ["code", "artifact", "weights_digest", "cluster", "path", "manifest_files", "created_at"]

    def get_manifest_files(self, obj: ArtifactLocation) -> int:
        return len(obj.manifest.splitlines())


class ArtifactLocationCreateApi(APIView):
    permission_classes = [role_permission(Role.ENGINEERING_REVIEWER, Role.ADMIN, Role.REQUESTER)]

    @extend_schema(
        request=ArtifactLocationInputSerializer,
        responses={201: ArtifactLocationOutputSerializer},
        summary="Record where an artifact's files lie on this cluster (under one of its model roots)",
    )
    def post(self, request: Request, code: str) -> Response:
        cluster = cluster_get(request.user, code)
        serializer = ArtifactLocationInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        artifact = artifact_get(request.user, data["artifact"])  # an artifact the caller may not see is not found
        operator = has_role(request.user, Role.ENGINEERING_REVIEWER, Role.ADMIN)
        if not operator and not artifact.team.members.filter(pk=cast(User, request.user).pk).exists():
            raise PermissionDeniedError("only the artifact's team or an engineering reviewer records its location")
        location = artifact_location_register(
            artifact=artifact,
            cluster=cluster,
            path=data["path"],
            manifest=data.get("manifest"),
            actor=cast(User, request.user),
        )
        return Response(ArtifactLocationOutputSerializer(location).data, status=201)


class EvalRunDetailApi(APIView):
    permission_classes = [CanRead]

    @extend_schema(
        responses=EvalRunOutputSerializer, summary="An eval run: per-category bound vs threshold, failing cases"
    )
    def get(self, request: Request, code: str) -> Response:
        return Response(EvalRunOutputSerializer(evalrun_get(request.user, code)).data)


class ArtifactInspectionOutputSerializer(serializers.ModelSerializer):
    cluster = serializers.CharField(source="cluster.name")
    job = serializers.UUIDField(source="job.code", default=None)
    model_card = serializers.SerializerMethodField()
    license_files = serializers.SerializerMethodField()
    tensors = serializers.SerializerMethodField()
    problems = serializers.SerializerMethodField()

    class Meta:
        model = ArtifactInspection
        fields = [
            "code",
            "cluster",
            "path",
            "status",
            "reason",
            "refused_file",
            "weights_digest",
            "precision",
            "tensors",
            "model_card",
            "license_files",
            "problems",
            "job",
            "created_at",
            "updated_at",
        ]

    def _report(self, obj: ArtifactInspection, key: str) -> Any:
        return (obj.report or {}).get(key)

    def get_model_card(self, obj: ArtifactInspection) -> Any:
        return self._report(obj, "model_card")

    def get_tensors(self, obj: ArtifactInspection) -> Any:
        return self._report(obj, "tensors")

    def get_problems(self, obj: ArtifactInspection) -> Any:
        return self._report(obj, "problems") or []

    def get_license_files(self, obj: ArtifactInspection) -> list[dict[str, Any]]:
        files = []
        for item in self._report(obj, "license_files") or []:
            match = license_text_match(str(item.get("fingerprint")))
            files.append({**item, "matches": f"{match.license} {match.version}" if match else None})
        return files


class ArtifactInspectionListApi(APIView):
    @extend_schema(
        responses=ArtifactInspectionOutputSerializer(many=True),
        summary="What the artifact's own files say: each inspection of them on a cluster, newest first",
    )
    def get(self, request: Request, code: str) -> Response:
        artifact = artifact_get(request.user, code)  # an artifact the caller may not see is not found
        inspections = artifact_inspections(artifact)
        return Response(
            {
                "weights": artifact_weights_precision(artifact).as_evidence(),
                "results": ArtifactInspectionOutputSerializer(inspections, many=True).data,
            }
        )
