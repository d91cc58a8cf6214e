"""PostgreSQL: the searched texts get lower-cased copies the database keeps, and the trigram
indexes move to them (``conversations.search.FOLDED``). SQLite: nothing (its FTS5 indexes
fold case themselves).

A trigram index only narrows a search to candidates; each is rechecked against the text, and
``ILIKE`` (or Django's ``UPPER(x) LIKE UPPER(...)``) folds the case of every candidate's text
again to do it: at 100k conversations, 80 of a search's 111 ms in PostgreSQL for a word in
6,250 docs, and most of the admin's 162 ms to count a word in the sources. On the stored copy
the recheck is a plain ``LIKE``: 27 ms for the same docs. The price: the copies' space (about
110 MB on the bench store of 764k docs and 384k sources) and rewriting both tables once
(about a minute there).

The statements are ``search.install_sql``'s as this migration is written; a later change of
them freezes these here, as 0009 keeps its own.
"""

from django.db import migrations

# The trigram indexes the folded copies replace: 0009's of doc bodies, 0012's of sources.
REPLACED = {
    "searchdoc_body_trgm": ('"conversations_searchdoc"', "body gin_trgm_ops"),
    "attribution_url_trgm": ('"conversations_attribution"', 'UPPER("url") gin_trgm_ops'),
    "attribution_title_trgm": ('"conversations_attribution"', 'UPPER("title") gin_trgm_ops'),
}


def fold(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    from conversations import search

    for name in REPLACED:
        schema_editor.execute(f"DROP INDEX IF EXISTS {name}")
    for statement in search.install_sql("postgresql"):
        schema_editor.execute(statement)


def unfold(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    from conversations import search

    for statement in search.uninstall_sql("postgresql"):
        schema_editor.execute(statement)
    for name, (table, expression) in REPLACED.items():
        schema_editor.execute(f"CREATE INDEX IF NOT EXISTS {name} ON {table} "
                              f"USING gin ({expression})")


class Migration(migrations.Migration):

    dependencies = [
        ('conversations', '0015_list_counts'),
    ]

    operations = [migrations.RunPython(fold, unfold)]
