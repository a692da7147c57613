from django.apps import AppConfig


class DeploymentsConfig(AppConfig):
    name = "governance.deployments"
    label = "deployments"
    verbose_name = "Deployment requests"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from governance.capacity.services import PLAN_COMPUTED_HOOKS
        from governance.deployments.services import on_capacity_plan_computed
        from governance.licenses.services import VERSION_PUBLISHED_HOOKS

        def queue_reevaluation(license_key: str) -> None:
            from governance.deployments.tasks import deployments_reevaluate_license_task

            deployments_reevaluate_license_task.delay(license_key)

        from governance.deployments.services import on_eval_finished
        from governance.evaluations.evals import EVAL_FINISHED_HOOKS

        PLAN_COMPUTED_HOOKS.append(on_capacity_plan_computed)
        EVAL_FINISHED_HOOKS.append(on_eval_finished)
        VERSION_PUBLISHED_HOOKS.append(queue_reevaluation)
