"""Drop the columns that duplicated the deployments sign-off (moved over by 0005)."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("approvals", "0005_signoff_facts_to_deployments"),
    ]

    operations = [
        migrations.RemoveField(model_name="packetsignature", name=name)
        for name in (
            "deployment",
            "role",
            "decision",
            "signer",
            "signer_name",
            "meaning",
            "comment",
            "signed_at",
            "evidence_digest",
            "auth_method",
            "voided_at",
            "void_reason",
        )
    ] + [migrations.AlterModelOptions(name="packetsignature", options={"ordering": ["id"]})]
