from django.urls import path

from governance.audit import api

urlpatterns = [
    path("events", api.AuditEventListApi.as_view(), name="audit-events"),
    path("events/export.jsonl", api.AuditExportJsonlApi.as_view(), name="audit-export-jsonl"),
    path("events/export.csv", api.AuditExportCsvApi.as_view(), name="audit-export-csv"),
    path("checkpoints", api.AuditCheckpointListApi.as_view(), name="audit-checkpoints"),
    path("bundle", api.AuditBundleApi.as_view(), name="audit-bundle"),
]
