from django.apps import AppConfig


class ObservabilityConfig(AppConfig):
    name = "governance.observability"
    label = "observability"
    verbose_name = "Observability"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from celery.signals import worker_init

        from governance.core.prometheus import multiprocess_files_clean

        # A Celery worker starting afresh: its earlier run's values are not this run's.
        worker_init.connect(lambda **_: multiprocess_files_clean(), weak=False)
