"""The list's search and facet indexes (conversations.search): what every write leaves equals a
rebuild from the log; filters and search answer through them; snippets are marked and escaped."""

from __future__ import annotations

import orjson
import pytest
from django.contrib.auth.models import AnonymousUser, User
from django.db import connection
from django.test.utils import CaptureQueriesContext

from conversations import search, store
from conversations.forking import fork
from conversations.models import Conversation, ConversationFacet, FacetCount, SearchDoc
from conversations.projections import export_document, import_document
from conversations.reading import conversation_rows, filter_choices, list_page
from streams.bodies import ActivityBody
from streams.builder import AttributionRecord, EventRecord
from tests.api.conftest import build_conversation

pytestmark = pytest.mark.django_db

QUERIES = ["sunny", "SUNNY", "news.example", "Météo", "rain", "Paris", "Pa", "xyzzy-none",
           "closed", "renamed", "tomorrow"]
FILTERS = [{"domain": "example.fr"}, {"domain": "meteo.example.fr"}, {"domain": "example.com"},
           {"domain": "ample.com"}, {"provider": "anthropic"}, {"provider": "openai"},
           {"model": "claude-sonnet-4-20250514"}, {"model": "claude"}]


@pytest.fixture
def alice():
    return User.objects.create_user("alice", password="pw-alice-123")


@pytest.fixture
def bob():
    return User.objects.create_user("bob", password="pw-bob-123")


@pytest.fixture
def staff():
    return User.objects.create_user("staff", password="pw-staff-123", is_staff=True)


def snapshot(users):
    """Everything the list answers from the indexes: the tables, each query and filter's
    conversations, the choices."""
    docs = sorted(SearchDoc.objects.values_list("conversation_id", "source", "body"))
    facets = sorted(ConversationFacet.objects.values_list("conversation_id", "kind", "value"))
    counts = sorted(FacetCount.objects.filter(conversations__gt=0)
                    .values_list("owner_key", "kind", "value", "conversations"))
    rows = sorted(Conversation.objects.values_list("pk", "turn_count", "citation_count",
                                                   "search_count"))
    # The chips in their order (facet ids): kept by each write as a rebuild orders them.
    chips = search.provenance_chips(list(Conversation.objects.values_list("pk", flat=True)))
    answers = {}
    for user in users:
        for q in QUERIES:
            answers[(user.pk, "q", q)] = set(conversation_rows(user, query=q)
                                             .values_list("pk", flat=True))
        for f in FILTERS:
            answers[(user.pk, *f.items())] = set(conversation_rows(user, **f)
                                                 .values_list("pk", flat=True))
        answers[(user.pk, "choices")] = filter_choices(user)
    return {"docs": sorted(set(docs)), "facets": facets, "counts": counts, "rows": rows,
            "chips": chips, "answers": answers}


def assert_matches_rebuild(users):
    kept = snapshot(users)
    search.rebuild()
    rebuilt = snapshot(users)
    assert kept == rebuilt


def test_every_write_keeps_the_indexes_equal_to_a_rebuild(alice, bob, staff):
    users = [alice, bob, staff]
    a = build_conversation(owner=alice)  # record_turns, append_events, set via add_turn
    assert_matches_rebuild(users)
    forked = fork(a, 1, owner=bob, title="forked")  # copy_turns
    assert_matches_rebuild(users)
    doc = orjson.loads(export_document(a))
    imported = import_document(doc, owner=bob)  # ids taken: fresh ones
    assert imported.pk != a.pk
    assert_matches_rebuild(users)
    store.rename_conversation(forked, "renamed fork")
    assert_matches_rebuild(users)
    store.set_owner(imported, alice)
    assert_matches_rebuild(users)
    store.delete_conversation(a)
    assert_matches_rebuild(users)
    # A turn whose served model is recorded after its events (the live path).
    c = store.create_conversation(title="live", owner=bob)
    turn = store.open_turns(c, [store.NewTurn("agent", [])])[0][0]
    store.set_provenance(turn, "openai", "gpt-5")
    assert_matches_rebuild(users)
    assert filter_choices(bob)["providers"] == ["anthropic", "openai"]
    assert filter_choices(alice)["providers"] == ["anthropic"]  # the import, given to her


def test_a_search_is_counted_once_across_writes_and_forks(alice, bob, staff):
    """A list row's search count is its distinct web_search activity ids: a search's
    "completed" appended after its "started" (the live path) is not a second search, a fetch
    is none, and a fork copies what it holds."""
    c = store.create_conversation(title="searching", owner=alice)
    turn = store.open_turns(c, [store.user_turn("Find it"), store.NewTurn("agent", [])])[1][0]

    def activity(id, name, state):
        return EventRecord("hosted_activity", body=ActivityBody(id, name, state, {}, ""))

    store.append_events(turn, [activity("ws_1", "web_search", "started")])
    store.append_events(turn, [activity("ws_1", "web_search", "completed"),
                               activity("ws_2", "web_search", "started"),
                               activity("ws_2", "web_search", "completed"),
                               activity("wf_1", "web_fetch", "completed")])
    store.append_events(turn, [EventRecord("message", text="Found.", attributions=[
        AttributionRecord("https://a.example/1", "One"),
        AttributionRecord("https://a.example/1", "One again")])])
    c.refresh_from_db()
    assert (c.turn_count, c.citation_count, c.search_count) == (2, 2, 2)
    forked = fork(c, 1, owner=bob, title="forked")
    forked.refresh_from_db()
    assert (forked.turn_count, forked.citation_count, forked.search_count) == (2, 2, 2)
    store.append_events(turn, [activity("ws_2", "web_search", "failed"),
                               activity("ws_3", "web_search", "started")])
    c.refresh_from_db()
    assert c.search_count == 3
    assert_matches_rebuild([alice, bob, staff])


def test_chips_are_the_agent_turns_pairs_in_the_order_first_used(alice, bob, staff):
    def agent(provider, model):
        return store.NewTurn("agent", [], provider=provider, model=model)

    # A new conversation's write: a pair used again is one chip, in first-use order.
    c = store.record_turns([store.user_turn("Hi"), agent("openai", "gpt-5"),
                            agent("anthropic", "claude-sonnet-4-5"), agent("openai", "gpt-5")],
                           store.NewConversation(title="models", owner=alice))[0]
    # Later writes add theirs after it; one recorded after the turn (the live path) too.
    store.open_turns(c, [agent("google", "gemini-2.5-pro"), agent("anthropic",
                                                                  "claude-sonnet-4-5")])
    late = store.open_turns(c, [store.NewTurn("agent", [])])[0][0]
    # The longest pair provenance allows is cut to the column, as a rebuild cuts it.
    provider, model = "p-" * 30, ("gpt-5-" * 40)[:200]
    store.set_provenance(late, provider, model)
    chips = search.provenance_chips([c.pk])[c.pk]
    assert chips == [("openai", "gpt-5"), ("anthropic", "claude-sonnet-4-5"),
                     ("google", "gemini-2.5-pro"), (provider, model[:194])]
    assert_matches_rebuild([alice, bob, staff])


def test_search_and_filters_answer(alice, bob):
    a = build_conversation(owner=alice)
    build_conversation(owner=bob, title="theirs")

    def ids(**kw):
        return set(conversation_rows(alice, **kw).values_list("pk", flat=True))

    assert ids(query="SUNNY") == {a.pk}  # case-insensitive substring, message text
    assert ids(query="unn") == {a.pk}  # inside a word
    assert ids(query="news.example.com/to") == {a.pk}  # a cited URL
    assert ids(query="Météo") == {a.pk}  # a cited title
    assert ids(query="MÉTÉO") == ids(query="météo") == {a.pk}  # case folded beyond ASCII
    assert ids(query="Weather in") == {a.pk}  # the title
    assert ids(query="100%") == set() and ids(query="_") == set()  # wildcards are literal
    assert ids(query="Pa") == {a.pk}  # under three characters: titles only
    assert ids(query="y") == set()  # ("sunny" is in a message, not the title)
    assert ids(domain="example.fr") == ids(domain="meteo.example.fr") == {a.pk}
    assert ids(domain="ample.fr") == set() and ids(domain="fr") == set()
    assert ids(provider="anthropic", model="claude-sonnet-4-20250514") == {a.pk}
    assert conversation_rows(AnonymousUser()).count() == 0


def test_filters_are_one_query_without_a_subquery_per_conversation(alice):
    build_conversation(owner=alice)
    qs = conversation_rows(alice, query="sunny", domain="example.fr", provider="anthropic")
    with CaptureQueriesContext(connection) as captured:
        page = list_page(qs)
    assert len(page.rows) == 1
    keyset = captured.captured_queries[0]["sql"]
    # Each filter is an uncorrelated IN (SELECT ...) over its index table: the facets'
    # conversation ids, and the search's (SQLite: the search keys the FTS rowids carry).
    sqlite = connection.vendor == "sqlite"
    assert keyset.count("conversation_id") >= (2 if sqlite else 3)
    table = connection.ops.quote_name(Conversation._meta.db_table)
    # No subquery refers back to the outer row (what OuterRef makes: "= (<table>.id)").
    assert f"= ({table}." not in keyset and "EXISTS" not in keyset.upper()
    if sqlite:
        assert f'+{table}."search_key" IN (SELECT rowid >> 32 FROM {search.FTS_TABLE} ' \
               "WHERE" in keyset


def test_a_search_that_matches_nothing_reads_no_list(alice):
    """On SQLite an empty match set is known from one probe of the FTS index: the list is
    not walked (PostgreSQL finds the empty set from its own index as fast)."""
    build_conversation(owner=alice)
    with CaptureQueriesContext(connection) as captured:
        page = list_page(conversation_rows(alice, query="xyzzy-none"))
    assert page.rows == []
    table = connection.ops.quote_name(Conversation._meta.db_table)
    if connection.vendor == "sqlite":
        assert not [q for q in captured.captured_queries if f"FROM {table}" in q["sql"]]
    assert len(list_page(conversation_rows(alice, query="sunny")).rows) == 1


def _plan(qs) -> list[str]:
    sql, params = qs.query.sql_with_params()
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN QUERY PLAN " + sql, params)
        return [row[-1] for row in cursor.fetchall()]


def test_a_search_reads_the_fts_index_and_the_order_index_only(alice, staff):
    """SQLite: the match set is the FTS rowids' search keys (no doc row, no index of docs),
    and the list's order is walked testing each conversation's key from the order index (a
    covering scan: no conversation row, no sort), for an owner's list and for staff's, where
    SQLite would otherwise look each matching key up and sort them all."""
    if connection.vendor != "sqlite":
        pytest.skip("PostgreSQL's trigram index returns the rows it rechecks")
    a = build_conversation(owner=alice)
    docs = SearchDoc._meta.db_table
    for user, walk in ((alice, "SEARCH conversations_conversation USING COVERING INDEX "
                               "conversation_owner_updated (owner_id=?)"),
                       (staff, "SCAN conversations_conversation USING COVERING INDEX "
                               "conversation_updated")):
        qs = conversation_rows(user, query="sunny")
        assert list(qs.values_list("pk", flat=True)) == [a.pk]
        plan = _plan(qs.values("pk")[:26])
        assert plan[0] == walk, plan
        assert any(f"SCAN {search.FTS_TABLE} VIRTUAL TABLE" in step for step in plan), plan
        assert not any(docs in step.replace(search.FTS_TABLE, "") for step in plan), plan
        assert not any("TEMP B-TREE" in step for step in plan), plan


def _indexed_docs() -> list[tuple]:
    """SQLite: what the FTS index holds, decoded: (conversation, source, body) of each doc its
    rowids name; a rowid that names no doc of that conversation fails here."""
    with connection.cursor() as cursor:
        cursor.execute(f"CREATE VIRTUAL TABLE IF NOT EXISTS temp.fts_rows USING fts5vocab("
                       f"main, {search.FTS_TABLE}, 'instance')")
        cursor.execute("SELECT DISTINCT doc FROM temp.fts_rows")
        rowids = [row[0] for row in cursor.fetchall()]
    keys = dict(Conversation.objects.values_list("search_key", "pk"))
    docs = {d["id"]: d for d in SearchDoc.objects.values("id", "conversation_id", "source",
                                                         "body")}
    out = []
    for rowid in rowids:
        key, doc_id = rowid >> search.KEY_SHIFT, rowid & ((1 << search.KEY_SHIFT) - 1)
        doc = docs.get(doc_id)
        assert doc is not None and keys.get(key) == doc["conversation_id"], (rowid, doc)
        out.append((doc["conversation_id"], doc["source"], doc["body"]))
    return sorted(out)


def test_the_fts_index_holds_each_doc_once_under_its_conversation_s_key(alice, bob):
    """Every write, a rename, a delete and a rebuild leave the FTS index exactly the docs (of
    three characters or more: a trigram), each under its own conversation's key; a key is
    unique, and a new conversation after the newest was deleted finds none of its text."""
    if connection.vendor != "sqlite":
        pytest.skip("SQLite's FTS index (PostgreSQL's GIN index follows its table)")

    def expected():
        return sorted(SearchDoc.objects.filter(body__regex=r"^(.|\n){3,}")
                      .values_list("conversation_id", "source", "body"))

    a = build_conversation(owner=alice)
    b = fork(a, 1, owner=bob, title="forked")
    assert _indexed_docs() == expected() and len(expected()) > 4
    store.rename_conversation(b, "renamed fork")
    assert _indexed_docs() == expected()
    keys = list(Conversation.objects.values_list("search_key", flat=True))
    assert None not in keys and len(set(keys)) == len(keys)
    assert a.search_key in keys  # the instance the writer made has it
    store.delete_conversation(b)  # the newest key: the next conversation gets it again
    assert _indexed_docs() == expected()
    c = store.create_conversation(title="after the fork", owner=bob)
    assert set(conversation_rows(bob, query="renamed").values_list("pk", flat=True)) == set()
    assert set(conversation_rows(bob, query="sunny").values_list("pk", flat=True)) == set()
    assert set(conversation_rows(bob, query="after the").values_list("pk", flat=True)) == {c.pk}
    search.rebuild()
    assert _indexed_docs() == expected()


def test_a_write_s_docs_and_sources_go_in_as_few_statements_as_hold_them(alice, monkeypatch):
    """A trigger indexes search docs and sources (SQLite's FTS5, which writes its pending index
    out at each statement that fires one): a write inserts each table's rows in one statement,
    not one per row; rows beyond what one statement takes go in the next, every one indexed."""
    conversation = store.create_conversation(title="statements", owner=alice)
    turn = store.record_turns([store.NewTurn("agent", ())], conversation)[1][0]
    sources = [AttributionRecord(f"https://site{i}.example/page", f"Source number {i}")
               for i in range(5)]

    def write(text: str) -> list[str]:
        with CaptureQueriesContext(connection) as queries:
            store.append_events(turn, [EventRecord("message", text=text, attributions=sources)])
        return [q["sql"] for q in queries.captured_queries if "INSERT INTO" in q["sql"] and (
            SearchDoc._meta.db_table in q["sql"] or "conversations_attribution" in q["sql"])]

    inserts = write("first message")
    assert len(inserts) == 2 and not any("times" in sql for sql in inserts)  # one per table
    monkeypatch.setattr(search.index, "_PARAMS_PER_STATEMENT", 7)  # two docs (3 params) a statement
    assert len(write("second message")) > 2
    for word in ["first message", "second message", "Source number 4", "site3.example"]:
        assert set(conversation_rows(alice, query=word).values_list("pk", flat=True)) == {
            conversation.pk}
    assert SearchDoc.objects.filter(conversation=conversation).count() == 1 + 2 + 2 * 5
    if connection.vendor == "sqlite":
        assert len(_indexed_docs()) == SearchDoc.objects.count()


def test_search_keys_are_given_once_and_kept(alice):
    """SQLite: a conversation the ORM creates gets the next key too; a key never changes (its
    docs' FTS rowids carry it), and a doc whose rowid cannot carry its id is refused, never
    left out of the search unseen."""
    if connection.vendor != "sqlite":
        pytest.skip("SQLite's FTS index")
    from django.db import IntegrityError, transaction

    a = build_conversation(owner=alice)
    b = Conversation.objects.create(title="made by the ORM")
    assert a.search_key is not None
    assert Conversation.objects.get(pk=b.pk).search_key == a.search_key + 1
    for key in (None, a.search_key + 7):
        with pytest.raises(IntegrityError, match="keeps its search key"), transaction.atomic():
            Conversation.objects.filter(pk=a.pk).update(search_key=key)
    with pytest.raises(IntegrityError, match=r"no search key .*, or its id"), \
            transaction.atomic():
        SearchDoc.objects.create(id=1 << search.KEY_SHIFT, conversation=a,
                                 source=SearchDoc.Source.TITLE, body="lost?")
    # A key too large to shift into a rowid: its docs are refused, not indexed under another.
    big = store.create_conversation(title="big", owner=alice)
    with connection.cursor() as cursor:  # past the guard: it refuses changes, not this test
        cursor.execute(f"DROP TRIGGER {Conversation._meta.db_table}_search_key_kept")
    Conversation.objects.filter(pk=big.pk).update(search_key=1 << 31)
    with pytest.raises(IntegrityError, match="no search key"), transaction.atomic():
        SearchDoc.objects.create(conversation=big, source=SearchDoc.Source.TITLE, body="big")
    assert set(conversation_rows(alice, query="sunny").values_list("pk", flat=True)) == {a.pk}


def test_a_conversation_deleted_by_sql_leaves_no_fts_row_for_the_next_to_inherit(alice):
    """SQLite: deleted by raw SQL (as a flush does), the newest conversation's docs and
    their FTS rows go with it, so the next conversation, which gets its key again, matches
    none of its text."""
    if connection.vendor != "sqlite":
        pytest.skip("SQLite's FTS index")
    gone = Conversation.objects.create(title="about aardvarks")
    SearchDoc.objects.create(conversation=gone, source=SearchDoc.Source.MESSAGE,
                             body="the aardvark digs")
    key = Conversation.objects.get(pk=gone.pk).search_key
    with connection.cursor() as cursor:
        cursor.execute(f"DELETE FROM {Conversation._meta.db_table} WHERE id = %s",
                       [gone.pk.hex])
    assert not SearchDoc.objects.exists() and _indexed_docs() == []
    after = store.create_conversation(title="something else", owner=alice)
    assert after.search_key == key
    assert not conversation_rows(alice, query="aardvark").exists()


def test_snippet_marks_and_escapes():
    marked = search.snippet("a <script>alert(1)</script> then the Needle & more", "needle")
    assert marked == "a &lt;script&gt;alert(1)&lt;/script&gt; then the <mark>Needle</mark> " \
                     "&amp; more"
    long = "word " * 100 + "target" + " tail" * 100
    cut = search.snippet(long, "TARGET")
    assert cut.startswith("…") and cut.endswith("…") and "<mark>target</mark>" in cut
    assert len(cut) < 200
    assert search.snippet("nothing here", "absent") is None


def test_sites():
    assert search.sites("a.b.example.co.uk") == ["a.b.example.co.uk", "b.example.co.uk",
                                                 "example.co.uk", "co.uk"]
    assert search.sites("localhost") == ["localhost"]
    assert search.sites("10.0.0.1") == ["10.0.0.1"]


def test_deleting_takes_the_conversation_out_of_the_counts(alice):
    a = build_conversation(owner=alice)
    assert filter_choices(alice)["domains"]
    store.delete_conversation(a)
    assert filter_choices(alice) == {"providers": [], "models": [], "domains": []}
    assert not Conversation.objects.exists()
    assert not SearchDoc.objects.exists() and not ConversationFacet.objects.exists()


def test_admin_edits_of_title_and_owner_go_through_the_store(alice, bob, staff, rf):
    from types import SimpleNamespace

    from django.contrib import admin

    a = build_conversation(owner=alice)
    model_admin = admin.site._registry[Conversation]
    a.title, a.owner = "Renamed by staff", bob
    request = rf.post("/")
    request.user = staff
    model_admin.save_model(request, a, SimpleNamespace(changed_data=["title", "owner"]), True)
    a.refresh_from_db()
    assert (a.title, a.owner) == ("Renamed by staff", bob)
    assert set(conversation_rows(bob, query="by staff").values_list("pk", flat=True)) == {a.pk}
    assert filter_choices(alice)["providers"] == [] and filter_choices(bob)["providers"]
    assert_matches_rebuild([alice, bob, staff])


def test_marked_head_marks_a_match_the_row_shows():
    marked = search.marked_head("a <b> then NEEDLE & more", "needle", 160)
    assert marked == "a &lt;b&gt; then <mark>NEEDLE</mark> &amp; more"
    long = "x" * 150 + " needle " + "y" * 50
    assert search.marked_head(long, "needle", 160) == "x" * 150 + " <mark>needle</mark> y…"
    # A match cut by the row's limit, or past it, is left to the snippet.
    assert search.marked_head("x" * 156 + "needle", "needle", 160) is None
    assert search.marked_head("nothing here", "absent", 160) is None


def test_snippets_of_a_page_are_one_query(alice):
    made = [build_conversation(owner=alice, title=f"c{i}") for i in range(3)]
    other = store.create_conversation(title="sunny title only", owner=alice)
    with CaptureQueriesContext(connection) as captured:
        found = search.snippets([c.pk for c in [*made, other]], "SUNNY")
    assert len(captured.captured_queries) == 1
    assert set(found) == {c.pk for c in made}  # a match in the title alone has no snippet
    assert all("<mark>sunny</mark>" in html for html in found.values())
