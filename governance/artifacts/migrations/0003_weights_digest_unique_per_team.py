"""A weights digest is unique per team, not across teams (issue 43)."""

import django.core.validators
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("artifacts", "0002_shared_with"),
    ]

    operations = [
        migrations.AlterField(
            model_name="modelartifact",
            name="weights_digest",
            field=models.CharField(
                max_length=71,
                validators=[
                    django.core.validators.RegexValidator(
                        "^sha256:[0-9a-f]{64}$", "must be 'sha256:' followed by 64 lower-case hex digits"
                    )
                ],
            ),
        ),
        migrations.AddConstraint(
            model_name="modelartifact",
            constraint=models.UniqueConstraint(
                fields=("team", "weights_digest"), name="artifact_digest_unique_per_team"
            ),
        ),
    ]
