from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("deployments", "0005_signoff_one_record"),
    ]

    operations = [
        migrations.AddField(
            model_name="deploymentrequest",
            name="language",
            field=models.CharField(default="en", max_length=16),
        ),
    ]
