"""Data migrations: rows stored before a derived column existed get it, as the store derives it."""

from __future__ import annotations

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

BEFORE = [("conversations", "0004_uuid7_ids")]
AFTER = [("conversations", "0005_event_activity_name")]


@pytest.mark.django_db(transaction=True)
def test_0005_derives_the_activity_name_of_stored_events():
    executor = MigrationExecutor(connection)
    try:
        executor.migrate(BEFORE)
        apps = executor.loader.project_state(BEFORE).apps
        conversation = apps.get_model("conversations", "Conversation").objects.create()
        turn = apps.get_model("conversations", "Turn").objects.create(
            conversation=conversation, index=0, role="agent")
        Event = apps.get_model("conversations", "Event")
        bodies = ['{"activity":{"id":"s1","name":"web_search","state":"started","input":{},'
                  '"summary":""}}', '{"activity":{"id":"f1","name":"web_fetch","state":"failed",'
                  '"input":{},"summary":"","sources":[],"error_code":"x"}}', "{}"]
        for seq, (kind, body) in enumerate(zip(
                ["hosted_activity", "hosted_activity", "message"], bodies, strict=True), 1):
            Event.objects.create(conversation=conversation, turn=turn, seq=seq, kind=kind,
                                 body=body)
        executor = MigrationExecutor(connection)
        executor.migrate(AFTER)
        Event = executor.loader.project_state(AFTER).apps.get_model("conversations", "Event")
        assert list(Event.objects.order_by("seq").values_list("activity_name", flat=True)) == [
            "web_search", "web_fetch", ""]
    finally:
        executor = MigrationExecutor(connection)
        executor.migrate(executor.loader.graph.leaf_nodes())


@pytest.mark.django_db(transaction=True)
def test_0009_backfills_the_search_and_facet_indexes():
    before = [("conversations", "0008_scale_b_turn_exports")]
    executor = MigrationExecutor(connection)
    try:
        executor.migrate(before)
        apps = executor.loader.project_state(before).apps
        User = apps.get_model("auth", "User")
        owner = User.objects.create(username="old-owner")
        conversation = apps.get_model("conversations", "Conversation").objects.create(
            title="Stored long ago", owner=owner)
        turn = apps.get_model("conversations", "Turn").objects.create(
            conversation=conversation, index=0, role="agent", provider="anthropic",
            model="claude-x")
        event = apps.get_model("conversations", "Event").objects.create(
            conversation=conversation, turn=turn, seq=1, kind="message",
            text="An answer about quokkas.")
        apps.get_model("conversations", "Attribution").objects.create(
            event=event, ordinal=0, url="https://www.wild.example.org/q", domain="wild.example.org",
            title="Quokka facts")
        # 0009 backfills; the later migrations add indexes the current search code names.
        executor = MigrationExecutor(connection)
        executor.migrate(executor.loader.graph.leaf_nodes())
        from django.contrib.auth.models import User as CurrentUser

        from conversations.reading import conversation_rows, filter_choices

        user = CurrentUser.objects.get(username="old-owner")
        for query in ("quokkas", "Quokka facts", "wild.example.org/q", "long ago"):
            assert conversation_rows(user, query=query).count() == 1, query
        assert conversation_rows(user, domain="example.org").count() == 1
        assert conversation_rows(user, model="claude-x").count() == 1
        assert filter_choices(user) == {"providers": ["anthropic"], "models": ["claude-x"],
                                        "domains": ["wild.example.org"]}
    finally:
        executor = MigrationExecutor(connection)
        executor.migrate(executor.loader.graph.leaf_nodes())


@pytest.mark.django_db(transaction=True)
def test_0015_backfills_the_list_counts_and_goes_back():
    before = [("conversations", "0014_search_key")]
    executor = MigrationExecutor(connection)
    try:
        executor.migrate(before)
        apps = executor.loader.project_state(before).apps
        Conversation = apps.get_model("conversations", "Conversation")
        cited, empty = Conversation.objects.create(title="cited"), Conversation.objects.create()
        turns = [apps.get_model("conversations", "Turn").objects.create(
            conversation=cited, index=i, role=role) for i, role in enumerate(["user", "agent"])]
        Event = apps.get_model("conversations", "Event")
        events = [Event.objects.create(conversation=cited, turn=turns[1], seq=seq, kind=kind,
                                       activity_id=key, activity_name=name)
                  for seq, (kind, key, name) in enumerate([
                      ("hosted_activity", "s1", "web_search"),
                      ("hosted_activity", "s1", "web_search"),  # its "completed"
                      ("hosted_activity", "s2", "web_search"),
                      ("hosted_activity", "f1", "web_fetch"),
                      ("message", "", "")], 1)]
        for ordinal in range(3):
            apps.get_model("conversations", "Attribution").objects.create(
                event=events[-1], ordinal=ordinal, url=f"https://a.example/{ordinal}")
        executor = MigrationExecutor(connection)
        executor.migrate(executor.loader.graph.leaf_nodes())
        from conversations.models import Conversation as Current

        assert Current.objects.values_list("turn_count", "citation_count", "search_count") \
            .get(pk=cited.pk) == (2, 3, 2)
        assert Current.objects.values_list("turn_count", "citation_count", "search_count") \
            .get(pk=empty.pk) == (0, 0, 0)
        executor = MigrationExecutor(connection)
        executor.migrate(before)  # and back: the columns go, the rows stay
        Conversation = executor.loader.project_state(before).apps.get_model(
            "conversations", "Conversation")
        assert Conversation.objects.count() == 2
    finally:
        executor = MigrationExecutor(connection)
        executor.migrate(executor.loader.graph.leaf_nodes())


def _single_column_indexes(table: str) -> set[str]:
    with connection.cursor() as cursor:
        constraints = connection.introspection.get_constraints(cursor, table)
    return {info["columns"][0] for info in constraints.values()
            if info["index"] and not info["unique"] and not info["primary_key"]
            and len(info["columns"]) == 1}


@pytest.mark.django_db(transaction=True)
def test_0011_drops_the_indexes_a_composite_one_leads_with_and_back():
    """The single-column indexes that 0011 drops (without rebuilding a table) come back when
    it is unapplied, and the composite indexes that serve their lookups stay."""
    before = [("conversations", "0010_turnfragment_no_style_hashes")]
    dropped = {"conversations_conversation": {"owner_id", "updated_at"},
               "conversations_attribution": {"event_id", "domain"},
               "conversations_providerpayload": {"provider", "format", "version"}}
    for table, columns in dropped.items():
        assert not columns & _single_column_indexes(table), table
    executor = MigrationExecutor(connection)
    try:
        executor.migrate(before)
        for table, columns in dropped.items():
            assert columns <= _single_column_indexes(table), table
        apps = executor.loader.project_state(before).apps
        kept = apps.get_model("conversations", "Conversation").objects.create(title="kept")
    finally:
        executor = MigrationExecutor(connection)
        executor.migrate(executor.loader.graph.leaf_nodes())
    for table, columns in dropped.items():
        assert not columns & _single_column_indexes(table), table
    from conversations.models import Conversation

    assert Conversation.objects.get(pk=kept.pk).title == "kept"  # the table was not remade


@pytest.mark.django_db(transaction=True)
def test_trigram_indexes_on_postgresql_only_0012_then_0016_folded_and_back():
    """0012 indexes the sources' URL and title trigrams; 0016 moves those indexes, and the
    search docs' (0009's), to folded copies the database keeps; each goes back."""
    def trigram_indexes() -> set[str]:
        found = set()
        with connection.cursor() as cursor:
            for table in ("conversations_attribution", "conversations_searchdoc"):
                names = connection.introspection.get_constraints(cursor, table)
                found |= {name for name in names if name.endswith("_trgm")}
        return found

    def folded_columns() -> set[str]:
        with connection.cursor() as cursor:
            return {f"{table}.{column.name}" for table in ("conversations_attribution",
                                                           "conversations_searchdoc")
                    for column in connection.introspection.get_table_description(cursor, table)
                    if column.name.endswith("_folded")}

    postgresql = connection.vendor == "postgresql"
    folded = {"attribution_url_folded_trgm", "attribution_title_folded_trgm",
              "searchdoc_body_folded_trgm"}
    before = {"attribution_url_trgm", "attribution_title_trgm", "searchdoc_body_trgm"}
    assert trigram_indexes() == (folded if postgresql else set())
    assert len(folded_columns()) == (3 if postgresql else 0)
    executor = MigrationExecutor(connection)
    try:
        executor.migrate([("conversations", "0015_list_counts")])
        assert trigram_indexes() == (before if postgresql else set())
        assert folded_columns() == set()
        executor = MigrationExecutor(connection)
        executor.migrate([("conversations", "0011_admin_filter_indexes")])
        assert trigram_indexes() == ({"searchdoc_body_trgm"} if postgresql else set())
    finally:
        executor = MigrationExecutor(connection)
        executor.migrate(executor.loader.graph.leaf_nodes())
    assert trigram_indexes() == (folded if postgresql else set())


@pytest.mark.django_db(transaction=True)
def test_0014_keys_the_stored_conversations_and_their_search_index_and_goes_back():
    """Conversations stored before 0014 get distinct search keys and their docs an FTS row
    under them (SQLite); going back to 0013 restores the index of doc ids, which finds them."""
    if connection.vendor != "sqlite":
        pytest.skip("0014 keys SQLite's FTS index; PostgreSQL only gets the (NULL) column")
    before = [("conversations", "0013_searchdoc_conversation_by_id")]
    executor = MigrationExecutor(connection)
    try:
        executor.migrate(before)
        apps = executor.loader.project_state(before).apps
        Conversation = apps.get_model("conversations", "Conversation")
        SearchDoc = apps.get_model("conversations", "SearchDoc")
        made = [Conversation.objects.create(title=f"old {n}") for n in range(3)]
        for n, conversation in enumerate(made):
            SearchDoc.objects.create(conversation=conversation, source="message",
                                     body=f"about wombats number {n}")
        executor = MigrationExecutor(connection)
        executor.migrate(executor.loader.graph.leaf_nodes())
        from conversations import search
        from conversations.models import Conversation as Current

        keys = dict(Current.objects.values_list("pk", "search_key"))
        assert len(keys) == 3 and None not in keys.values() and len(set(keys.values())) == 3
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT rowid >> 32, rowid & 4294967295 FROM {search.FTS_TABLE} "
                           f"WHERE {search.FTS_TABLE} MATCH '\"wombats number\"'")
            found = set(cursor.fetchall())
        docs = {(keys[c], d) for d, c in SearchDoc.objects.values_list("id", "conversation_id")}
        assert found == docs
        assert Current.objects.filter(search.matching("WOMBATS number 1")).get().pk == made[1].pk
        executor = MigrationExecutor(connection)
        executor.migrate(before)
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT rowid FROM {search.FTS_TABLE} "
                           f"WHERE {search.FTS_TABLE} MATCH '\"wombats number 2\"'")
            assert cursor.fetchall() == [(SearchDoc.objects.get(body__endswith="2").id,)]
    finally:
        executor = MigrationExecutor(connection)
        executor.migrate(executor.loader.graph.leaf_nodes())


@pytest.mark.django_db(transaction=True)
def test_0018_reads_the_pages_of_stored_page_location_citations():
    before, after = [("conversations", "0017_served_facets")], [
        ("conversations", "0018_attribution_pages")]
    executor = MigrationExecutor(connection)
    try:
        executor.migrate(before)
        apps = executor.loader.project_state(before).apps
        conversation = apps.get_model("conversations", "Conversation").objects.create()
        turn = apps.get_model("conversations", "Turn").objects.create(
            conversation=conversation, index=0, role="agent")
        event = apps.get_model("conversations", "Event").objects.create(
            conversation=conversation, turn=turn, seq=1, kind="message", text="Claim.")
        Payload = apps.get_model("conversations", "ProviderPayload")
        Attribution = apps.get_model("conversations", "Attribution")
        cites = [
            '{"type":"page_location","cited_text":"x","document_index":0,'
            '"document_title":"R.pdf","start_page_number":3,"end_page_number":5}',
            '{"type":"char_location","cited_text":"page_location","document_index":0,'
            '"document_title":"N.txt","start_char_index":0,"end_char_index":4}',
        ]
        for ordinal, value in enumerate(cites):
            replay = Payload.objects.create(provider="anthropic", format="anthropic.citation",
                                            version="2023-06-01", value=value)
            Attribution.objects.create(event=event, ordinal=ordinal, title="t", replay=replay)
        executor = MigrationExecutor(connection)
        executor.migrate(after)
        Attribution = executor.loader.project_state(after).apps.get_model(
            "conversations", "Attribution")
        assert list(Attribution.objects.order_by("ordinal").values_list(
            "page_first", "page_last")) == [(3, 4), (None, None)]
    finally:
        executor = MigrationExecutor(connection)
        executor.migrate(executor.loader.graph.leaf_nodes())


@pytest.mark.django_db(transaction=True)
def test_the_sqlite_index_of_sources_outlives_0018s_remake_of_their_table():
    """0018 remade the sources' table on SQLite, which dropped the triggers that keep 0012's
    index in step: sources stored since were not found and a delete corrupted the index. After
    every migration, a source stored before 0018 and one stored after are both found, and the
    index's integrity check passes after a delete."""
    if connection.vendor != "sqlite":
        pytest.skip("the FTS5 index of sources is SQLite's (PostgreSQL uses trigram indexes)")
    from conversations.search import SOURCE_FTS_TABLE

    def source_ids(word: str) -> list[int]:
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT rowid FROM {SOURCE_FTS_TABLE} WHERE {SOURCE_FTS_TABLE} "
                           "MATCH %s ORDER BY rowid", [f'"{word}"'])
            return [row[0] for row in cursor.fetchall()]

    before = [("conversations", "0017_served_facets")]
    executor = MigrationExecutor(connection)
    try:
        executor.migrate(before)
        apps = executor.loader.project_state(before).apps
        conversation = apps.get_model("conversations", "Conversation").objects.create()
        turn = apps.get_model("conversations", "Turn").objects.create(
            conversation=conversation, index=0, role="agent")
        event = apps.get_model("conversations", "Event").objects.create(
            conversation=conversation, turn=turn, seq=1, kind="message", text="x")
        Attribution = apps.get_model("conversations", "Attribution")
        old = Attribution.objects.create(event=event, ordinal=0, url="https://old.example/a",
                                         domain="old.example", title="Stored before")
        executor = MigrationExecutor(connection)
        executor.migrate(executor.loader.graph.leaf_nodes())
        from conversations.models import Attribution as Current
        new = Current.objects.create(event_id=event.pk, ordinal=1, url="https://new.example/b",
                                     domain="new.example", title="Stored after")
        assert (source_ids("old.example")) == [old.pk]
        assert (source_ids("new.example")) == [new.pk]
        with connection.cursor() as cursor:  # sources are append-only: a delete by hand
            cursor.execute("DELETE FROM conversations_attribution WHERE id = %s", [old.pk])
        assert source_ids("old.example") == []
        with connection.cursor() as cursor:
            cursor.execute(f"INSERT INTO {SOURCE_FTS_TABLE}({SOURCE_FTS_TABLE}, rank) "
                           "VALUES ('integrity-check', 1)")
    finally:
        executor = MigrationExecutor(connection)
        executor.migrate(executor.loader.graph.leaf_nodes())
