"""The admin: read-only append-only data, the payload inspector, and list pages whose query count
does not grow with the number of rows."""

from __future__ import annotations

import re
import uuid
from typing import Any

import orjson
import pytest
from django.contrib import admin
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from conversations import admin_counts, admin_search, search
from conversations.models import Attribution, Conversation, Event, ProviderPayload, Turn
from conversations.payload_text import decodes, human_size

pytestmark = pytest.mark.django_db

APPEND_ONLY = [Event, Attribution, ProviderPayload]


@pytest.fixture(autouse=True)
def _fast_passwords(settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


def payload(value, provider="anthropic", format="anthropic.content_block", version="v1"):
    return ProviderPayload.objects.create(provider=provider, format=format, version=version,
                                          value=orjson.dumps(value).decode())


def populate(n: int) -> Conversation:
    """A conversation with n turns, n events (each with a payload) and n attributions, written
    in bulk (the admin is read here, not the store)."""
    conversation = Conversation.objects.create(title=f"bulk {n}")
    turns = Turn.objects.bulk_create([
        Turn(conversation=conversation, index=i, role="agent", provider="anthropic",
             model=f"claude-{i % 3}", agent_id="anthropic:claude") for i in range(n)])
    payloads = ProviderPayload.objects.bulk_create([
        ProviderPayload.build("anthropic", "anthropic.content_block", "v1",
                              orjson.dumps({"type": "text", "text": f"t{i}"}).decode())
        for i in range(n)])
    events = Event.objects.bulk_create([
        Event(conversation=conversation, turn=turns[i], seq=i + 1, kind="message",
              text=f"message {i}", payload=payloads[i]) for i in range(n)])
    Attribution.objects.bulk_create([  # with the domain the store fills (bulk skips save)
        Attribution(event=events[i], ordinal=0, url=f"https://s{i}.example.com/p",
                    domain=f"s{i}.example.com", title=f"source {i}", replay=payloads[i])
        for i in range(n)])
    search.rebuild()  # the derived search tables, as the store would have kept them
    return conversation


# -- read-only ---------------------------------------------------------------------------------


@pytest.mark.parametrize("model", [*APPEND_ONLY, Turn])
def test_append_only_models_cannot_be_added_changed_or_deleted(admin_client, model):
    populate(2)
    obj = model.objects.first()
    opts = model._meta
    base = f"admin:{opts.app_label}_{opts.model_name}"
    assert admin_client.get(reverse(f"{base}_add")).status_code == 403
    change = reverse(f"{base}_change", args=[obj.pk])
    page = admin_client.get(change)
    assert page.status_code == 200
    assert b'name="_save"' not in page.content  # a view page, no form to submit
    assert admin_client.post(change, {}).status_code == 403
    assert admin_client.post(reverse(f"{base}_delete", args=[obj.pk]),
                             {"post": "yes"}).status_code == 403
    assert model.objects.filter(pk=obj.pk).exists()
    changelist = admin_client.post(reverse(f"{base}_changelist"), {
        "action": "delete_selected", "_selected_action": [obj.pk]})
    assert model.objects.filter(pk=obj.pk).exists()
    assert changelist.status_code in (200, 302)


def test_conversation_page_shows_its_turns_inline(admin_client):
    conversation = populate(3)
    page = admin_client.get(reverse("admin:conversations_conversation_change",
                                    args=[conversation.pk]))
    assert page.status_code == 200
    assert page.content.count(b"claude-") >= 3
    assert admin_client.get(reverse("admin:conversations_conversation_add")).status_code == 403


def test_api_token_keys_are_not_shown_in_the_admin():
    from rest_framework.authtoken.models import TokenProxy

    assert not admin.site.is_registered(TokenProxy)


# -- the payload inspector ---------------------------------------------------------------------


def test_payload_page_is_pretty_escaped_json_with_its_size(admin_client):
    hostile = payload({"type": "text", "text": "</pre><script>alert(1)</script><img src=x>"})
    page = admin_client.get(reverse("admin:conversations_providerpayload_change",
                                    args=[hostile.pk]))
    html = page.content.decode()
    assert page.status_code == 200
    assert "<script>alert(1)" not in html and "<img src=x>" not in html
    assert "&lt;/pre&gt;&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert '{\n  &quot;type&quot;: &quot;text&quot;' in html  # pretty-printed, escaped
    assert human_size(hostile.size) in html


def test_large_payload_shows_a_preview_and_a_download(admin_client, client, django_user_model):
    big = payload({"type": "text", "text": "x" * 1_200_000})
    page = admin_client.get(reverse("admin:conversations_providerpayload_change",
                                    args=[big.pk]))
    assert page.status_code == 200
    assert len(page.content) < 200_000  # only a preview
    assert "1.1 MB" in page.content.decode()
    download = reverse("admin:conversations_providerpayload_download", args=[big.pk])
    assert download in page.content.decode()
    response = admin_client.get(download)
    assert response.status_code == 200
    assert response["Content-Disposition"].startswith("attachment;")
    assert response["Content-Type"] == "application/json"
    assert response.content == big.value.encode()
    # staff only
    user = django_user_model.objects.create_user("plain", password="pw-plain-123")
    client.force_login(user)
    assert client.get(download).status_code == 302
    client.logout()
    assert client.get(download).status_code == 302


def test_decodes_with_its_adapter():
    good = orjson.dumps({"type": "text", "text": "hi"}).decode()
    assert decodes("anthropic", "anthropic.content_block", good) is True
    assert decodes("anthropic", "anthropic.content_block", '{"no": "type"}') is False
    assert decodes("anthropic", "anthropic.unknown_format", good) is False
    assert decodes("anthropic", "anthropic.content_block", "not json") is False
    assert decodes("acme", "acme.block", good) is None  # no adapter to ask


def test_payload_list_filters_and_decode_column(admin_client):
    payload({"type": "text", "text": "ok"})
    payload({"nope": 1})
    payload({"x": 1}, provider="openai", format="openai.responses.output_item", version="v9")
    url = reverse("admin:conversations_providerpayload_changelist")
    page = admin_client.get(url).content.decode()
    assert "icon-yes" in page and "icon-no" in page
    for query, rows in (("provider=anthropic", 2), ("provider=openai", 1),
                        ("format=anthropic.content_block", 2), ("version=v9", 1)):
        changelist = admin_client.get(f"{url}?{query}").context["cl"]
        assert changelist.result_count == rows, query


def test_attribution_search_by_url_or_domain(admin_client):
    populate(5)
    url = reverse("admin:conversations_attribution_changelist")
    assert admin_client.get(f"{url}?q=s3.example").context["cl"].result_count == 1
    assert admin_client.get(f"{url}?q=domain:example.com").context["cl"].result_count == 5
    assert admin_client.get(f"{url}?q=domain:s2.example.com").context["cl"].result_count == 1
    assert admin_client.get(f"{url}?q=domain:ample.com").context["cl"].result_count == 0


def test_event_list_filters_by_conversation(admin_client):
    one, other = populate(3), populate(4)
    url = reverse("admin:conversations_event_changelist")
    assert admin_client.get(f"{url}?conversation__id__exact={one.pk}").context[
        "cl"].result_count == 3
    assert admin_client.get(f"{url}?conversation__id__exact={other.pk}&kind=message").context[
        "cl"].result_count == 4


# -- list pages stay fast ----------------------------------------------------------------------


@pytest.mark.parametrize("model", [Conversation, Turn, Event, Attribution, ProviderPayload])
def test_list_page_query_count_is_constant_in_the_row_count(admin_client, model,
                                                            django_assert_max_num_queries):
    opts = model._meta
    url = reverse(f"admin:{opts.app_label}_{opts.model_name}_changelist")

    def queries() -> int:
        with CaptureQueriesContext(connection) as captured:
            assert admin_client.get(url).status_code == 200
        return len(captured)

    populate(30)
    if model is Conversation:
        for i in range(30):
            Conversation.objects.create(title=f"c{i}")
    small = queries()
    populate(300)
    if model is Conversation:
        Conversation.objects.bulk_create([Conversation(title=f"d{i}", id=uuid.uuid4())
                                          for i in range(300)])
    large = queries()
    assert large == small, f"{model.__name__}: {small} queries for few rows, {large} for many"
    with django_assert_max_num_queries(12):
        admin_client.get(url)


ADMINS = [Conversation, Turn, Event, Attribution, ProviderPayload]
# What each list must not read for its rows: large columns (the list shows a preview at most).
NOT_LISTED = {
    Turn: ['"responses"'],
    Event: ['"body"', '"conversations_turn"."responses"'],
    Attribution: ['"excerpt"', '"conversations_event"."body"', '"conversations_event"."text"'],
}


@pytest.mark.parametrize("model", ADMINS)
def test_list_ordering_is_the_leading_columns_of_an_index(model):
    """Each changelist's ordering is served by an index, not a sort of the table."""
    opts = model._meta
    ordering = [name.lstrip("-").removesuffix("_id") for name in
                admin.site._registry[model].get_ordering(None)]
    columns = [opts.get_field(name).column for name in ordering]
    indexed = [[opts.get_field(f.lstrip("-")).column for f in index.fields]
               for index in [*opts.indexes, *opts.constraints] if getattr(index, "fields", None)]
    indexed += [[f.column] for f in opts.concrete_fields if f.db_index or f.primary_key]
    assert any(index[:len(columns)] == columns for index in indexed), (model, columns)


@pytest.mark.parametrize("model", ADMINS)
def test_list_query_reads_no_large_column(admin_client, model):
    populate(3)
    opts = model._meta
    url = reverse(f"admin:{opts.app_label}_{opts.model_name}_changelist")
    with CaptureQueriesContext(connection) as captured:
        assert admin_client.get(url).status_code == 200
    table = connection.ops.quote_name(opts.db_table)
    rows = [q["sql"] for q in captured.captured_queries
            if q["sql"].startswith("SELECT") and f"FROM {table}" in q["sql"]
            and "COUNT(" not in q["sql"]]
    assert rows, "the list query was not seen"
    for sql in rows:
        for column in NOT_LISTED.get(model, []):
            qualified = column if "." in column else f"{table}.{column}"
            assert qualified not in sql, (model.__name__, column, sql)
        if model is ProviderPayload:  # the value only for small payloads (the decode column)
            assert f'{table}."value"' not in sql.split("CASE")[0]


def test_unfiltered_list_of_a_large_table_is_not_counted(admin_client, monkeypatch):

    populate(5)
    if connection.vendor == "postgresql":  # the planner's statistics are the estimate
        with connection.cursor() as cursor:
            cursor.execute('ANALYZE "conversations_event"')
    monkeypatch.setattr(admin_counts, "ESTIMATE_ABOVE", 1)
    url = reverse("admin:conversations_event_changelist")
    with CaptureQueriesContext(connection) as captured:
        changelist = admin_client.get(url).context["cl"]
    assert changelist.result_count == 5  # the estimate: exact while nothing was deleted
    assert not [q for q in captured.captured_queries
                if "COUNT(" in q["sql"] and '"conversations_event"' in q["sql"]]
    one = Conversation.objects.get()
    filtered = admin_client.get(f"{url}?conversation__id__exact={one.pk}&kind=message")
    assert filtered.context["cl"].result_count == 5  # filtered: counted


def test_list_filter_choices_do_not_scan_the_table(admin_client):
    from conversations import store
    from conversations.admin_counts import distinct_values

    payload({"a": 1}, provider="openai", format="f1", version="v2")
    payload({"a": 2}, provider="anthropic", format="f2", version="v1")
    payload({"a": 3}, provider="anthropic", format="f1", version="v1")
    assert distinct_values(ProviderPayload, "format") == ["f1", "f2"]
    assert distinct_values(ProviderPayload, "provider", limit=1) == ["anthropic"]
    build = store.create_conversation(title="t")
    turn = store.open_turns(build, [store.NewTurn("agent", [])])[0][0]
    store.set_provenance(turn, "google", "gemini-x")
    for model in (ProviderPayload, Turn):
        opts = model._meta
        url = reverse(f"admin:{opts.app_label}_{opts.model_name}_changelist")
        with CaptureQueriesContext(connection) as captured:
            page = admin_client.get(url).content.decode()
        assert not [q for q in captured.captured_queries if "DISTINCT" in q["sql"]
                    and connection.ops.quote_name(opts.db_table) in q["sql"]
                    and "RECURSIVE" not in q["sql"]], model
        assert ("?format=f2" in page) if model is ProviderPayload else ("?provider=google"
                                                                         in page)


# -- filtered lists and searches use their indexes ---------------------------------------------


def test_a_filtered_list_is_counted_up_to_its_limit(admin_client, monkeypatch):
    from conversations import admin as conversation_admin

    populate(5)
    url = reverse("admin:conversations_event_changelist")
    assert admin_client.get(f"{url}?kind=message").context["cl"].result_count == 5
    monkeypatch.setattr(admin_counts, "COUNT_LIMIT", 3)
    conversation_admin.ProviderPayloadAdmin.list_per_page = 2
    try:
        response = admin_client.get(f"{url}?kind=message")
        cl = response.context["cl"]
        assert cl.result_count == 3 and str(cl.result_count) == "3+"
        assert "3+ events" in response.content.decode()
        payloads = admin_client.get(reverse("admin:conversations_providerpayload_changelist")
                                    + "?provider=anthropic")
        assert payloads.context["cl"].paginator.num_pages == 2  # every linked page exists
        assert admin_client.get(f"{url}?kind=message&seq=1").status_code in (200, 302)
    finally:
        conversation_admin.ProviderPayloadAdmin.list_per_page = 100
    assert admin_client.get(f"{url}?kind=error").context["cl"].result_count == 0


def test_key_search_is_an_exact_match_through_the_index(admin_client):
    conversation = populate(3)
    other = populate(2)
    first = Event.objects.filter(conversation=conversation).order_by("seq").first()
    event = Event.objects.create(conversation=conversation, turn=first.turn, seq=100,
                                 kind="hosted_activity", activity_id="srvtoolu_01AbC")
    events = reverse("admin:conversations_event_changelist")

    def found(url: str, term: str) -> int:
        with CaptureQueriesContext(connection) as captured:
            response = admin_client.get(url, {"q": term})
        assert response.status_code == 200
        listed = [q["sql"] for q in captured.captured_queries if "LIMIT" in q["sql"]
                  and connection.ops.quote_name(response.context["cl"].model._meta.db_table)
                  in q["sql"]]
        assert listed and not [sql for sql in listed if " LIKE " in sql.split("WHERE")[-1]
                               and "title" not in sql and "model" not in sql], listed
        return response.context["cl"].result_count

    assert found(events, str(conversation.pk)) == 4
    assert found(events, conversation.pk.hex) == 4  # a UUID as its 32 hex digits
    assert found(events, str(event.pk)) == 1
    assert found(events, "srvtoolu_01AbC") == 1
    assert found(events, "srvtoolu_01abc") == 0  # a provider's id is matched as it is
    assert found(events, "not-a-key") == 0
    payloads = reverse("admin:conversations_providerpayload_changelist")
    one = ProviderPayload.objects.get(value__contains='"t2"')  # the others come in pairs
    assert found(payloads, one.sha256) == 1 and found(payloads, str(one.pk)) == 1
    twin = ProviderPayload.objects.filter(value__contains='"t0"').first()
    assert found(payloads, twin.sha256) == 2
    conversations = reverse("admin:conversations_conversation_changelist")
    assert admin_client.get(conversations, {"q": str(other.pk)}).context["cl"].result_count == 1
    assert admin_client.get(conversations, {"q": "bulk"}).context["cl"].result_count == 2
    assert admin_client.get(conversations, {"q": "bulk 3"}).context["cl"].result_count == 1
    assert admin_client.get(conversations, {"q": '"bulk 2"'}).context["cl"].result_count == 1
    turns = reverse("admin:conversations_turn_changelist")
    assert admin_client.get(turns, {"q": str(other.pk)}).context["cl"].result_count == 2
    assert admin_client.get(turns, {"q": "claude-1"}).context["cl"].result_count == 2


def test_conversation_search_reads_the_lists_index_of_every_text(admin_client, monkeypatch):
    """The conversations admin searches as the conversation list does: titles, messages and
    cited sources, through the search index (no LIKE over every title); a word too short for
    a trigram reads titles only."""

    said = populate(3)  # its messages say "message 0".."message 2", its sources "source 0"..
    other = populate(1)  # "bulk 1"
    Conversation.objects.filter(pk=said.pk).update(title="a report")
    search.rebuild()
    url = reverse("admin:conversations_conversation_changelist")

    def found(term: str) -> list[Any]:
        with CaptureQueriesContext(connection) as captured:
            response = admin_client.get(url, {"q": term})
        assert response.status_code == 200
        listed = [q["sql"] for q in captured.captured_queries
                  if "conversations_conversation" in q["sql"] and "LIMIT" in q["sql"]]
        if min(len(w) for w in admin_search.search_words(term)) >= search.MIN_QUERY:
            # The outer statement's conditions (a search subquery's are its own).
            conditions = [sql.split(" WHERE ", 1)[1].rsplit(" ORDER BY", 1)[0] for sql in listed]
            assert not [c for c in conditions if "title" in c], conditions
        return [c.pk for c in response.context["cl"].result_list]

    assert found('"message 2"') == [said.pk]  # said in a message only
    assert found("S2.EXAMPLE") == [said.pk]  # a cited source's URL, any case
    assert found("report") == [said.pk]  # the title
    assert len(found('"message 0"')) == 2
    with CaptureQueriesContext(connection) as captured:
        assert found("nowhere-at-all") == []
    # A word nothing says costs no list query on SQLite (it would walk the list testing each
    # row; PostgreSQL finds the empty match set in its index).
    assert connection.vendor != "sqlite" or not [
        q for q in captured.captured_queries
        if "conversations_conversation" in q["sql"] and "LIMIT" in q["sql"]]
    assert found("a") == [said.pk]  # one letter: the titles ("a report"; "bulk 1" has none)
    assert found('report "source 1"') == [said.pk]  # every word, each anywhere
    # A short word reads titles only: "2" is in a message of "a report", not in its title.
    assert found("bulk 1") == [other.pk] and found("report 2") == []
    assert found(f"{said.pk}") == [said.pk]
    if connection.vendor != "sqlite":
        return
    # One word over the whole list: counted by the index, in the pass that reads the keys
    # the page takes; past the count's limit, "at least" that many, and every match listed.

    def counted(term: str, **params: str) -> tuple[int, int, list[str]]:
        with CaptureQueriesContext(connection) as captured:
            cl = admin_client.get(url, {"q": term, **params}).context["cl"]
        sqls = [q["sql"] for q in captured.captured_queries]
        return cl.result_count, len(cl.result_list), sqls

    count, rows, sqls = counted('"message 0"')
    assert (count, rows) == (2, 2)
    assert not [sql for sql in sqls if "COUNT" in sql and "conversations_conversation" in sql]
    assert sum(search.FTS_TABLE in sql for sql in sqls) == 1
    # A list filtered besides is counted as any search is.
    count, rows, sqls = counted('"message 0"', created_at__gte="2000-01-01 00:00:00+00:00")
    assert (count, rows) == (2, 2)
    assert [sql for sql in sqls if "COUNT" in sql and "conversations_conversation" in sql]
    monkeypatch.setattr(admin_counts, "COUNT_LIMIT", 1)
    count, rows, _ = counted('"message 0"')
    assert isinstance(count, admin_counts.CountAtLeast) and (count, rows) == (1, 2)


def test_domain_search_reads_the_domain_column(admin_client, monkeypatch):
    from conversations import admin as conversation_admin

    populate(3)
    url = reverse("admin:conversations_attribution_changelist")

    def found(term: str) -> int:
        return admin_client.get(url, {"q": term}).context["cl"].result_count

    for limit in (5_000, 1):  # by skip-scan, and by one pass over the index (many hosts)
        monkeypatch.setattr(conversation_admin, "DISTINCT_DOMAINS", limit)
        assert found("domain:example.com") == 3
        assert found("domain:www.s1.example.com") == 1  # stored without "www."
        assert found("domain:S2.Example.com.") == 1
        assert found("domain:1.example.com") == 0  # a label, not a suffix of one
        assert found("domain:bad_host") == 0


@pytest.mark.skipif(connection.vendor != "sqlite", reason="reads SQLite's query plans")
@pytest.mark.parametrize(("model", "query"), [
    (Event, "kind=message"), (Event, "incomplete__exact=1"), (Attribution,
                                                              "incomplete__exact=1"),
    (ProviderPayload, "provider=anthropic"), (ProviderPayload, "format=f"),
    (ProviderPayload, "version=v1"), (Attribution, "q=domain:s1.example.com"),
])
def test_a_filtered_list_is_read_in_order_from_an_index(admin_client, model, query):
    """No filter of these lists sorts or scans its table: each is one index range, in the
    list's order (a rare value was a scan of a million rows)."""
    populate(3)
    opts = model._meta
    url = reverse(f"admin:{opts.app_label}_{opts.model_name}_changelist")
    with CaptureQueriesContext(connection) as captured:
        assert admin_client.get(f"{url}?{query}").status_code == 200
    table = connection.ops.quote_name(opts.db_table)
    listed = [q["sql"] for q in captured.captured_queries
              if q["sql"].startswith("SELECT") and f"FROM {table}" in q["sql"]
              and " LIMIT " in q["sql"]]
    counts = [sql for sql in listed if sql.startswith("SELECT COUNT(*)")]
    assert listed and counts
    with connection.cursor() as cursor:
        for sql in listed:
            cursor.execute(f"EXPLAIN QUERY PLAN {sql}")
            plan = " | ".join(str(row[-1]) for row in cursor.fetchall())
            # A scan of a partial index is a read of its rows only (the incomplete ones).
            assert not re.search(rf"SCAN {opts.db_table}(?! USING)", plan), plan
            assert "TEMP B-TREE" not in plan, plan
            # Counted from the index alone, no row read (a partial index holds only the few
            # incomplete rows: SQLite reads those rows, which are the count anyway).
            if sql in counts and "incomplete" not in query:
                assert "COVERING INDEX" in plan, plan


def retitle(title: str, new: str) -> None:
    """Sources are append-only: an UPDATE by hand, as the SQL shell would do it."""
    with connection.cursor() as cursor:
        cursor.execute(f"UPDATE {connection.ops.quote_name(Attribution._meta.db_table)} "
                       "SET title = %s WHERE title = %s", [new, title])


def test_a_source_search_through_its_index_finds_what_icontains_finds(admin_client,
                                                                      monkeypatch):
    """The rows a text search of sources finds through the database's index (SQLite's FTS
    index of URLs and titles; PostgreSQL's trigram indexes serve icontains itself) are the
    rows Django's icontains finds, in the same order."""
    from conversations import admin as conversation_admin

    populate(4)
    populate(3)
    retitle("source 2", 'Ünïcode SOURCE 2 "quoted"')
    url = reverse("admin:conversations_attribution_changelist")

    def found(term: str) -> tuple[list[int], list[str]]:
        with CaptureQueriesContext(connection) as captured:
            response = admin_client.get(url, {"q": term})
        rows = [a.pk for a in response.context["cl"].result_list]
        return rows, [q["sql"] for q in captured.captured_queries]

    terms = ("s2.example", "source 3", "EXAMPLE.com/p", "source", "nowhere-at-all", "s",
             '"source 1"', 'SOURCE 2 "quoted"', '"', "co*", "s1 p")
    for term in terms:
        indexed, queries = found(term)
        if connection.vendor == "sqlite" and any(len(word) >= 3
                                                 for word in admin_search.search_words(term)):
            assert any(search.SOURCE_FTS_TABLE in sql for sql in queries), term
            if indexed:  # a rare word's page reads the ids the count's pass gave
                assert any("json_each" in sql for sql in queries), term
        with monkeypatch.context() as scanned:
            scanned.setattr(conversation_admin, "source_matches", lambda word, limit, using: None)
            assert found(term)[0] == indexed, term
    assert found("s2.example")[0] and not found("nowhere-at-all")[0]
    # Case folds beyond ASCII, as on PostgreSQL (SQLite's LIKE folds ASCII only).
    assert found("ünïcode source")[0] == found("Ünïcode")[0] == found('"quoted"')[0] != []
    if connection.vendor == "sqlite":  # a common word: read in order, each source tested
        monkeypatch.setattr(admin_counts, "COUNT_LIMIT", 2)
        common, queries = found("source")
        assert len(common) == 7
        listed = [sql for sql in queries if sql.startswith('SELECT "conversations_attribution"')]
        assert listed and search.SOURCE_FTS_TABLE not in listed[0] and "LIKE" in listed[0]


def test_a_common_word_is_counted_by_the_index_of_sources(admin_client, monkeypatch):
    """A search of the whole list for one word more sources have than a count goes to reads
    "N+" from the index's own bounded count, with no count over the LIKE; a filtered list, a
    non-ASCII word or two words are counted as any search is."""
    if connection.vendor != "sqlite":
        pytest.skip("SQLite's FTS index of sources")

    populate(4)
    populate(3)
    retitle("source 2", "Ünïcode source 2")  # two sources each
    retitle("source 1", "Ünïcode source 1")
    monkeypatch.setattr(admin_counts, "COUNT_LIMIT", 2)
    url = reverse("admin:conversations_attribution_changelist")

    def listed(params: dict[str, str]) -> tuple[Any, list[str]]:
        with CaptureQueriesContext(connection) as captured:
            response = admin_client.get(url, params)
        return response, [q["sql"] for q in captured.captured_queries]

    response, queries = listed({"q": "source"})
    assert response.context["cl"].result_count == 2
    assert isinstance(response.context["cl"].result_count, admin_counts.CountAtLeast)
    assert b"2+ results" in response.content
    assert not [sql for sql in queries if "COUNT" in sql and "LIKE" in sql]
    assert len(response.context["cl"].result_list) == 7
    for params in ({"q": "source", "incomplete__exact": "0"}, {"q": "ünïcode"},
                   {"q": "source example"}):
        queries = listed(params)[1]
        assert [sql for sql in queries if "COUNT" in sql and "LIKE" in sql], params
    # A rare word: the list is the index's matches, as many as it counted; no other count.
    monkeypatch.setattr(admin_counts, "COUNT_LIMIT", 10_000)
    response, queries = listed({"q": '"source 1"'})
    assert response.context["cl"].result_count == 2 == len(response.context["cl"].result_list)
    assert not isinstance(response.context["cl"].result_count, admin_counts.CountAtLeast)
    assert [sql for sql in queries if "COUNT" in sql] == [
        sql for sql in queries if "COUNT" in sql and search.SOURCE_FTS_TABLE in sql
        and "conversations_attribution\"" not in sql]
    assert len([sql for sql in queries if "COUNT" in sql]) == 1


def test_a_list_page_joins_what_it_shows_of_other_rows_for_its_own_rows(admin_client):
    """The page's keys are read in the list's order first, and only those rows are joined to
    the events they show ("#seq kind"): a search's matches are sorted without a join."""
    populate(4)
    populate(3)
    url = reverse("admin:conversations_attribution_changelist")
    with CaptureQueriesContext(connection) as captured:
        response = admin_client.get(url, {"q": "source", "o": "-0"})  # by URL, descending
    shown = list(response.context["cl"].result_list)
    assert len(shown) == 7 and [a.url for a in shown] == sorted((a.url for a in shown),
                                                                  reverse=True)
    assert all(a.event_seq and a.event_kind == "message" for a in shown)
    event_table = Event._meta.db_table
    joined = [q["sql"] for q in captured.captured_queries if f'JOIN "{event_table}"' in q["sql"]]
    assert len(joined) == 1 and "ORDER BY" not in joined[0]
    assert all(str(a.pk) in joined[0] for a in shown)


def test_the_index_of_sources_follows_their_writes_and_deletes():
    """SQLite's FTS index of sources is kept by triggers: what it holds is the table's rows
    (its integrity check compares the two) after inserts, an update and a conversation's
    deletion."""
    if connection.vendor != "sqlite":
        pytest.skip("SQLite's FTS index; PostgreSQL's trigram indexes are the table's own")
    from conversations import store

    kept, gone = populate(3), populate(2)
    retitle("source 1", "renamed by hand")
    store.delete_conversation(gone)
    table = search.SOURCE_FTS_TABLE
    with connection.cursor() as cursor:
        cursor.execute(f"INSERT INTO {table}({table}, rank) VALUES ('integrity-check', 1)")
        cursor.execute(f"SELECT COUNT(*) FROM {table} WHERE {table} MATCH %s", ['"renamed"'])
        assert cursor.fetchone()[0] == 1
    assert Attribution.objects.filter(event__conversation=kept).count() == 3


@pytest.mark.skipif(connection.vendor != "postgresql",
                    reason="PostgreSQL's trigram indexes and planner")
def test_a_source_search_on_postgresql_reads_trigram_indexes_and_sorts_few_matches(
        admin_client, monkeypatch):
    """The search of sources is answered by the trigram indexes of url and title, and a page
    of few matches is a sort of them, never a walk of the order's index testing each source;
    its rows and their order are those of the walk."""

    for n in (6, 5, 4):
        populate(n)
    url = reverse("admin:conversations_attribution_changelist")
    table = connection.ops.quote_name(Attribution._meta.db_table)

    def listed(term: str) -> tuple[list[int], list[str]]:
        with CaptureQueriesContext(connection) as captured:
            response = admin_client.get(url, {"q": term})
        rows = [a.pk for a in response.context["cl"].result_list]
        return rows, [q["sql"] for q in captured.captured_queries
                      if f"FROM {table}" in q["sql"] and "LIKE" in q["sql"]]

    def plan(sql: str) -> str:
        with connection.cursor() as cursor:
            cursor.execute("SET LOCAL enable_seqscan = off")  # a few rows: as at scale
            cursor.execute(f"EXPLAIN (COSTS OFF) {sql}")
            found = " | ".join(row[0] for row in cursor.fetchall())
            cursor.execute("RESET enable_seqscan")
        return found

    sorted_rows, queries = listed("source")  # 15 matches, counted exactly
    count, page = (next(sql for sql in queries if sql.startswith(kind))
                   for kind in ("SELECT COUNT(*)", "SELECT \""))
    assert "attribution_url_folded_trgm" in plan(count) and \
        "attribution_title_folded_trgm" in plan(count)
    assert "upper(" not in plan(count).lower()  # the recheck reads the folded copies
    # The page's order is a sort of the matches, not the order index's (which, walked, was
    # 250k sources tested to find 100 at scale).
    assert plan(page).startswith("Limit |   ->  Sort") or plan(page).startswith("Sort"), plan(page)
    monkeypatch.setattr(admin_counts, "COUNT_LIMIT", 3)  # "3+": the walk, unsorted
    walked_rows, queries = listed("source")
    page = next(sql for sql in queries if sql.startswith('SELECT "'))
    assert "COALESCE" not in page
    assert sorted_rows == walked_rows and len(sorted_rows) == 15


def test_matches_sorted_keeps_the_order():
    from django.db.models import F

    from conversations.admin_counts import matches_sorted

    populate(4)
    populate(3)
    for ordering in (("event_id", "ordinal", "id"), ("-ordinal", "title", "-id"),
                     (F("url").desc(), "pk"), ("event__seq", "-pk")):
        qs = Attribution.objects.order_by(*ordering)
        resorted = matches_sorted(qs)
        assert "COALESCE" in str(resorted.query)
        assert list(resorted.values_list("pk", flat=True)) == list(
            qs.values_list("pk", flat=True)), ordering
