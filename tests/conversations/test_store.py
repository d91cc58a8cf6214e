"""conversations.store, the one writer of the event log: its column lists match the models, its
step-by-step and whole-turn actions store the same rows, and every way in (the live steps,
whole turns, import, fork) gets the same derived columns."""

from __future__ import annotations

import orjson
import pytest
from django.db import models

from conversations import store
from conversations.forking import fork
from conversations.ids import uuid7
from conversations.models import Attribution, Conversation, Event, ProviderPayload, Turn
from conversations.projections import export_json, import_document, turn_dict
from conversations.provenance import ProvenanceError
from streams.bodies import ActivityBody, ReasoningBody
from streams.builder import AttributionRecord, EventRecord
from streams.parts import Payload
from tests.api.conftest import build_conversation
from tests.support import add_turn, add_user_turn

pytestmark = pytest.mark.django_db


def message(text: str) -> EventRecord:
    return EventRecord(
        "message", text=text,
        attributions=[AttributionRecord("https://www.A.example/x", "A", "an excerpt", 0, 4,
                                        replay=Payload("anthropic", "citation", "v1", {"i": 1}))],
        payload=Payload("anthropic", "content_block", "v1", {"type": "text", "text": text}),
    )


SEARCH = ActivityBody("s1", "web_search", "completed", {"query": "q"}, "1 result",
                      ({"url": "https://b.example/", "title": "B"},), "")


def stored(conversation: Conversation) -> list[dict]:
    """Every turn as its native projection, without ids and timestamps."""
    out = []
    for turn in conversation.turns.order_by("index"):
        doc = turn_dict(turn, turn.events.order_by("seq"), "native")
        for key in ("id", "created_at", "completed_at"):
            doc.pop(key, None)
        for event in doc.get("events", []):
            event.pop("id", None)
        out.append(doc)
    # through JSON: payload values are orjson fragments, equal only as text
    return orjson.loads(orjson.dumps(out))


def live_turn_steps(conversation: Conversation) -> list[tuple[Turn, list]]:
    """What the live runner does to a conversation: open a prompt and its agent turn, stream
    events in, record the model, finish."""
    opened = store.open_turns(conversation, [
        store.user_turn("Why?"),
        store.NewTurn(Turn.Role.AGENT, (), status=Turn.Status.STREAMING),
    ])
    agent = opened[-1][0]
    store.append_events(agent, [message("Because.")])
    store.set_provenance(agent, "anthropic", "claude-test-1")
    store.append_events(agent, [EventRecord("hosted_activity", body=SEARCH), message("And so.")])
    store.finish_turn(agent, status="complete", end_reason="end_turn",
                      responses=[{"trigger": "initial", "model": "claude-test-1"}])
    return opened


def test_the_writers_columns_are_the_models_columns():
    """The INSERTs list every column of each model the store writes, and nothing else: a field
    added to a model without its place in store.COLUMNS (and in store_rows.Rows) fails here,
    not at run time."""
    written = {Conversation, Turn, Event, Attribution, ProviderPayload}
    assert set(store.COLUMNS) == written
    for model, columns in store.COLUMNS.items():
        pk = model._meta.pk
        allocated = store.ALLOCATED.get(model, ())
        expected = [f.attname for f in model._meta.concrete_fields
                    if not (f is pk and isinstance(f, models.AutoField))  # the database's
                    and f.attname not in allocated]
        assert not set(columns) & set(allocated), model
        assert len(columns) == len(set(columns)), model
        assert set(columns) == set(expected), (
            f"{model.__name__}: the store writes {sorted(columns)}, the model has "
            f"{sorted(expected)}")


def test_step_by_step_and_whole_turns_store_the_same_rows():
    steps = store.create_conversation(title="steps")
    live_turn_steps(steps)
    whole, _ = store.record_turns([
        store.user_turn("Why?"),
        store.NewTurn(Turn.Role.AGENT, [message("Because."),
                                        EventRecord("hosted_activity", body=SEARCH),
                                        message("And so.")],
                      end_reason="end_turn", provider="anthropic", model="claude-test-1",
                      responses=[{"trigger": "initial", "model": "claude-test-1"}],
                      finished=True),
    ], store.NewConversation(title="whole"))
    steps.refresh_from_db()
    assert stored(steps) == stored(whole)
    assert steps.next_seq == whole.next_seq == 5  # four events, numbered 1..4
    assert derived(steps) == derived(whole) == (
        [("", ""), ("", ""), ("s1", "web_search"), ("", "")], ["a.example", "a.example"])
    assert whole.turns.get(role="agent").completed_at


def derived(conversation: Conversation) -> tuple[list, list]:
    events = Event.objects.filter(conversation=conversation).order_by("seq")
    attributions = Attribution.objects.filter(event__conversation=conversation).order_by(
        "event__seq", "ordinal")
    return (list(events.values_list("activity_id", "activity_name")),
            list(attributions.values_list("domain", flat=True)))


def test_a_body_of_another_kind_is_refused():
    conversation = store.create_conversation()
    with pytest.raises(ValueError, match="message event with a hosted_activity body"):
        add_turn(conversation, "agent", EventRecord("message", body=SEARCH))
    assert not Turn.objects.filter(conversation=conversation).exists()  # all or nothing


def test_open_turns_returns_what_it_wrote_and_the_next_seq():
    conversation = store.create_conversation()
    add_user_turn(conversation, "before")
    conversation = Conversation.objects.get(pk=conversation.pk)
    opened = live_turn_steps(conversation)
    (user, user_events), (agent, agent_events) = opened
    assert [e.seq for e in user_events] == [2] and agent_events == []
    assert [e.text for e in user_events] == ["Why?"]
    assert (user.index, agent.index) == (1, 2)
    assert [e.seq for e in agent.events.order_by("seq")] == [3, 4, 5]


def test_opened_turns_leave_next_seq_current():
    conversation = store.create_conversation()
    add_user_turn(conversation, "one")
    conversation = Conversation.objects.get(pk=conversation.pk)
    store.open_turns(conversation, [
        store.user_turn("two"),
        store.NewTurn(Turn.Role.AGENT, (), status=Turn.Status.STREAMING),
    ])
    assert conversation.next_seq == 3  # what the live runner publishes seqs from


def test_appended_events_come_back_as_stored_with_their_typed_bodies():
    conversation = store.create_conversation()
    turn = add_turn(conversation, "agent", status=Turn.Status.STREAMING)
    written = store.append_events(turn, [EventRecord("hosted_activity", body=SEARCH),
                                         EventRecord("reasoning", "hm", body=ReasoningBody())])
    fresh = list(Event.objects.filter(turn=turn).order_by("seq"))
    assert [(e.pk, e.seq, e.body, e.activity_id) for e in written] == [
        (e.pk, e.seq, e.body, e.activity_id) for e in fresh]
    assert [e.typed_body for e in written] == [e.typed_body for e in fresh] == [
        SEARCH, ReasoningBody()]


def test_provenance_is_recorded_once():
    conversation = store.create_conversation()
    turn = add_turn(conversation, Turn.Role.AGENT, status=Turn.Status.STREAMING)
    store.set_provenance(turn, "openai", "gpt-test")
    store.set_provenance(turn, "openai", "gpt-test")  # the same again: nothing to do
    with pytest.raises(ProvenanceError):
        store.set_provenance(turn, "openai", "gpt-other")
    stale = Turn.objects.get(pk=turn.pk)
    stale.provider = stale.model = ""  # a copy read before the model was recorded
    with pytest.raises(ProvenanceError):
        store.set_provenance(stale, "google", "gemini-test")
    assert Turn.objects.values_list("provider", "model", "agent_id").get(pk=turn.pk) == (
        "openai", "gpt-test", "openai:gpt-test")


def test_finish_turn_checks_the_end_reason_and_keeps_responses_unless_given():
    conversation = store.create_conversation()
    turn = add_turn(conversation, Turn.Role.AGENT, status=Turn.Status.STREAMING)
    store.finish_turn(turn, status="complete", end_reason="end_turn",
                      responses=[{"trigger": "initial"}])
    fresh = Turn.objects.get(pk=turn.pk)
    assert (fresh.status, fresh.end_reason) == ("complete", "end_turn")
    assert fresh.responses_list == [{"trigger": "initial"}] and fresh.completed_at
    other = add_turn(conversation, Turn.Role.AGENT, status=Turn.Status.STREAMING)
    with pytest.raises(Exception, match="not_an_end_reason"):
        store.finish_turn(other, status="complete", end_reason="not_an_end_reason")
    assert Turn.objects.get(pk=other.pk).status == "streaming"
    store.finish_turn(other, status="interrupted", end_reason="interrupted")
    assert Turn.objects.get(pk=other.pk).responses_list == []


def test_a_finished_turn_refuses_a_second_finish():
    """The reaper finished it, then its runner (alive elsewhere) tries: the first finish
    stands (issue 11, item 5)."""
    conversation = store.create_conversation()
    turn = add_turn(conversation, Turn.Role.AGENT, status=Turn.Status.STREAMING)
    store.finish_turn(turn, status="interrupted", end_reason="interrupted")
    stamped = Turn.objects.get(pk=turn.pk).completed_at
    late = Turn.objects.get(pk=turn.pk)
    with pytest.raises(store.TurnFinished):
        store.finish_turn(late, status="complete", end_reason="end_turn",
                          responses=[{"trigger": "initial"}])
    fresh = Turn.objects.get(pk=turn.pk)
    assert (fresh.status, fresh.end_reason, fresh.completed_at) == (
        "interrupted", "interrupted", stamped)
    assert fresh.responses_list == [] and late.status == "interrupted"
    with pytest.raises(store.TurnFinished):
        store.finish_turn(add_turn(conversation, Turn.Role.AGENT), status="complete",
                          end_reason="end_turn")  # never streamed: nothing to finish


def test_given_ids_and_seqs_are_kept():
    ids = [uuid7(), uuid7()]
    conversation, [turn] = store.record_turns(
        [store.NewTurn("user", [message("a"), message("b")], event_ids=ids, seqs=[7, 3])],
        store.NewConversation())
    assert list(turn.events.order_by("seq").values_list("id", "seq")) == [
        (ids[1], 3), (ids[0], 7)]
    assert conversation.next_seq == 8
    with pytest.raises(ValueError, match="one entry per record"):
        store.record_turns([store.NewTurn("user", [message("c")], seqs=[1, 2])], conversation)


# -- every way in gets the same derived columns ------------------------------------------------


def rows(conversation: Conversation, leave_out: dict) -> dict[str, list[dict]]:
    """Every column of the conversation's turns, events and attributions, in order, but those
    named in ``leave_out`` (by model) and the ones that place a row (ids, its conversation and
    turn, its seq): what a copy of the conversation must hold the same."""
    placing = {"id", "conversation", "turn", "event", "seq"}
    out = {}
    for model, order in ((Turn, ("index",)), (Event, ("seq",)),
                         (Attribution, ("event__seq", "ordinal"))):
        names = [f.attname for f in model._meta.concrete_fields
                 if f.name not in placing | leave_out.get(model, set())]
        owner = "conversation" if model is not Attribution else "event__conversation"
        out[model.__name__] = list(model.objects.filter(**{owner: conversation})
                                   .order_by(*order).values(*names))
    return out


def test_a_fork_keeps_every_column_of_its_source_derived_ones_included():
    source = build_conversation()
    before = rows(source, {})
    assert {"web_search"} <= {e["activity_name"] for e in before["Event"]}
    assert {"meteo.example.fr", "news.example.com"} <= {a["domain"] for a in before["Attribution"]}
    copy = fork(source, 4)
    assert rows(copy, {}) == before  # payloads shared, times and provenance verbatim


def test_an_import_keeps_every_column_the_document_carries_derived_ones_included():
    source = build_conversation()
    doc = orjson.loads(export_json(source, "native"))
    copy = import_document(doc)
    # Not in the document: when a turn finished or an event was stored, and which payload row
    # holds a value (an import writes new ones, with the same values). An agent id is exported
    # as "agent" when the turn has none, and imported as the document says.
    leave_out = {Turn: {"completed_at", "agent_id"}, Event: {"created_at", "payload"},
                 Attribution: {"replay"}}
    assert rows(copy, leave_out) == rows(source, leave_out)
    assert list(copy.turns.order_by("index").values_list("agent_id", flat=True)) == [
        (t.get("agent") or {}).get("agentId", "") for t in doc["turns"]]


def test_attribution_integrity_is_written_exported_imported_and_forked():
    conversation = Conversation.objects.create(title="integrity")
    add_user_turn(conversation, "Why?")
    text = "Tides rise. Moons pull."
    marks = ["exact", "repaired", "dropped", "no_source", ""]
    add_turn(conversation, Turn.Role.AGENT, EventRecord("message", text=text, attributions=[
        AttributionRecord(f"https://{n}.example/" if mark != "no_source" else "", "", "",
                          *((None, None) if mark in ("dropped", "") else (0, 11)),
                          integrity=mark)
        for n, mark in enumerate(marks)
    ]), provider="anthropic", model="claude-test-1")
    assert list(Attribution.objects.filter(event__conversation=conversation)
                .order_by("ordinal").values_list("integrity", flat=True)) == marks
    doc = orjson.loads(export_json(conversation, "portable"))
    exported = [a.get("integrity") for a in doc["turns"][1]["events"][0]["attributions"]]
    assert exported == ["exact", "repaired", "dropped", "no_source", None]  # "" is left out
    ledger = doc["turns"][1]["ledger"]["integrity"]
    assert (ledger["exact"], ledger["repaired"], ledger["dropped"], ledger["no_source"],
            ledger["unchecked"]) == (1, 1, 1, 1, 1)
    for copy in (import_document(doc), fork(conversation, 1)):
        assert list(Attribution.objects.filter(event__conversation=copy).order_by("ordinal")
                    .values_list("integrity", flat=True)) == marks


def test_an_unknown_integrity_is_refused():
    conversation = Conversation.objects.create(title="bad")
    with pytest.raises(ValueError, match="integrity"):
        add_turn(conversation, Turn.Role.AGENT, EventRecord("message", text="x", attributions=[
            AttributionRecord("https://a.example/", integrity="guessed")]))


def test_a_fork_finds_the_payload_it_shares_by_its_digest_index():
    """``record_fork`` references the payload row its shared turn already has, found through
    the digest's index (given every column, SQLite read every payload past its value)."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from tests.support import sqlite_plan

    payload = Payload("openai", "chat-export", "1", {"conversation": "x" * 2000})
    turn = store.NewTurn("user", [EventRecord("message", text="hi", payload=payload)])
    source = store.record_turns([turn], store.NewConversation(title="source"))[0]
    with CaptureQueriesContext(connection) as queries:
        forked = store.record_fork(source, 0, [turn], store.NewConversation(title="fork"))
    assert ProviderPayload.objects.count() == 1
    assert Event.objects.get(conversation=forked).payload_id == \
        Event.objects.get(conversation=source).payload_id
    if connection.vendor == "sqlite":
        [lookup] = [q["sql"] for q in queries.captured_queries
                    if q["sql"].startswith("SELECT") and "providerpayload" in q["sql"]]
        assert "sha256" in sqlite_plan(connection, lookup)
