from django.apps import AppConfig


class EvaluationsConfig(AppConfig):
    name = "governance.evaluations"
    label = "evaluations"
    verbose_name = "Clusters and job runs"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from celery.signals import worker_ready

        from governance.evaluations.tasks import resume_polling_on_start

        # A restarted worker picks up every active run's polling (without submitting again).
        worker_ready.connect(resume_polling_on_start, weak=False)

        from governance.evaluations.evals import on_job_finished
        from governance.evaluations.signals import job_finished

        job_finished.connect(on_job_finished, dispatch_uid="evaluations.job_finished")

        from governance.evaluations.inspections import on_job_finished as on_inspection_finished

        job_finished.connect(on_inspection_finished, dispatch_uid="evaluations.inspection_finished")
