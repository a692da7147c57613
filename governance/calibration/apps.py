from django.apps import AppConfig


class CalibrationConfig(AppConfig):
    name = "governance.calibration"
    label = "calibration"
    verbose_name = "GPU calibration profiles"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from governance.calibration.services import on_job_finished
        from governance.evaluations.signals import job_finished

        # The calibration job runs on the eval-job machinery; its finished jobs become profiles here.
        job_finished.connect(on_job_finished, dispatch_uid="calibration.job_finished")
