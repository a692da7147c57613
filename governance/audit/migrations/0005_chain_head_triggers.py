"""The chain-head row only advances one seq per append; it is never deleted or truncated."""

from django.db import migrations

from governance.audit.triggers import head_create_statements, head_drop_statements


def create_triggers(apps, schema_editor):
    for sql in head_create_statements(schema_editor.connection.vendor):
        schema_editor.execute(sql, params=None)


def drop_triggers(apps, schema_editor):
    for sql in head_drop_statements(schema_editor.connection.vendor):
        schema_editor.execute(sql, params=None)


class Migration(migrations.Migration):
    dependencies = [("audit", "0004_alter_auditevent_action")]
    operations = [migrations.RunPython(create_triggers, drop_triggers)]
