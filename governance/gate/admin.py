from django.contrib import admin
from django.http import HttpRequest

from governance.gate.models import GateDecision


@admin.register(GateDecision)
class GateDecisionAdmin(admin.ModelAdmin):
    # The decision log is evidence: the admin may read it, never change or delete it.
    list_display = ("created_at", "deployment", "environment", "decision", "token_name")
    list_filter = ("decision", "environment")
    search_fields = ("token_prefix", "deployment__code")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False
