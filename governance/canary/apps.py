from django.apps import AppConfig


class CanaryConfig(AppConfig):
    name = "governance.canary"
    label = "canary"
    verbose_name = "Canary analyses"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # A team's plan on a cluster takes its canary and fleet measurements there (issue 47); capacity sits
        # below this app and asks through its registry.
        from governance.canary.selectors import measured_evidence_for
        from governance.capacity.evidence import register_measured

        register_measured(measured_evidence_for)
