from django.apps import AppConfig


class QuantizationConfig(AppConfig):
    name = "governance.quantization"
    label = "quantization"
    verbose_name = "Quantize runs"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from governance.evaluations.signals import job_finished
        from governance.quantization.services import on_job_finished

        job_finished.connect(on_job_finished, dispatch_uid="quantization.job_finished")
