from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from governance.audit.models import AuditCheckpoint, AuditEvent


class ReadOnlyAdmin(admin.ModelAdmin):
    """The audit tables are append-only; the admin only reads them."""

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(AuditEvent)
class AuditEventAdmin(ReadOnlyAdmin):
    list_display = ("seq", "occurred_at", "actor_name", "action", "object_type", "object_id")
    list_filter = ("action", "object_type")
    search_fields = ("object_id", "actor_name", "request_id")


@admin.register(AuditCheckpoint)
class AuditCheckpointAdmin(ReadOnlyAdmin):
    list_display = ("seq", "signed_at", "origin", "head_hash", "key_id")
