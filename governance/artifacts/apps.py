from django.apps import AppConfig


class ArtifactsConfig(AppConfig):
    name = "governance.artifacts"
    label = "artifacts"
    verbose_name = "Model artifacts"
    default_auto_field = "django.db.models.BigAutoField"
