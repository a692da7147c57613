from django.apps import AppConfig


class CoreConfig(AppConfig):
    name = "governance.core"
    label = "core"
    verbose_name = "Core"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Registers the OpenAPI extension, and makes our Celery app the one @shared_task binds to.
        from governance import celery  # noqa: F401
        from governance.core import schema  # noqa: F401
