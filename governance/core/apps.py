from django.apps import AppConfig


class CoreConfig(AppConfig):
    name = "governance.core"
    label = "core"
    verbose_name = "Core"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Registers the OpenAPI extension, and makes our Celery app the one @shared_task binds to.
        from celery.signals import task_postrun, worker_ready

        from governance import celery  # noqa: F401
        from governance.core import schema  # noqa: F401
        from governance.core.outbox import on_task_postrun
        from governance.core.tasks import outbox_flush_on_start

        # The transactional outbox: workers acknowledge the rows their tasks came from, and a
        # restarted worker sends again what a killed one held (governance.core.outbox).
        task_postrun.connect(on_task_postrun, weak=False, dispatch_uid="core.outbox_ack")
        worker_ready.connect(outbox_flush_on_start, weak=False, dispatch_uid="core.outbox_on_start")
