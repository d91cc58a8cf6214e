"""A list row's provenance chips as facets the writer keeps (``search.SERVED``): one per
(provider, model) pair of a conversation's agent turns, in the order they were first used.

Before, a row read every agent turn of its conversation to find its pairs: the 5,000-turn
conversation's 2,500 turns were 9 ms of any list page that showed it. The backfill is
``search.served_sql`` (a later change of it freezes this migration's copy here, as 0015 says
of its statements).
"""

from django.db import migrations


def add_served(apps, schema_editor):
    from conversations import search

    for statement, params in search.served_sql(schema_editor.connection):
        schema_editor.execute(statement, params)


def remove_served(apps, schema_editor):
    schema_editor.execute('DELETE FROM "conversations_conversationfacet" WHERE "kind" = %s',
                          ["served"])


class Migration(migrations.Migration):

    dependencies = [
        ('conversations', '0016_folded_text_search'),
    ]

    operations = [
        migrations.RunPython(add_served, remove_served),
    ]
