"""Fork: a new conversation holding turns up to at_turn; new rows, new ids, new contiguous seqs;
payloads shared by reference; agent.model copied verbatim, never re-resolved."""

from __future__ import annotations

import pytest

from conversations import store
from conversations.forking import ForkError, fork
from conversations.models import Attribution, Conversation, Event, ProviderPayload, Turn
from conversations.projections import conversation_dict
from tests.api.conftest import build_conversation
from tests.support import add_turn, add_user_turn

pytestmark = pytest.mark.django_db


def strip_ids(doc: dict) -> list:
    """The portable turns with ids and seqs removed: what a fork must keep identical."""
    out = []
    for turn in doc["turns"]:
        turn = {k: v for k, v in turn.items() if k != "id"}
        turn["events"] = [{k: v for k, v in e.items() if k not in {"id", "seq"}}
                          for e in turn["events"]]
        out.append(turn)
    return out


def test_fork_copies_turns_up_to_at_turn_with_new_rows_and_shared_payloads(alice, bob):
    source = build_conversation(owner=alice)
    payloads_before = ProviderPayload.objects.count()
    forked = fork(source, 1, owner=bob)

    assert forked.pk != source.pk and forked.owner == bob
    assert forked.forked_from_id == source.pk and forked.forked_at_turn == 1
    assert forked.title == source.title
    assert list(forked.turns.order_by("index").values_list("index", "role")) == [
        (0, "user"), (1, "agent")]
    # new rows: no id in common
    source_turns = set(source.turns.values_list("id", flat=True))
    assert not source_turns & set(forked.turns.values_list("id", flat=True))
    source_events = list(Event.objects.filter(conversation=source, turn__index__lte=1)
                         .order_by("seq"))
    forked_events = list(Event.objects.filter(conversation=forked).order_by("seq"))
    assert not {e.id for e in source_events} & {e.id for e in forked_events}
    # new, contiguous seqs in the source's order; next_seq continues after them
    assert [e.seq for e in forked_events] == list(range(1, len(source_events) + 1))
    assert [e.kind for e in forked_events] == [e.kind for e in source_events]
    assert forked.next_seq == len(forked_events) + 1
    # payloads shared by reference, never copied
    assert [e.payload_id for e in forked_events] == [e.payload_id for e in source_events]
    assert ProviderPayload.objects.count() == payloads_before
    source_replays = list(Attribution.objects.filter(event__conversation=source)
                          .order_by("event__seq", "ordinal").values_list("replay_id", "url"))
    forked_replays = list(Attribution.objects.filter(event__conversation=forked)
                          .order_by("event__seq", "ordinal").values_list("replay_id", "url"))
    assert forked_replays == source_replays
    # the portable content is the same, ids and seqs aside
    assert strip_ids(conversation_dict(forked)) == strip_ids(conversation_dict(source))[:2]


def test_fork_copies_agent_model_verbatim_and_never_resolves_it(alice, monkeypatch):
    import providers

    conversation = store.create_conversation(owner=alice)
    retired = add_turn(conversation, "agent", provider="acme-retired", status="streaming",
                               model="acme/legacy-1@2019+beta")
    store.finish_turn(retired, status="complete", end_reason="end_turn")

    def refuse(*args, **kwargs):
        raise AssertionError("a fork must not ask any adapter about the model")

    monkeypatch.setattr(providers, "adapter", refuse)
    monkeypatch.setattr(providers, "parse", refuse)
    forked = fork(conversation, 0)
    copy = forked.turns.get()
    assert (copy.provider, copy.model, copy.agent_id) == (
        "acme-retired", "acme/legacy-1@2019+beta", retired.agent_id)
    assert conversation_dict(forked)["turns"][0]["agent"] == {
        "agentId": retired.agent_id,
        "model": {"provider": "acme-retired", "model": "acme/legacy-1@2019+beta"}}


def test_fork_of_a_fork_and_of_the_last_turn(alice):
    source = build_conversation(owner=alice)
    whole = fork(source, 4)
    assert whole.turns.count() == 5
    again = fork(whole, 0)
    assert again.forked_from_id == whole.pk
    assert strip_ids(conversation_dict(again)) == strip_ids(conversation_dict(source))[:1]


@pytest.mark.parametrize("at_turn", [-1, 5, 99, "1", True, None])
def test_fork_point_must_exist(alice, at_turn):
    source = build_conversation(owner=alice)
    before = Conversation.objects.count()
    with pytest.raises(ForkError):
        fork(source, at_turn)
    assert Conversation.objects.count() == before


def test_no_fork_across_a_streaming_turn(alice):
    conversation = store.create_conversation(owner=alice)
    add_user_turn(conversation, "hi")
    add_turn(conversation, "agent", status=Turn.Status.STREAMING)
    with pytest.raises(ForkError, match="streaming"):
        fork(conversation, 1)
    assert fork(conversation, 0).turns.count() == 1


# -- through the API ---------------------------------------------------------------------------


def test_fork_endpoint(alice, alice_api):
    source = build_conversation(owner=alice)
    response = alice_api.post(f"/api/v1/conversations/{source.pk}/fork",
                              {"at_turn": 2, "title": "what if"}, format="json")
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["forked_from"] == str(source.pk) and body["forked_at_turn"] == 2
    assert body["turns"] == 3 and body["title"] == "what if" and body["owner"] == "alice"
    assert response["Location"] == f"/api/v1/conversations/{body['id']}"


def test_staff_may_fork_anyones_conversation_into_their_own(alice, staff, staff_api):
    source = build_conversation(owner=alice)
    response = staff_api.post(f"/api/v1/conversations/{source.pk}/fork", {"at_turn": 1},
                              format="json")
    assert response.status_code == 201
    assert Conversation.objects.get(pk=response.json()["id"]).owner == staff


@pytest.mark.parametrize("body", [{}, {"at_turn": -1}, {"at_turn": "x"}, {"at_turn": 7}, [1]])
def test_fork_endpoint_rejects_bad_requests(alice, alice_api, body):
    source = build_conversation(owner=alice)
    before = Conversation.objects.count()
    response = alice_api.post(f"/api/v1/conversations/{source.pk}/fork", body, format="json")
    assert response.status_code == 400
    assert response.json()["detail"]
    assert Conversation.objects.count() == before
