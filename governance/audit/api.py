"""Audit API: browse events per object, stream exports, download the verifiable bundle."""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from django.db.models import QuerySet
from django.http import FileResponse, StreamingHttpResponse
from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_view
from rest_framework import serializers
from rest_framework.generics import ListAPIView
from rest_framework.request import Request
from rest_framework.views import APIView

from governance.audit.actions import AuditAction
from governance.audit.exports import event_view, iter_csv, iter_jsonl, write_bundle
from governance.audit.models import AuditCheckpoint, AuditEvent
from governance.audit.selectors import audit_checkpoints, audit_events_filter, audit_events_visible_to
from governance.audit.services import audit_record
from governance.core.filters import paging_params, refuse_unknown_params
from governance.core.permissions import role_permission
from governance.core.roles import Role

CanBrowseAudit = role_permission(Role.AUDITOR, Role.ADMIN, Role.LEGAL_REVIEWER, Role.ENGINEERING_REVIEWER)
CanExportAudit = role_permission(Role.AUDITOR, Role.ADMIN)

ACTIONS_BY_LABEL = {action.label: action for action in AuditAction}


class AuditFilterSerializer(serializers.Serializer):
    since = serializers.DateTimeField(required=False, help_text="occurred_at >= since (ISO 8601)")
    until = serializers.DateTimeField(required=False, help_text="occurred_at < until (ISO 8601)")
    actor = serializers.CharField(required=False, max_length=150)
    action = serializers.ChoiceField(choices=sorted(ACTIONS_BY_LABEL), required=False)
    object_type = serializers.CharField(required=False, max_length=64)
    object_id = serializers.CharField(required=False, max_length=64)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if "since" in attrs and "until" in attrs and attrs["since"] >= attrs["until"]:
            raise serializers.ValidationError({"until": "must be later than since"})
        return attrs


def _filtered_events(request: Request, also_allowed: Iterable[str] = ()) -> QuerySet[AuditEvent]:
    """The filtered events; a parameter that is neither a filter nor in `also_allowed` (paging)
    answers 400 naming it, so a misspelt filter never returns (or exports) everything."""
    refuse_unknown_params(request.query_params, set(AuditFilterSerializer().fields) | set(also_allowed))
    params = AuditFilterSerializer(data=request.query_params)
    params.is_valid(raise_exception=True)
    values = dict(params.validated_data)
    if "action" in values:
        values["action"] = int(ACTIONS_BY_LABEL[values["action"]])
    return audit_events_filter(**values)


class AuditEventOutputSerializer(serializers.Serializer):
    """Everything shown is read from the hashed body: an edited display column is never served."""

    seq = serializers.IntegerField()
    occurred_at = serializers.CharField()
    actor = serializers.CharField()
    action = serializers.CharField()
    object_type = serializers.CharField()
    object_id = serializers.CharField()
    request_id = serializers.CharField()
    hash = serializers.CharField()

    def get_fields(self) -> dict[str, serializers.Field]:
        fields = super().get_fields()
        fields["data"] = serializers.JSONField()  # added here: a `data` attribute would shadow Serializer.data
        return fields

    def to_representation(self, instance: AuditEvent) -> dict[str, Any]:
        return super().to_representation({"seq": instance.seq, "hash": instance.hash, **event_view(instance.body)})


class AuditEventListApi(ListAPIView):
    permission_classes = [CanBrowseAudit]
    serializer_class = AuditEventOutputSerializer

    @extend_schema(parameters=[AuditFilterSerializer], summary="Audit events, filtered (e.g. one object's timeline)")
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Any:
        return super().get(request, *args, **kwargs)

    def get_queryset(self) -> QuerySet[AuditEvent]:
        if getattr(self, "swagger_fake_view", False):  # schema generation: no request user, no database
            return AuditEvent.objects.none()
        return audit_events_visible_to(self.request.user, _filtered_events(self.request, paging_params(self)))


class AuditCheckpointOutputSerializer(serializers.ModelSerializer):
    class Meta:
        model = AuditCheckpoint
        fields = ["seq", "head_hash", "origin", "signed_at", "body", "signature", "key_id"]


@extend_schema_view(get=extend_schema(summary="Signed audit checkpoints (seq, head hash, signature, key id)"))
class AuditCheckpointListApi(ListAPIView):
    permission_classes = [CanBrowseAudit]
    serializer_class = AuditCheckpointOutputSerializer

    def get_queryset(self) -> QuerySet[AuditCheckpoint]:
        return audit_checkpoints()


def _record_export(request: Request, kind: str) -> None:
    audit_record(
        actor=request.user,
        action=AuditAction.AUDIT_EXPORTED,
        data={"kind": kind, "filters": dict(request.query_params)},
    )


# An export streams the filtered events in one format: it validates the filters, records who
# exported what, then streams (nothing is held in memory). Comments, not docstrings: a view's
# docstring becomes its description in the OpenAPI schema.
class _AuditExportApi(APIView):
    permission_classes = [CanExportAudit]
    kind: str
    content_type: str
    render: Callable[[QuerySet[AuditEvent]], Iterator[bytes]]

    def get(self, request: Request) -> StreamingHttpResponse:
        events = _filtered_events(request)
        _record_export(request, self.kind)
        response = StreamingHttpResponse(type(self).render(events), content_type=self.content_type)
        response["Content-Disposition"] = f'attachment; filename="audit-events.{self.kind}"'
        return response


def _export_format(
    kind: str, render: Callable[[QuerySet[AuditEvent]], Iterator[bytes]], content_type: str, summary: str
) -> Any:
    """Declare an export's format (file extension, renderer, content type) and its schema."""
    media_type = content_type.split(";")[0]
    schema = extend_schema(
        parameters=[AuditFilterSerializer],
        responses={(200, media_type): OpenApiResponse(OpenApiTypes.BINARY)},
        summary=summary,
    )

    def declare(view: type[_AuditExportApi]) -> type[_AuditExportApi]:
        view.kind, view.content_type, view.render = kind, content_type, render
        return extend_schema_view(get=schema)(view)

    return declare


@_export_format(
    "jsonl",
    iter_jsonl,
    "application/x-ndjson",
    "Stream events as JSON Lines (each line: seq, prev_hash, hash, body verbatim)",
)
class AuditExportJsonlApi(_AuditExportApi): ...


@_export_format("csv", iter_csv, "text/csv; charset=utf-8", "Stream events as CSV for spreadsheets")
class AuditExportCsvApi(_AuditExportApi): ...


class AuditBundleApi(APIView):
    permission_classes = [CanExportAudit]

    @extend_schema(
        responses={(200, "application/zip"): OpenApiResponse(OpenApiTypes.BINARY)},
        summary="The whole chain with checkpoints, public key and manifest, for offline verification",
    )
    def get(self, request: Request) -> FileResponse:
        _record_export(request, "bundle")
        # Spooled to disk past 16 MiB: a large chain never sits in memory.
        spool = tempfile.SpooledTemporaryFile(max_size=16 << 20)  # noqa: SIM115  (FileResponse closes it)
        write_bundle(spool)
        spool.seek(0)
        name = f"audit-bundle-{timezone.now():%Y%m%dT%H%M%SZ}.zip"
        return FileResponse(spool, as_attachment=True, filename=name, content_type="application/zip")
