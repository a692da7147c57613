"""Admin for licenses, versions (terms inline, CEL validated on save) and FX rates."""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.core.exceptions import ValidationError
from django.db.models import QuerySet
from django.http import HttpRequest

from governance.core.admin_base import AuditedModelAdmin
from governance.licenses.engine import TERM_FIELDS
from governance.licenses.models import FxRate, License, LicenseTerm, LicenseVersion
from governance.licenses.services import (
    fx_rate_set,
    license_term_saved,
    license_version_publish,
    license_version_refresh_digest,
)


class LicenseTermInline(admin.StackedInline):
    model = LicenseTerm
    extra = 0
    fields = ("position", *TERM_FIELDS)

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return not (obj is not None and obj.is_locked) and super().has_change_permission(request, obj)

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return not (obj is not None and obj.is_locked) and super().has_add_permission(request, obj)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return not (obj is not None and obj.is_locked) and super().has_delete_permission(request, obj)


@admin.register(License)
class LicenseAdmin(AuditedModelAdmin):
    list_display = ("key", "name", "spdx_id", "scancode_key")
    search_fields = ("key", "name")


@admin.register(LicenseVersion)
class LicenseVersionAdmin(AuditedModelAdmin):
    list_display = ("license", "version", "effective_date", "published_at", "digest")
    list_filter = ("license",)
    readonly_fields = ("digest", "published_at")
    inlines = [LicenseTermInline]
    actions = ["publish"]

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        if obj is not None and obj.is_locked:
            return ("license", "version", "effective_date", "text", "digest", "published_at")
        return self.readonly_fields

    def save_related(self, request: HttpRequest, form: Any, formsets: Any, change: bool) -> None:
        super().save_related(request, form, formsets, change)
        for formset in formsets:
            for term in [*formset.new_objects, *(obj for obj, _ in formset.changed_objects)]:
                license_term_saved(term=term, actor=request.user)
            for term in getattr(formset, "deleted_objects", []):
                license_term_saved(term=term, actor=request.user, deleted=True)
        license_version_refresh_digest(form.instance)

    @admin.action(description="Publish the selected versions (lists requests to re-evaluate)")
    def publish(self, request: HttpRequest, queryset: QuerySet[LicenseVersion]) -> None:
        for version in queryset:
            try:
                affected = license_version_publish(version=version, actor=request.user)
            except Exception as exc:
                self.message_user(request, f"{version}: {exc}", level=messages.ERROR)
                continue
            self.message_user(request, f"published {version}; {len(affected)} evaluated subjects to re-evaluate")


@admin.register(FxRate)
class FxRateAdmin(AuditedModelAdmin):
    list_display = ("currency", "usd_per_unit", "as_of", "source")

    def save_model(self, request: HttpRequest, obj: FxRate, form: Any, change: bool) -> None:
        try:
            fx_rate_set(
                currency=obj.currency,
                usd_per_unit=obj.usd_per_unit,
                as_of=obj.as_of,
                source=obj.source,
                actor=request.user,
            )
        except ValidationError as exc:
            self.message_user(request, str(exc), level=messages.ERROR)
