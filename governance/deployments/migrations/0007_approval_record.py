"""Approvals get a record of their own (deployments.Approval) holding the eval each relied on, filled
in for the approvals already given from their audit events: the run the event names
(`approved_eval`), or, for approvals recorded before events named it, the newest passed served eval
of the approved weights finished by then (what services.evidence used to work out on every read)."""

import uuid

import django.db.models.deletion
from django.db import migrations, models

DEPLOYMENT_TRANSITIONED = 402  # governance.audit.actions.AuditAction, as stored


def approvals_from_audit(apps, schema_editor):
    AuditEvent = apps.get_model("audit", "AuditEvent")
    DeploymentRequest = apps.get_model("deployments", "DeploymentRequest")
    Approval = apps.get_model("deployments", "Approval")
    EvalRun = apps.get_model("evaluations", "EvalRun")
    events = AuditEvent.objects.filter(
        action=DEPLOYMENT_TRANSITIONED, object_type="deployments.deploymentrequest", data__to="approved"
    ).order_by("seq")
    requests = {}
    for event in events.iterator():
        if event.object_id not in requests:
            requests[event.object_id] = (
                DeploymentRequest.objects.filter(code=event.object_id).select_related("artifact").first()
            )
        deployment = requests[event.object_id]
        if deployment is None:
            continue
        runs = EvalRun.objects.filter(request=deployment, kind="served", status="passed")
        code = (event.data or {}).get("approved_eval")
        if code:
            relied_on = runs.filter(code=code).first()
        else:
            relied_on = (
                runs.filter(candidate_digest=deployment.artifact.weights_digest, updated_at__lte=event.occurred_at)
                .order_by("-updated_at")
                .first()
            )
        Approval.objects.create(
            deployment=deployment,
            approved_at=event.occurred_at,
            evidence_digest=str((event.data or {}).get("evidence_digest") or ""),
            relied_on_eval=relied_on,
        )


class Migration(migrations.Migration):
    dependencies = [
        ("deployments", "0006_request_language"),
        ("evaluations", "0007_artifact_inspections"),
        ("audit", "0011_canary_actions"),
    ]

    operations = [
        migrations.CreateModel(
            name="Approval",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("code", models.UUIDField(default=uuid.uuid4, editable=False, unique=True)),
                ("created_at", models.DateTimeField(auto_now_add=True)),
                ("updated_at", models.DateTimeField(auto_now=True)),
                ("approved_at", models.DateTimeField()),
                ("evidence_digest", models.CharField(max_length=64)),
                (
                    "deployment",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="approvals",
                        to="deployments.deploymentrequest",
                    ),
                ),
                (
                    "relied_on_eval",
                    models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="+",
                        to="evaluations.evalrun",
                    ),
                ),
            ],
            options={
                "ordering": ["approved_at", "id"],
                "indexes": [models.Index(fields=["deployment", "approved_at"], name="deployment_approval_idx")],
            },
        ),
        migrations.RunPython(approvals_from_audit, migrations.RunPython.noop),
    ]
