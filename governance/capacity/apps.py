from django.apps import AppConfig


class CapacityConfig(AppConfig):
    name = "governance.capacity"
    label = "capacity"
    verbose_name = "Capacity plans"
    default_auto_field = "django.db.models.BigAutoField"
