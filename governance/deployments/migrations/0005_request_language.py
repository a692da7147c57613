from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("deployments", "0004_request_withdrawn_status"),
    ]

    operations = [
        migrations.AddField(
            model_name="deploymentrequest",
            name="language",
            field=models.CharField(default="en", max_length=16),
        ),
    ]
