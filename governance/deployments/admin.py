from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from governance.core.admin_base import ReadOnlyModelAdmin
from governance.deployments.models import DeploymentRequest, ObligationItem, SignOff, UsageReport, Waiver


class ReadOnlyInline(admin.TabularInline):
    extra = 0
    can_delete = False

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class SignOffInline(ReadOnlyInline):
    # The decision and how it was made; its PDF signature is the approvals app's (PacketSignature).
    model = SignOff
    fields = (
        "role",
        "decision",
        "signer",
        "signer_name",
        "signed_at",
        "auth_method",
        "evidence_digest",
        "comment",
        "voided_at",
        "void_reason",
    )


class ObligationInline(ReadOnlyInline):
    model = ObligationItem
    fields = ("license_key", "finding_code", "clause", "status", "how_met")


class WaiverInline(ReadOnlyInline):
    model = Waiver
    fields = ("license_key", "finding_code", "clause", "reason", "expires_at", "granted_by")


@admin.register(DeploymentRequest)
class DeploymentRequestAdmin(ReadOnlyModelAdmin):
    # Status and evidence change only through the services (audited); the admin reads. No delete,
    # single or bulk: a request's history is evidence.
    list_display = ("product_name", "team", "status", "flagged", "approval_expires_at", "created_at")
    list_filter = ("status", "flagged", "team")
    search_fields = ("product_name", "code")
    readonly_fields = [f.name for f in DeploymentRequest._meta.fields]
    inlines = [SignOffInline, ObligationInline, WaiverInline]


@admin.register(UsageReport)
class UsageReportAdmin(ReadOnlyModelAdmin):
    list_display = ("request", "month", "monthly_active_users", "revenue_amount", "revenue_currency", "crossed")
    readonly_fields = [f.name for f in UsageReport._meta.fields]
