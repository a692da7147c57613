from django.contrib import admin

from governance.audit.exports import event_view
from governance.audit.models import AuditCheckpoint, AuditEvent
from governance.core.admin_base import ReadOnlyModelAdmin


@admin.register(AuditEvent)
class AuditEventAdmin(ReadOnlyModelAdmin):
    # Shown from the hashed body, not the display columns (a superuser could edit those unnoticed).
    list_display = ("seq", "shown_time", "shown_actor", "shown_action", "shown_object")
    fields = ("seq", "body", "prev_hash", "hash")
    list_filter = ("action", "object_type")
    search_fields = ("object_id", "actor_name", "request_id")

    @admin.display(description="occurred at")
    def shown_time(self, event: AuditEvent) -> str:
        return str(event_view(event.body)["occurred_at"])

    @admin.display(description="actor")
    def shown_actor(self, event: AuditEvent) -> str:
        return str(event_view(event.body)["actor"])

    @admin.display(description="action")
    def shown_action(self, event: AuditEvent) -> str:
        return str(event_view(event.body)["action"])

    @admin.display(description="object")
    def shown_object(self, event: AuditEvent) -> str:
        view = event_view(event.body)
        return f"{view['object_type']} {view['object_id']}".strip()


@admin.register(AuditCheckpoint)
class AuditCheckpointAdmin(ReadOnlyModelAdmin):
    list_display = ("seq", "signed_at", "origin", "head_hash", "key_id")
