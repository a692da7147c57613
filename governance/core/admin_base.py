"""Base admin classes, so that nothing done in the admin escapes the audit trail.

Records with a life cycle of their own (deployment requests, artifacts, plans, jobs, usage
reports, tokens) are changed only through their services: their admin is read-only
(`ReadOnlyModelAdmin`), with service-backed actions where an operator needs one. Configuration
records (teams, clusters, licenses, users, roles) are edited in the admin through
`AuditedModelAdmin`, which writes an event for every save and every deletion, in the admin
view's transaction (the audit app records the signals these send).
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db import transaction
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse

from governance.core.context import acting_as
from governance.core.signals import admin_object_deleted, admin_object_saved

# Never named in an event: secrets and hashes of them.
_UNRECORDED_FIELDS = {"password", "digest", "private_key", "secret"}


class AuditedModelAdmin(admin.ModelAdmin):
    def _acting(self, request: HttpRequest) -> Any:
        return acting_as(request.user)

    # Membership changes (m2m) fire signals during these views: they name the admin user as actor.
    def changeform_view(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        with self._acting(request):
            return super().changeform_view(request, *args, **kwargs)

    def changelist_view(self, request: HttpRequest, extra_context: Any = None) -> HttpResponse:
        with self._acting(request):
            return super().changelist_view(request, extra_context)

    def delete_view(self, request: HttpRequest, object_id: str, extra_context: Any = None) -> HttpResponse:
        with self._acting(request):
            return super().delete_view(request, object_id, extra_context)

    def save_model(self, request: HttpRequest, obj: Any, form: Any, change: bool) -> None:
        super().save_model(request, obj, form, change)
        fields = sorted(set(form.changed_data) - _UNRECORDED_FIELDS)
        admin_object_saved.send(sender=type(obj), obj=obj, actor=request.user, created=not change, fields=fields)

    def delete_model(self, request: HttpRequest, obj: Any) -> None:
        with transaction.atomic():
            admin_object_deleted.send(sender=type(obj), obj=obj, actor=request.user, bulk=False)
            super().delete_model(request, obj)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> None:
        with transaction.atomic():
            for obj in queryset:
                admin_object_deleted.send(sender=type(obj), obj=obj, actor=request.user, bulk=True)
            super().delete_queryset(request, queryset)


class ReadOnlyModelAdmin(admin.ModelAdmin):
    """Shown, never added, changed or deleted here: the services are the only writers."""

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
