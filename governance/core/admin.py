from axes.models import AccessAttempt, AccessFailureLog, AccessLog
from django.contrib import admin, messages
from django.contrib.auth.admin import GroupAdmin, UserAdmin
from django.contrib.auth.models import Group, User
from django.db.models import QuerySet
from django.http import HttpRequest

from governance.core.admin_base import AuditedModelAdmin, ReadOnlyModelAdmin
from governance.core.models import ApiToken, OutboxMessage, Team
from governance.core.tokens import api_token_revoke


@admin.register(Team)
class TeamAdmin(AuditedModelAdmin):
    list_display = ("name", "code", "created_at")
    search_fields = ("name",)
    filter_horizontal = ("members",)


@admin.register(ApiToken)
class ApiTokenAdmin(ReadOnlyModelAdmin):
    # Tokens are issued through `manage.py issue_token` (the clear text is shown once); the admin
    # inspects them and revokes through the service, which records the revocation.
    list_display = ("name", "user", "prefix", "scopes", "expires_at", "revoked_at", "last_used_at")
    fields = ("user", "name", "prefix", "scopes", "expires_at", "revoked_at", "last_used_at", "code")
    actions = ["revoke"]

    @admin.action(description="Revoke the selected tokens")
    def revoke(self, request: HttpRequest, queryset: QuerySet[ApiToken]) -> None:
        for token in queryset.filter(revoked_at__isnull=True):
            api_token_revoke(token=token, actor=request.user)  # type: ignore[arg-type]  # admin: a staff user
            self.message_user(request, f"revoked {token}", level=messages.SUCCESS)


# Users and roles (groups): edited in the admin, every save, deletion and membership change audited.
@admin.register(OutboxMessage)
class OutboxMessageAdmin(ReadOnlyModelAdmin):
    """Tasks waiting for the broker or a worker's acknowledgement; read-only (beat re-sends them)."""

    list_display = ("task", "args", "created_at", "sent_at", "acked_at", "attempts", "last_error")
    list_filter = ("task",)
    search_fields = ("task",)


admin.site.unregister(User)
admin.site.unregister(Group)


@admin.register(User)
class AuditedUserAdmin(AuditedModelAdmin, UserAdmin):
    pass


@admin.register(Group)
class AuditedGroupAdmin(AuditedModelAdmin, GroupAdmin):
    pass


# django-axes' lockout records: an admin may delete one (to unlock an account), and that deletion
# is on the audit trail like any other admin write. axes is installed before this app, so its own
# admins are registered by the time this module runs.
for _model in (AccessAttempt, AccessLog, AccessFailureLog):
    _axes_admin = type(admin.site._registry[_model])
    admin.site.unregister(_model)
    admin.site.register(_model, type(f"Audited{_axes_admin.__name__}", (AuditedModelAdmin, _axes_admin), {}))
