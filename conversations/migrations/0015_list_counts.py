"""The list's per-row counts as columns the writer keeps, and a partial index for its live flag.

Before, each list row counted its turns, citations and searches with correlated subqueries:
a row cost in proportion to its conversation's size (the 5,000-turn conversation cost about
10 ms on any page that showed it: staff's list page 1 at 100k, 29 ms). The columns are added
with ``ALTER TABLE ... ADD COLUMN ... DEFAULT 0`` on both databases: Django's ``AddField`` of a
NOT NULL column remakes the table on SQLite, which the search index's triggers forbid (see
``conversations.search.install_sql``). The backfill is ``search.recount_sql`` (a later change
of it freezes this migration's copy here, as 0014 says of its statements): 10 s on SQLite
and 17 s on PostgreSQL for the bench store of 100k conversations.
"""

from django.db import migrations, models

COUNTS = ("turn_count", "citation_count", "search_count")
TABLE = "conversations_conversation"


def add_counts(apps, schema_editor):
    kind = "integer unsigned" if schema_editor.connection.vendor == "sqlite" else "integer"
    for column in COUNTS:
        schema_editor.execute(f'ALTER TABLE "{TABLE}" ADD COLUMN "{column}" {kind} NOT NULL '
                              f'DEFAULT 0 CHECK ("{column}" >= 0)')
    from conversations import search

    for statement in search.recount_sql(schema_editor.connection):
        schema_editor.execute(statement)


def drop_counts(apps, schema_editor):
    for column in COUNTS:
        schema_editor.execute(f'ALTER TABLE "{TABLE}" DROP COLUMN "{column}"')


class Migration(migrations.Migration):

    dependencies = [
        ('conversations', '0014_search_key'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AddField(
                    model_name='conversation',
                    name=name,
                    field=models.PositiveIntegerField(default=0, editable=False),
                ) for name in COUNTS
            ],
            database_operations=[migrations.RunPython(add_counts, drop_counts)],
        ),
        migrations.AddIndex(
            model_name='turn',
            index=models.Index(condition=models.Q(('status', 'streaming')), fields=['conversation'], name='turn_streaming'),
        ),
    ]
