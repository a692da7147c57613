"""Make audit events and checkpoints append-only at the database level."""

from django.db import migrations

from governance.audit.triggers import create_statements, drop_statements


def create_triggers(apps, schema_editor):
    for sql in create_statements(schema_editor.connection.vendor):
        schema_editor.execute(sql, params=None)


def drop_triggers(apps, schema_editor):
    for sql in drop_statements(schema_editor.connection.vendor):
        schema_editor.execute(sql, params=None)


class Migration(migrations.Migration):
    dependencies = [("audit", "0001_initial")]
    operations = [migrations.RunPython(create_triggers, drop_triggers)]
