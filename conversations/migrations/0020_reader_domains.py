"""A source is found by the cited-domain filter by the domain its title shows the reader too
(``domains.source_domains``: Gemini's grounding sources point at a
``vertexaisearch.cloud.google.com`` redirect and show the site's domain as their title), not
only by its URL's host. The backfill adds those domains' facets from the stored attributions
and counts the domain choices again (``search.domain_facet_rows``; a later change of it
freezes this migration's copy here, as 0015 says of its statements)."""

from django.db import migrations


def add_reader_domains(apps, schema_editor):
    from conversations import search
    from conversations.search.index import _Sql

    connection = schema_editor.connection
    rows = search.domain_facet_rows(connection)
    with connection.cursor() as cursor:
        cursor.executemany(_Sql.of(connection).facet, rows)
    search.recount_domain_facets(connection)


class Migration(migrations.Migration):

    dependencies = [
        ('conversations', '0019_share'),
    ]

    operations = [
        migrations.RunPython(add_reader_domains, migrations.RunPython.noop),
    ]
