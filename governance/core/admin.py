from django.contrib import admin
from django.http import HttpRequest

from governance.core.models import ApiToken, Team


@admin.register(Team)
class TeamAdmin(admin.ModelAdmin):
    list_display = ("name", "code", "created_at")
    search_fields = ("name",)
    filter_horizontal = ("members",)


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    # Tokens are issued through `manage.py issue_token` (the clear text is shown once);
    # the admin can only inspect and revoke them.
    list_display = ("name", "user", "prefix", "scopes", "expires_at", "revoked_at", "last_used_at")
    readonly_fields = ("user", "name", "prefix", "digest", "scopes", "expires_at", "last_used_at", "code")
    fields = (*readonly_fields, "revoked_at")

    def has_add_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False
