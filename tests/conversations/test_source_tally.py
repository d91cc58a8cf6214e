"""The Sources roll-up: kept through every change to the rows, it is the roll-up made afresh
from them; and read with every filter it holds, its figures are those of the exports."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection

from conversations import source_report, source_tally, store
from conversations.models import Conversation, Event, SourceSpread, SourceTally, SourceTallyDelta
from conversations.source_report import Filters
from streams.bodies import ActivityBody
from streams.builder import AttributionRecord, EventRecord
from tests.conversations.test_source_report import _from_exports, _reported

pytestmark = pytest.mark.django_db

DAY1 = dt.datetime(2026, 11, 1, 9, 30, tzinfo=dt.UTC)
DAY2 = dt.datetime(2026, 11, 2, 17, 5, tzinfo=dt.UTC)


def _answer(cited: list[str], consulted: list[str] = (), *, when: dt.datetime,
            served: tuple[str, str] = ("openai", "gpt-x"),
            text: str = "An answer with sources.") -> store.NewTurn:
    records = []
    if consulted:
        records.append(EventRecord("hosted_activity", body=ActivityBody(
            f"ws_{len(consulted)}", "web_search", "completed", {"query": "q"}, "",
            tuple({"url": u, "title": f"Title of {u}"} for u in consulted))))
    records.append(EventRecord("message", text=text, attributions=[
        AttributionRecord(u, f"Title of {u}", "", 0, 6, integrity="exact") for u in cited]))
    return store.NewTurn("agent", records, provider=served[0], model=served[1],
                         created_at=when)


def _conversation(owner: User, *turns: store.NewTurn) -> Conversation:
    conversation, _ = store.record_turns(list(turns), store.NewConversation(owner=owner))
    return conversation


def _kept() -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    source_tally.fold()
    cells = sorted(SourceTally.objects.values_list(
        "group", "owner", "name", "day", "provider", "model", "site", "host", "label", "title",
        *source_tally.SUMS, "first_seen", "last_seen"))
    spread = sorted(SourceSpread.objects.values_list(
        "conversation_id", "group", "owner", "name", "day", "provider", "model"))
    return cells, spread


def _store(alice: User, bob: User) -> list[Conversation]:
    a, b = "https://a.example.com/1", "https://www.a.example.com/2"
    c = "https://news.example.org/c"
    spans = _conversation(  # a and its domain on two days and two models: spread rows
        alice, _answer([a], [a, c], when=DAY1),
        _answer([a, b], [b], when=DAY2, served=("anthropic", "claude-x")))
    one_day = _conversation(alice, _answer([c], [a, c], when=DAY1, text="Tides, explained."),
                            _answer([c], when=DAY1 + dt.timedelta(hours=1)))
    bobs = _conversation(bob, _answer([a], [a], when=DAY2))
    return [spans, one_day, bobs]


@pytest.fixture
def alice() -> User:
    return User.objects.create_user("alice")


@pytest.fixture
def bob() -> User:
    return User.objects.create_user("bob")


def test_every_change_keeps_the_roll_up_a_fresh_one_would_be(alice, bob):
    _, one_day, bobs = _store(alice, bob)
    assert SourceSpread.objects.exists()
    # a live turn: its sources in two writes, its provenance after them (its cells move)
    ((turn, _),) = store.open_turns(one_day, [store.NewTurn("agent", [], status="streaming")])
    store.append_events(turn, _answer(["https://a.example.com/1"], ["https://late.example/"],
                                      when=DAY1).records)
    store.append_events(turn, _answer(["https://late.example/"], when=DAY1).records)
    store.set_provenance(turn, "gemini", "gemini-x")
    store.set_owner(bobs, alice)  # bob's cells go to alice
    # the earliest use of a's cells leaves: their first seen is read again
    earliest = _conversation(alice, _answer(["https://a.example.com/1"],
                                            when=DAY1 - dt.timedelta(hours=9)))
    store.delete_conversation(earliest)
    kept = _kept()
    assert kept[0] and kept[1]
    source_tally.rebuild()
    assert _kept() == kept


def test_a_deleted_conversation_leaves_no_cells(alice, bob):
    conversations = _store(alice, bob)
    for conversation in conversations:
        store.delete_conversation(conversation)
    assert _kept() == ([], [])


@pytest.mark.parametrize("f", [
    Filters(), Filters(provider="openai"), Filters(provider="anthropic", model="claude-x"),
    Filters(since=DAY1.date(), until=DAY1.date()), Filters(since=DAY2.date()),
    Filters(until=DAY1.date(), model="gpt-x"), Filters(owner="bob"), Filters(q="tides"),
    Filters(q="answer", provider="openai"),
], ids=["all", "provider", "model", "day 1", "day 2", "model by day 1", "owner", "search",
        "search, provider"])
@pytest.mark.parametrize("group", ["domain", "url"])
def test_the_roll_up_read_with_each_filter_agrees_with_the_exports(alice, bob, f, group):
    _store(alice, bob)
    staff = User.objects.create_user("staff", is_staff=True)
    owned = Conversation.objects.filter(owner__username=f.owner) if f.owner else (
        Conversation.objects.filter(owner=alice))
    reader = staff if f.owner else alice
    if f.q:  # the list's search: the conversations saying the word (read from the rows)
        owned = owned.filter(pk__in=Event.objects.filter(text__icontains=f.q)
                             .values("conversation_id"))
        assert 0 < owned.count() <= 2

    def keep(pair: tuple[str, str], when: dt.datetime) -> bool:
        return ((not f.provider or pair[0] == f.provider) and (not f.model or pair[1] == f.model)
                and (not f.since or when.date() >= f.since)
                and (not f.until or when.date() <= f.until))

    counted = _from_exports(list(owned), keep)
    expected = counted[group]
    assert _reported(reader, group, f) == expected
    profiles = {(p["provider"], p["model"]): p for p in source_report.models(reader, f)}
    assert set(profiles) == set(counted["models"])
    for pair, numbers in counted["models"].items():
        for name in ("answers", "searches", "searched_answers", "consulted", "cited_sources",
                     "citations", "consulted_not_cited", "cited_not_consulted", "exact"):
            got = profiles[pair]["integrity" if name == "exact" else name]
            assert (got["exact"] if name == "exact" else got) == numbers[name], (pair, name)
    if not f.any:  # the spread conversation counts once, across its two days and models
        assert expected["example.com" if group == "domain" else "https://a.example.com/1"][
            "conversations"] == 2


def test_sorting_by_each_column_pages_through_every_row_once(alice, bob):
    _store(alice, bob)
    names = set(_reported(alice, "url"))
    pages = range(1, -(-len(names) // 2) + 1)
    for sort in (*source_report.COLUMNS, "name"):
        for descending in (True, False):
            seen = [row["name"] for page in pages for row in source_report.sources(
                alice, Filters(), group="url", sort=sort, descending=descending, page=page,
                size=2).rows]
            assert sorted(seen) == sorted(names), (sort, descending)


def test_rebuild_sources_makes_the_same_rows_and_roll_up_again(alice, bob):
    from io import StringIO

    from django.core.management import call_command

    _store(alice, bob)
    kept = _kept()
    SourceTally.objects.all().delete()
    out = StringIO()
    call_command("rebuild_sources", stdout=out)
    assert _kept() == kept
    assert "roll-up cells" in out.getvalue() and f" {len(kept[0])} roll-up" in out.getvalue()


@pytest.mark.parametrize("journal", [False, True], ids=["cells", "journal"])
def test_a_recording_in_one_transaction_keeps_the_roll_up_a_fresh_one_would_be(
        alice, bob, journal, monkeypatch):
    """As the capture log's recorder writes: a conversation started, its turns opened, the
    served model set before the events, the events in two writes (a search sent again), all
    in one transaction whose rows are gathered, not read back; and beside it a conversation
    started before, written the same way."""
    monkeypatch.setattr(source_tally, "JOURNAL", journal)  # PostgreSQL's way, on SQLite too
    _, one_day, _ = _store(alice, bob)
    with store.all_or_nothing():
        for conversation, early in ((store.create_conversation(owner=alice), True),
                                    (store.create_conversation(owner=alice), False),
                                    (one_day, True)):
            ((turn, _),) = store.open_turns(conversation, [
                store.NewTurn("agent", [], status="streaming")])
            if early:  # as a recording: the served model known before the events
                store.set_provenance(turn, "anthropic", "claude-x", indexed=False)
            records = _answer(["https://a.example.com/1"], ["https://late.example/"],
                              when=DAY2).records
            store.append_events(turn, records)
            if not early:  # as a live turn: after its first events
                store.set_provenance(turn, "anthropic", "claude-x")
            store.append_events(turn, [*records[:1], *_answer(
                ["https://late.example/"], when=DAY2).records[1:]])
    assert SourceTallyDelta.objects.exists() == source_tally.journal(connection)
    profiles = {(p["provider"], p["model"]): p for p in source_report.models(alice, Filters())}
    assert not SourceTallyDelta.objects.exists()  # the read folded the journal in first
    kept = _kept()
    # the store's one and one for each new turn, though each was sent twice
    assert profiles[("anthropic", "claude-x")]["searches"] == 4
    source_tally.rebuild()
    assert _kept() == kept
