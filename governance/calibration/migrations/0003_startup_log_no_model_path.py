"""Startup logs recorded before the model's path was left out: drop it from their settings (every reader of
the cluster lists them; the path may name a host or a private repository)."""

from typing import Any

from django.db import migrations


def drop_model_path(apps: Any, schema_editor: Any) -> None:
    StartupLog = apps.get_model("calibration", "StartupLog")
    for log in StartupLog.objects.filter(log_settings__has_key="model_path").only("pk", "log_settings"):
        log.log_settings = {name: value for name, value in log.log_settings.items() if name != "model_path"}
        log.save(update_fields=["log_settings"])


class Migration(migrations.Migration):
    dependencies = [("calibration", "0002_startup_logs")]

    operations = [migrations.RunPython(drop_model_path, migrations.RunPython.noop)]
