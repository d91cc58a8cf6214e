"""The SQLite index of sources follows its table again.

0018's ``AddConstraint`` made Django remake ``conversations_attribution`` on SQLite (a new
table, the rows copied, the old one dropped), and dropping a table drops its triggers: from
then on no source written or deleted reached the FTS index 0012 made, the admin's search of
sources found nothing new, and a delete left the external-content index pointing at rows that
were gone ("database disk image is malformed"). This puts 0012's triggers back and rebuilds
the index from the table. Nothing to do on PostgreSQL, whose expression indexes a remake keeps.
"""

from importlib import import_module

from django.db import migrations

text_search = import_module("conversations.migrations.0012_attribution_text_search")


def reinstall(apps, schema_editor):
    if schema_editor.connection.vendor == "sqlite":
        for statement in text_search.SQLITE_CREATE:  # IF NOT EXISTS, then 'rebuild'
            schema_editor.execute(statement)


class Migration(migrations.Migration):

    dependencies = [("conversations", "0022_turn_asked")]

    operations = [migrations.RunPython(reinstall, migrations.RunPython.noop, elidable=False)]
