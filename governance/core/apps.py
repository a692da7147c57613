from django.apps import AppConfig


class CoreConfig(AppConfig):
    name = "governance.core"
    label = "core"
    verbose_name = "Core"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from governance.core import schema  # noqa: F401  (registers the OpenAPI extension)
