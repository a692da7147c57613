from django.apps import AppConfig


class CanaryConfig(AppConfig):
    name = "governance.canary"
    label = "canary"
    verbose_name = "Canary analyses"
    default_auto_field = "django.db.models.BigAutoField"
