"""A list page's rows (conversations.reading.annotated): the counts, first user line and live
flag of each row, from SQL compiled once per page size."""

from __future__ import annotations

from unittest import mock

import pytest
from django.contrib.auth.models import User
from django.db.models.sql.compiler import SQLCompiler

from conversations import reading, store
from tests.api.conftest import build_conversation
from tests.support import add_turn, add_user_turn

pytestmark = pytest.mark.django_db

SHOWN = ("title", "updated_at", "owner_id", "turn_count", "citation_count", "search_count",
         "first_user_text", "is_live")


def test_a_page_s_rows_are_what_the_orm_query_gives_and_its_sql_is_compiled_once():
    alice = User.objects.create_user("alice", password="pw-alice-123")
    cited = build_conversation(owner=alice)
    live = store.create_conversation(title="Streaming", owner=alice)
    add_user_turn(live, "Still going?")
    add_turn(live, "agent", status="streaming")
    empty = store.create_conversation(title="")
    ids = [cited.pk, live.pk, empty.pk]
    reading._ANNOTATED_SQL.clear()
    for n in (1, 2, 3):
        got = reading.annotated(ids[:n])
        want = {row.pk: row for row in reading._annotated_rows(ids[:n])}
        assert set(got) == set(ids[:n])
        for pk, row in want.items():
            assert [getattr(got[pk], name) for name in SHOWN] == \
                [getattr(row, name) for name in SHOWN]
    assert (got[cited.pk].turn_count, got[cited.pk].citation_count,
            got[cited.pk].search_count) == (5, 2, 1)
    assert got[live.pk].is_live is True and got[cited.pk].is_live is False
    assert got[cited.pk].first_user_text == "What is the weather in Paris?"
    assert got[empty.pk].turn_count == 0 and got[empty.pk].first_user_text is None

    with mock.patch.object(SQLCompiler, "as_sql", autospec=True,
                           side_effect=SQLCompiler.as_sql) as compiled:
        again = reading.annotated(list(reversed(ids)))  # other ids in the same slots
    assert compiled.call_count == 0
    assert set(again) == set(ids) and again[live.pk].is_live is True
    assert reading.annotated([]) == {}


def test_a_row_costs_the_same_whatever_its_conversation_s_size():
    """A row's counts are its own columns, kept by the writer: the page's query counts
    nothing and reads no event or attribution table (a 5,000-turn conversation's row cost
    10 ms when it counted them); its live flag is looked up in the streaming turns' index."""
    from django.db import connection

    alice = User.objects.create_user("alice", password="pw-alice-123")
    cited = build_conversation(owner=alice)
    reading._ANNOTATED_SQL.clear()
    reading.annotated([cited.pk])
    sql = reading._ANNOTATED_SQL[(connection.alias, 1)][0]
    q = connection.ops.quote_name
    assert "COUNT(" not in sql.upper() and q("conversations_attribution") not in sql
    # The first user line reads events by (conversation, seq): the first, as a rule.
    assert sql.count(q("conversations_event")) == 1
    if connection.vendor == "sqlite":
        sql, params = reading._annotated_rows([cited.pk]).query.sql_with_params()
        with connection.cursor() as cursor:
            cursor.execute("EXPLAIN QUERY PLAN " + sql, params)
            plan = " ".join(row[-1] for row in cursor.fetchall())
        assert "turn_streaming" in plan, plan
