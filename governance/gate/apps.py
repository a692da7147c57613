from django.apps import AppConfig


class GateConfig(AppConfig):
    name = "governance.gate"
    label = "gate"
    verbose_name = "CI gate"
    default_auto_field = "django.db.models.BigAutoField"
