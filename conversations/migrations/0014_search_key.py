"""SQLite: the search index's rowids carry each conversation's search key.

Before, an FTS match gave doc ids, and each matching doc's conversation was read from 0013's
index (about 1 µs a doc), then the list's order was walked testing UUIDs against that set.
Now every conversation has ``search_key`` (its current rowid, for the rows already stored; the
writer's INSERT gives the next one), the FTS table is contentless with rowids
``search_key << 32 | doc id``, and the list's order indexes end with the key: the match set is
``rowid >> 32`` of the FTS index alone, and the walk reads nothing but the order index. At 100k
conversations, the list query for "officials" went 21 -> 9 ms, for "weather" 47 -> 18 ms
(interleaved, raw SQLite). Rebuilding the FTS table took 32 s on the bench store of 100k
conversations (750k docs). PostgreSQL: only the column (NULL) and the order indexes with it.

The SQLite statements are ``conversations.search``'s as this migration is written; a later
change of them freezes these here (as ``_search_by_doc_id`` keeps 0009's).
"""

from django.conf import settings
from django.db import migrations, models


def key_search_index(apps, schema_editor):
    connection = schema_editor.connection
    if connection.vendor != "sqlite":
        return
    from conversations import search
    from conversations.migrations import _search_by_doc_id

    with connection.cursor() as cursor:
        for statement in [*_search_by_doc_id.UNINSTALL, _search_by_doc_id.DROP_INDEX]:
            cursor.execute(statement)
        # Unique, and never reused while the row lives: the rowid is both (VACUUM may
        # renumber rowids later; the key, a column, stays).
        cursor.execute('UPDATE "conversations_conversation" SET "search_key" = rowid')
        for statement in [*search.install_sql("sqlite"), *search.fill_sql("sqlite")]:
            cursor.execute(statement)


def doc_id_search_index(apps, schema_editor):
    connection = schema_editor.connection
    if connection.vendor != "sqlite":
        return
    from conversations import search
    from conversations.migrations import _search_by_doc_id

    with connection.cursor() as cursor:
        for statement in [*search.uninstall_sql("sqlite"), *_search_by_doc_id.INSTALL,
                          *_search_by_doc_id.FILL, _search_by_doc_id.CREATE_INDEX]:
            cursor.execute(statement)


class Migration(migrations.Migration):

    dependencies = [
        ('conversations', '0013_searchdoc_conversation_by_id'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.RemoveIndex(
            model_name='conversation',
            name='conversation_owner_updated',
        ),
        migrations.RemoveIndex(
            model_name='conversation',
            name='conversation_updated',
        ),
        migrations.RemoveIndex(
            model_name='conversation',
            name='conversation_owner_created',
        ),
        migrations.RemoveIndex(
            model_name='conversation',
            name='conversation_created',
        ),
        migrations.AddField(
            model_name='conversation',
            name='search_key',
            field=models.BigIntegerField(blank=True, editable=False, null=True),
        ),
        # Before the order indexes: they are built once, with the keys.
        migrations.RunPython(key_search_index, doc_id_search_index, elidable=False),
        migrations.AddIndex(
            model_name='conversation',
            index=models.Index(fields=['owner', 'updated_at', 'id', 'search_key'], name='conversation_owner_updated'),
        ),
        migrations.AddIndex(
            model_name='conversation',
            index=models.Index(fields=['updated_at', 'id', 'search_key'], name='conversation_updated'),
        ),
        migrations.AddIndex(
            model_name='conversation',
            index=models.Index(fields=['owner', 'created_at', 'id', 'search_key'], name='conversation_owner_created'),
        ),
        migrations.AddIndex(
            model_name='conversation',
            index=models.Index(fields=['created_at', 'id', 'search_key'], name='conversation_created'),
        ),
    ]
