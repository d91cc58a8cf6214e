"""Conversation.source: where an import took a conversation from, unique per owner.

The column is added with ``ALTER TABLE ... ADD COLUMN ... DEFAULT ''`` on both databases (as
0015 adds its counts): Django's ``AddField`` remakes the table on SQLite, which the search
index's triggers forbid. The unique constraints are partial indexes (rows with no source, all
of those before this migration, are not in them), which neither database remakes a table for.
"""

from django.conf import settings
from django.db import migrations, models

TABLE = "conversations_conversation"


def add_source(apps, schema_editor):
    schema_editor.execute(f'ALTER TABLE "{TABLE}" ADD COLUMN "source" varchar(200) NOT NULL '
                          "DEFAULT ''")


def drop_source(apps, schema_editor):
    schema_editor.execute(f'ALTER TABLE "{TABLE}" DROP COLUMN "source"')


class Migration(migrations.Migration):

    dependencies = [
        ('conversations', '0020_reader_domains'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AddField(
                    model_name='conversation',
                    name='source',
                    field=models.CharField(blank=True, default='', editable=False,
                                           max_length=200),
                ),
            ],
            database_operations=[migrations.RunPython(add_source, drop_source)],
        ),
        migrations.AddConstraint(
            model_name='conversation',
            constraint=models.UniqueConstraint(condition=models.Q(('source', ''), _negated=True), fields=('owner', 'source'), name='conversation_owner_source'),
        ),
        migrations.AddConstraint(
            model_name='conversation',
            constraint=models.UniqueConstraint(condition=models.Q(('owner__isnull', True), models.Q(('source', ''), _negated=True)), fields=('source',), name='conversation_ownerless_source'),
        ),
    ]
