"""One record per decision (issue 27): the review decision becomes the sign-off, holding every fact
of the decision; approvals keeps only the PDF signature (approvals 0004-0006 move the facts that
lived there, then drop its copies)."""

import django.db.models.deletion
import django.utils.timezone
from django.conf import settings
from django.db import migrations, models
from django.db.models import F


def signed_at_from_created_at(apps, schema_editor):  # type: ignore[no-untyped-def]
    # Until approvals 0005 copies the signature's own time over: the decision was made when stored.
    apps.get_model("deployments", "SignOff").objects.update(signed_at=F("created_at"))


class Migration(migrations.Migration):
    dependencies = [
        ("deployments", "0004_request_withdrawn_status"),
        # The approvals sign-off table refers to this model: it exists before the rename.
        ("approvals", "0003_signoff_signature_status_packet_rendering"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.RenameModel("ReviewDecision", "SignOff"),
        migrations.RenameField("signoff", "request", "deployment"),
        migrations.RenameField("signoff", "verdict", "decision"),
        migrations.RenameField("signoff", "reviewer", "signer"),
        migrations.AlterField(
            model_name="signoff",
            name="deployment",
            field=models.ForeignKey(
                on_delete=django.db.models.deletion.CASCADE,
                related_name="signoffs",
                to="deployments.deploymentrequest",
            ),
        ),
        migrations.AddField(
            model_name="signoff",
            name="signer_name",
            field=models.CharField(blank=True, max_length=300),
        ),
        migrations.AddField(
            model_name="signoff",
            name="meaning",
            field=models.TextField(blank=True),
        ),
        migrations.AddField(
            model_name="signoff",
            name="signed_at",
            field=models.DateTimeField(default=django.utils.timezone.now),
            preserve_default=False,
        ),
        migrations.AddField(
            model_name="signoff",
            name="auth_method",
            field=models.CharField(
                choices=[
                    ("password", "local password re-entered"),
                    ("oidc_step_up", "fresh sign-in at the identity provider (step-up)"),
                ],
                default="password",
                max_length=20,
            ),
        ),
        migrations.RunPython(signed_at_from_created_at, migrations.RunPython.noop),
        migrations.AlterModelOptions(name="signoff", options={"ordering": ["signed_at", "id"]}),
        migrations.AddIndex(
            model_name="signoff",
            index=models.Index(fields=["deployment", "voided_at"], name="deployment_signoff_live_idx"),
        ),
    ]
