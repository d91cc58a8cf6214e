import pytest
from django.db.models.deletion import ProtectedError

from conversations import store
from conversations.models import (
    AppendOnlyError,
    Attribution,
    Conversation,
    Event,
    ProviderPayload,
    Turn,
)
from conversations.provenance import ProvenanceError
from streams.bodies import ReasoningBody
from streams.builder import AttributionRecord, EventRecord
from streams.parts import Payload
from tests.support import add_turn, add_user_turn

pytestmark = pytest.mark.django_db


@pytest.fixture
def turn():
    conversation = store.create_conversation(title="t")
    turn = add_turn(conversation, "agent", provider="anthropic", model="claude-x")
    store.append_events(turn, [
        EventRecord("message", text="hello", payload=Payload("anthropic", "f", "v", {"a": 1}),
                    attributions=[AttributionRecord("https://a.example/", "A", start=0, end=5,
                                                    replay=Payload("anthropic", "c", "v", {}))]),
        EventRecord("reasoning", text="hmm", body=ReasoningBody()),
    ])
    return turn


def test_seqs_are_per_conversation_and_monotonic(turn):
    other = add_turn(turn.conversation, "agent", provider="openai", model="gpt-x")
    store.append_events(other, [EventRecord("message", text="again")])
    seqs = list(Event.objects.filter(conversation=turn.conversation).values_list("seq", flat=True))
    assert seqs == [1, 2, 3]
    fresh = store.create_conversation()
    t = add_turn(fresh, "user")
    [event] = store.append_events(t, [EventRecord("message", text="x")])
    assert event.seq == 1


@pytest.mark.parametrize("model", [Event, Attribution, ProviderPayload])
def test_append_only_rows_refuse_update_and_delete(turn, model):
    row = model.objects.first()
    with pytest.raises(AppendOnlyError):
        row.save()
    with pytest.raises(AppendOnlyError):
        row.delete()
    with pytest.raises(AppendOnlyError):
        model.objects.all().update(pk=row.pk)
    with pytest.raises(AppendOnlyError):
        model.objects.all().delete()
    assert model.objects.filter(pk=row.pk).exists()


def test_events_protect_their_turn_and_conversation(turn):
    with pytest.raises(ProtectedError):
        Conversation.objects.filter(pk=turn.conversation_id).delete()
    with pytest.raises(ProtectedError):
        Turn.objects.filter(pk=turn.pk).delete()


def test_provenance_rules():
    conversation = store.create_conversation()
    with pytest.raises(ProvenanceError, match="only recorded on agent"):
        add_turn(conversation, "user", provider="openai", model="gpt-5")
    with pytest.raises(ProvenanceError, match="both"):
        add_turn(conversation, "agent", provider="openai", model="")
    with pytest.raises(ProvenanceError, match="credential"):
        add_turn(conversation, "agent", provider="openai",
                         model="sk-proj-abcdefghijklmnopqrstuvwxyz012345")
    with pytest.raises(ProvenanceError, match="credential"):
        add_turn(conversation, "agent", provider="google",
                         model="AIzaSyA1234567890abcdefghijklmnopqrstu")
    ok = add_turn(conversation, "agent", provider="openrouter",
                          model="deepseek/deepseek-chat-v3.1")
    assert ok.model_provenance == {"provider": "openrouter", "model": "deepseek/deepseek-chat-v3.1"}


def test_provenance_is_recorded_once(turn):
    store.set_provenance(turn, "anthropic", "claude-x")  # same value: fine
    with pytest.raises(ProvenanceError):
        store.set_provenance(turn, "anthropic", "claude-y")
    turn.model = "claude-y"
    with pytest.raises(ProvenanceError):
        turn.save()


def test_payload_digest_and_size(turn):
    payload = ProviderPayload.objects.get(format="f")
    assert payload.value == '{"a":1}' and payload.size == 7 and len(payload.sha256) == 64


def test_default_agent_id_fits_its_column():
    conversation = store.create_conversation()
    turn = add_turn(conversation, "agent", provider="openrouter",
                            model="-".join(["model"] * 30))
    assert turn.agent_id.startswith("openrouter:") and len(turn.agent_id) == 128
    turn.refresh_from_db()
    assert len(turn.agent_id) == 128


def test_nul_characters_are_stored_as_replacement_characters():
    """PostgreSQL text cannot hold NUL; one code point for one keeps ranges valid."""
    from streams import parts
    from streams.builder import EventBuilder

    builder = EventBuilder()
    builder.begin_response("initial")
    builder.feed(parts.ResponseStart("anthropic", "claude-x"))
    builder.feed(parts.BlockStart("0", "message"))
    builder.feed(parts.TextDelta("0", "a\x00b cited"))
    builder.feed(parts.Citation("0", "https://x.example/\x00", "t\x00", "e\x00", start=4, end=9))
    [record] = builder.feed(parts.BlockEnd("0"))
    assert record.text == "a\ufffdb cited"
    [a] = record.attributions
    assert record.text[a.start:a.end] == "cited" and "\x00" not in a.url + a.title + a.excerpt
    conversation = store.create_conversation(title="x\x00y")
    turn = add_turn(conversation, "agent", provider="anthropic", model="claude-x")
    store.append_events(turn, [record])
    add_user_turn(conversation, "q\x00")
    assert Event.objects.filter(text__contains="\ufffd").count() == 2
