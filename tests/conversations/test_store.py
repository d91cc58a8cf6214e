"""conversations.store: the prepared-statement writers and their ORM fallback (taken when the
models no longer match the columns the statements write) store the same rows."""

from __future__ import annotations

import orjson
import pytest

from conversations import store
from conversations.models import Conversation, Turn
from conversations.projections import turn_dict
from conversations.provenance import ProvenanceError
from streams.builder import AttributionRecord, EventRecord
from streams.parts import Payload

pytestmark = pytest.mark.django_db


@pytest.fixture(params=["statements", "orm"])
def writer(request, monkeypatch):
    if request.param == "orm":
        monkeypatch.setattr(store._Tables, "of", classmethod(lambda cls, connection: None))
    return request.param


def message(text: str) -> EventRecord:
    return EventRecord(
        "message", text=text, body={"note": "kept"},
        attributions=[AttributionRecord("https://a.example/x", "A", "an excerpt", 0, 4,
                                        replay=Payload("anthropic", "citation", "v1", {"i": 1}))],
        payload=Payload("anthropic", "content_block", "v1", {"type": "text", "text": text}),
    )


def stored(conversation: Conversation) -> list[dict]:
    """Every turn as its native projection, without ids and timestamps."""
    out = []
    for turn in conversation.turns.order_by("index"):
        doc = turn_dict(turn, turn.events.order_by("seq"), "native")
        for key in ("id", "created_at", "completed_at"):
            doc.pop(key, None)
        for event in doc.get("events", []):
            event.pop("id", None)
            event.pop("created_at", None)
        out.append(doc)
    return out


def live_turn_steps(conversation: Conversation) -> list[tuple[Turn, list]]:
    """What the live runner does to a conversation: open a prompt and its agent turn, stream
    events in, record the model, finish."""
    opened = store.open_turns(conversation, [
        store.NewTurn(Turn.Role.USER, [EventRecord("message", text="Why?")]),
        store.NewTurn(Turn.Role.AGENT, (), status=Turn.Status.STREAMING),
    ])
    agent = opened[-1][0]
    store.append_events(agent, [message("Because.")])
    store.set_provenance(agent, "anthropic", "claude-test-1")
    store.append_events(agent, [EventRecord("hosted_activity", body={"activity": {
        "id": "s1", "name": "web_search", "state": "completed"}}, activity_id="s1"),
        message("And so.")])
    store.finish_turn(agent, status="complete", end_reason="end_turn",
                      responses=[{"trigger": "initial", "model": "claude-test-1"}])
    return opened


def test_both_writers_store_the_same_rows(monkeypatch):
    results = {}
    for name in ("statements", "orm"):
        with monkeypatch.context() as m:
            if name == "orm":
                m.setattr(store._Tables, "of", classmethod(lambda cls, connection: None))
            conversation = store.create_conversation(title=name)
            live_turn_steps(conversation)
            store.record_turns([store.NewTurn(Turn.Role.USER, [message("whole")],
                                              finished=True)], conversation=conversation)
            conversation.refresh_from_db()
            # through JSON: payload values are orjson fragments, equal only as text
            results[name] = (orjson.loads(orjson.dumps(stored(conversation))),
                             conversation.next_seq)
    assert results["statements"] == results["orm"]
    assert results["orm"][1] == 6  # five events, numbered 1..5


def test_open_turns_returns_what_it_wrote_and_the_next_seq(writer):
    conversation = store.create_conversation()
    store.append_user_turn(conversation, "before")
    conversation = Conversation.objects.get(pk=conversation.pk)
    opened = live_turn_steps(conversation)
    (user, user_events), (agent, agent_events) = opened
    assert [e.seq for e in user_events] == [2] and agent_events == []
    assert [e.text for e in user_events] == ["Why?"]
    assert (user.index, agent.index) == (1, 2)
    assert [e.seq for e in agent.events.order_by("seq")] == [3, 4, 5]


def test_opened_turns_leave_next_seq_current(writer):
    conversation = store.create_conversation()
    store.append_user_turn(conversation, "one")
    conversation = Conversation.objects.get(pk=conversation.pk)
    store.open_turns(conversation, [
        store.NewTurn(Turn.Role.USER, [EventRecord("message", text="two")]),
        store.NewTurn(Turn.Role.AGENT, (), status=Turn.Status.STREAMING),
    ])
    assert conversation.next_seq == 3  # what the live runner publishes seqs from


def test_provenance_is_recorded_once(writer):
    conversation = store.create_conversation()
    turn = store.start_turn(conversation, Turn.Role.AGENT, status=Turn.Status.STREAMING)
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


def test_finish_turn_checks_the_end_reason_and_keeps_responses_unless_given(writer):
    conversation = store.create_conversation()
    turn = store.start_turn(conversation, Turn.Role.AGENT, status=Turn.Status.STREAMING)
    store.finish_turn(turn, status="complete", end_reason="end_turn",
                      responses=[{"trigger": "initial"}])
    store.finish_turn(turn, status="interrupted", end_reason="interrupted")
    fresh = Turn.objects.get(pk=turn.pk)
    assert (fresh.status, fresh.end_reason) == ("interrupted", "interrupted")
    assert fresh.responses_list == [{"trigger": "initial"}] and fresh.completed_at
    with pytest.raises(Exception, match="not_an_end_reason"):
        store.finish_turn(turn, status="complete", end_reason="not_an_end_reason")
    assert Turn.objects.get(pk=turn.pk).end_reason == "interrupted"
