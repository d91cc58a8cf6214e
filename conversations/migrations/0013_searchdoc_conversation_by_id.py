"""SQLite: an index of each search doc's conversation by the doc's id, for the list's search.

A search reads the FTS index's matching doc ids, then each doc's conversation. Read through the
table, that is one visit to the doc's row per match, and rows hold the doc's whole text, so the
matches of one word touch thousands of pages. This index holds (id, conversation) only, about
40 bytes a doc. At 100k conversations, the list query for "officials" (9,301 docs) went from
18 to 15 ms, interleaved runs; for a word whose matches sit far down the list, the walk of the
list costs as much as before. ``search.matching`` names it (``INDEXED BY``): SQLite's
planner, without statistics, prefers the table's own rowid. PostgreSQL needs nothing: its
trigram index returns the rows it rechecks, conversation included."""

from django.db import migrations

INDEX = "searchdoc_conversation_by_id"  # conversations.search.DOC_CONVERSATION_INDEX
TABLE = "conversations_searchdoc"


def create(apps, schema_editor):
    if schema_editor.connection.vendor == "sqlite":
        schema_editor.execute(f'CREATE INDEX IF NOT EXISTS {INDEX} ON "{TABLE}" '
                              '("id", "conversation_id")')


def drop(apps, schema_editor):
    if schema_editor.connection.vendor == "sqlite":
        schema_editor.execute(f"DROP INDEX IF EXISTS {INDEX}")


class Migration(migrations.Migration):
    dependencies = [("conversations", "0012_attribution_text_search")]

    operations = [migrations.RunPython(create, drop, elidable=False)]
