"""Writing the render caches: a row taken already is kept, or replaced where asked; one
statement for all the rows."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from conversations import cache_rows, store
from conversations.models import TurnExport, TurnFragment
from tests.support import add_turn, add_user_turn

pytestmark = pytest.mark.django_db


def _turns():
    conversation = store.create_conversation(title="cached")
    return add_user_turn(conversation, "a question"), add_turn(conversation, "agent")


def test_a_row_taken_already_is_kept():
    first, second = _turns()
    TurnExport.objects.create(turn=first, format="markdown", key="k1", text="first writer")
    with CaptureQueriesContext(connection) as captured:
        cache_rows.put(TurnExport, ("turn", "format", "key", "text"),
                       [(first.pk, "markdown", "k2", "second writer"),
                        (second.pk, "markdown", "k2", "é" * 5000),
                        (second.pk, "html", "k2", "<section>")],
                       unique=("turn", "format"))
    assert len(captured.captured_queries) == 1  # one executemany
    rows = {(r.turn_id, r.format): (r.key, r.text) for r in TurnExport.objects.all()}
    assert rows == {(first.pk, "markdown"): ("k1", "first writer"),
                    (second.pk, "markdown"): ("k2", "é" * 5000),
                    (second.pk, "html"): ("k2", "<section>")}


def test_replace_updates_the_named_fields_of_a_taken_row():
    first, second = _turns()
    TurnFragment.objects.create(turn=first, key="old", html="<p>old</p>")
    cache_rows.put(TurnFragment, ("turn", "key", "html"),
                   [(first.pk, "new", "<p>new</p>"), (second.pk, "k", "<p>2</p>")],
                   unique=("turn",), replace=("key", "html"))
    assert dict(TurnFragment.objects.values_list("turn_id", "html")) == {
        first.pk: "<p>new</p>", second.pk: "<p>2</p>"}
    assert TurnFragment.objects.get(turn=first).key == "new"


def test_no_rows_no_statement():
    with CaptureQueriesContext(connection) as captured:
        cache_rows.put(TurnExport, ("turn", "format", "key", "text"), [],
                       unique=("turn", "format"))
    assert captured.captured_queries == []


def test_every_field_must_be_given():
    """No instance is made, so a field left out would lose its default: refused."""
    first, _ = _turns()
    with pytest.raises(AssertionError, match="key"):
        cache_rows.put(TurnExport, ("turn", "format", "text"), [(first.pk, "markdown", "x")],
                       unique=("turn", "format"))
