from django.apps import AppConfig


class AuditConfig(AppConfig):
    name = "governance.audit"
    label = "audit"
    verbose_name = "Audit trail"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from governance.audit import receivers  # noqa: F401  (connects the signal receivers)
