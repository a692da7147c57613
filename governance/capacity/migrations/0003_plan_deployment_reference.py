"""A capacity plan names the request it is evidence of by a foreign key, not by a label and a code
in two strings: filled in from those strings, which then go (with their index)."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

DEPLOYMENT_SUBJECT = "deployments.deploymentrequest"


def deployment_from_subject(apps, schema_editor):
    CapacityPlan = apps.get_model("capacity", "CapacityPlan")
    DeploymentRequest = apps.get_model("deployments", "DeploymentRequest")
    plans = CapacityPlan.objects.filter(subject_type=DEPLOYMENT_SUBJECT).exclude(subject_id="")
    codes = set(plans.values_list("subject_id", flat=True))
    requests = {
        str(code): pk for pk, code in DeploymentRequest.objects.filter(code__in=codes).values_list("pk", "code")
    }
    for code, pk in requests.items():
        plans.filter(subject_id=code).update(deployment_id=pk)


def subject_from_deployment(apps, schema_editor):
    CapacityPlan = apps.get_model("capacity", "CapacityPlan")
    for plan in CapacityPlan.objects.filter(deployment__isnull=False).select_related("deployment"):
        plan.subject_type, plan.subject_id = DEPLOYMENT_SUBJECT, str(plan.deployment.code)
        plan.save(update_fields=["subject_type", "subject_id"])


class Migration(migrations.Migration):
    dependencies = [
        ("capacity", "0002_plan_lease"),
        ("deployments", "0007_approval_record"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(
            model_name="capacityplan",
            name="deployment",
            field=models.ForeignKey(
                blank=True,
                null=True,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="capacity_plans",
                to="deployments.deploymentrequest",
            ),
        ),
        migrations.RunPython(deployment_from_subject, subject_from_deployment),
        migrations.RemoveIndex(model_name="capacityplan", name="capacity_subject_idx"),
        migrations.RemoveField(model_name="capacityplan", name="subject_id"),
        migrations.RemoveField(model_name="capacityplan", name="subject_type"),
        migrations.AddIndex(
            model_name="capacityplan",
            index=models.Index(fields=["deployment", "-created_at"], name="capacity_deployment_idx"),
        ),
    ]
