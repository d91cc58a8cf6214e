"""SQLite: an index of each search doc's conversation by the doc's id, for the list's search.

A search reads the FTS index's matching doc ids, then each doc's conversation. Read through the
table, that is one visit to the doc's row per match, and rows hold the doc's whole text, so the
matches of one word touch thousands of pages. This index holds (id, conversation) only, about
40 bytes a doc. At 100k conversations, the list query for "officials" (9,301 docs) went from
18 to 15 ms, interleaved runs; for a word whose matches sit far down the list, the walk of the
list costs as much as before. The search named it (``INDEXED BY``): SQLite's planner, without
statistics, prefers the table's own rowid. PostgreSQL needs nothing: its trigram index returns
the rows it rechecks, conversation included. 0014 replaced it: FTS rowids now carry the
conversation's search key, and no doc is read."""

from django.db import migrations

from conversations.migrations import _search_by_doc_id


def create(apps, schema_editor):
    if schema_editor.connection.vendor == "sqlite":
        schema_editor.execute(_search_by_doc_id.CREATE_INDEX)


def drop(apps, schema_editor):
    if schema_editor.connection.vendor == "sqlite":
        schema_editor.execute(_search_by_doc_id.DROP_INDEX)


class Migration(migrations.Migration):
    dependencies = [("conversations", "0012_attribution_text_search")]

    operations = [migrations.RunPython(create, drop, elidable=False)]
