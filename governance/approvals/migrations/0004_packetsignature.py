"""One record per decision (issue 27): the approvals sign-off becomes the PDF signature of the
deployments sign-off. Schema first; 0005 moves the decision's facts over; 0006 drops the copies
(three migrations, so that no table is altered in the transaction that updated its rows)."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("approvals", "0003_signoff_signature_status_packet_rendering"),
        ("deployments", "0005_signoff_one_record"),
    ]

    operations = [
        migrations.RemoveIndex(model_name="signoff", name="signoff_live_idx"),
        migrations.AlterField(
            model_name="signoff",
            name="deployment",
            field=models.ForeignKey(
                on_delete=django.db.models.deletion.CASCADE, related_name="+", to="deployments.deploymentrequest"
            ),
        ),
        migrations.RenameModel("SignOff", "PacketSignature"),
        migrations.RenameField("packetsignature", "review_decision", "signoff"),
        migrations.AlterField(
            model_name="packetsignature",
            name="signoff",
            field=models.OneToOneField(
                on_delete=django.db.models.deletion.CASCADE, related_name="signature", to="deployments.signoff"
            ),
        ),
        migrations.AlterField(
            model_name="packetsignature",
            name="packet",
            field=models.ForeignKey(
                on_delete=django.db.models.deletion.PROTECT, related_name="signatures", to="approvals.approvalpacket"
            ),
        ),
        migrations.AlterField(
            model_name="packetsignature",
            name="certificate",
            field=models.ForeignKey(
                on_delete=django.db.models.deletion.PROTECT,
                related_name="signatures",
                to="approvals.signingcertificate",
            ),
        ),
        migrations.RenameField("packetsignature", "signature_status", "status"),
        migrations.RenameField("packetsignature", "signature_error", "error"),
        migrations.AlterField(
            model_name="packetsignature",
            name="status",
            field=models.CharField(
                choices=[("pending", "Pending"), ("signed", "Signed"), ("failed", "Failed")],
                default="pending",
                max_length=8,
            ),
        ),
    ]
