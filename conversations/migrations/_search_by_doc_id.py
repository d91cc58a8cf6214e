"""SQLite's search index as migrations 0009 to 0013 made it, kept here as it was so those
migrations (and 0014's reverse) build it the same whatever ``conversations.search`` says now:
an external-content FTS5 table whose rowids are the docs' ids, kept in step by two triggers,
and 0013's index of each doc's conversation by its id. (A leading underscore: Django's
migration loader does not take this module for a migration.)"""

DOCS = "conversations_searchdoc"
FTS = "conversations_searchdoc_fts"
DOC_CONVERSATION_INDEX = "searchdoc_conversation_by_id"

INSTALL = [
    f"CREATE VIRTUAL TABLE IF NOT EXISTS {FTS} USING fts5(body, content='{DOCS}', "
    "content_rowid='id', tokenize='trigram')",
    f"CREATE TRIGGER IF NOT EXISTS {DOCS}_fts_insert AFTER INSERT ON {DOCS} BEGIN "
    f"INSERT INTO {FTS}(rowid, body) VALUES (new.id, new.body); END",
    f"CREATE TRIGGER IF NOT EXISTS {DOCS}_fts_delete AFTER DELETE ON {DOCS} BEGIN "
    f"INSERT INTO {FTS}({FTS}, rowid, body) VALUES ('delete', old.id, old.body); END",
]
FILL = [f"INSERT INTO {FTS}({FTS}) VALUES ('rebuild')"]  # external content: from the docs
UNINSTALL = [f"DROP TRIGGER IF EXISTS {DOCS}_fts_insert", f"DROP TRIGGER IF EXISTS {DOCS}_fts_delete",
             f"DROP TABLE IF EXISTS {FTS}"]
CREATE_INDEX = (f'CREATE INDEX IF NOT EXISTS {DOC_CONVERSATION_INDEX} ON "{DOCS}" '
                '("id", "conversation_id")')
DROP_INDEX = f"DROP INDEX IF EXISTS {DOC_CONVERSATION_INDEX}"
