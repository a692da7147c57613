from django.apps import AppConfig


class LicensesConfig(AppConfig):
    name = "governance.licenses"
    label = "licenses"
    verbose_name = "Licenses"
    default_auto_field = "django.db.models.BigAutoField"
