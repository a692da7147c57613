"""Waivers of blockers: the licensor's permission document and a second legal reviewer (issue 13)."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("deployments", "0001_initial"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(
            model_name="waiver",
            name="confirmed_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="waiver",
            name="confirmed_by",
            field=models.ForeignKey(
                blank=True,
                null=True,
                on_delete=django.db.models.deletion.PROTECT,
                related_name="+",
                to=settings.AUTH_USER_MODEL,
            ),
        ),
        migrations.AddField(
            model_name="waiver",
            name="needs_confirmation",
            field=models.BooleanField(default=False),
        ),
        migrations.AddField(
            model_name="waiver",
            name="permission_content",
            field=models.BinaryField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="waiver",
            name="permission_name",
            field=models.CharField(blank=True, max_length=255),
        ),
        migrations.AddField(
            model_name="waiver",
            name="permission_sha256",
            field=models.CharField(blank=True, max_length=64),
        ),
        migrations.AddField(
            model_name="waiver",
            name="permission_size",
            field=models.BigIntegerField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="waiver",
            name="severity",
            field=models.CharField(blank=True, max_length=12),
        ),
    ]
