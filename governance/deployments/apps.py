from django.apps import AppConfig


class DeploymentsConfig(AppConfig):
    name = "governance.deployments"
    label = "deployments"
    verbose_name = "Deployment requests"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # The apps below announce events with signals; this app listens, so none of them imports it.
        from governance.artifacts.signals import artifact_changed
        from governance.calibration.signals import startup_log_recorded
        from governance.capacity.signals import plan_computed
        from governance.deployments.services import (
            on_artifact_inspected,
            on_capacity_plan_computed,
            on_eval_finished,
            on_license_text_classified,
            on_license_version_published,
            on_startup_log_recorded,
        )
        from governance.evaluations.signals import artifact_inspected, eval_finished
        from governance.licenses.signals import text_classified, version_published

        plan_computed.connect(on_capacity_plan_computed, dispatch_uid="deployments.plan_computed")
        eval_finished.connect(on_eval_finished, dispatch_uid="deployments.eval_finished")
        version_published.connect(on_license_version_published, dispatch_uid="deployments.version_published")
        artifact_inspected.connect(on_artifact_inspected, dispatch_uid="deployments.artifact_inspected")
        # A parent named later: the same re-evaluation of the artifact's live requests.
        artifact_changed.connect(on_artifact_inspected, dispatch_uid="deployments.artifact_changed")
        text_classified.connect(on_license_text_classified, dispatch_uid="deployments.text_classified")
        startup_log_recorded.connect(on_startup_log_recorded, dispatch_uid="deployments.startup_log_recorded")

        from governance.core.visibility import register_hidden, register_visible
        from governance.deployments.models import DeploymentRequest
        from governance.deployments.selectors import deployment_visible, deployments_hidden_from

        register_hidden(DeploymentRequest._meta.label_lower, deployments_hidden_from)
        register_visible(DeploymentRequest._meta.label_lower, deployment_visible)
