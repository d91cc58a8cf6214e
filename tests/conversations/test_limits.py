"""Cheap requests must not cost a lot (issue 11, item 8): the parse holds one event at a time,
and a turn past ``TURNSCOPE_MAX_EVENTS_PER_TURN`` / ``TURNSCOPE_MAX_CITATIONS_PER_TURN`` is
refused with a clear error (a 413, a command error) and nothing written, or, streaming live,
cut there."""

from __future__ import annotations

import tracemalloc

import orjson
import pytest
from asgiref.sync import async_to_sync
from django.core.management import CommandError, call_command
from django.test import override_settings

from conversations import store
from conversations.ingest import ResponseFile, assemble, ingest
from conversations.limits import max_continuations, may_continue
from conversations.models import Conversation, Event
from conversations.projections import export_json, import_document
from live import runner, sources
from streams.errors import TurnTooLarge

pytestmark = pytest.mark.django_db


def _sse(events: list[dict]) -> bytes:
    return b"".join(b"data: " + orjson.dumps(e) + b"\n\n" for e in events)


HEAD = [
    {"type": "message_start", "message": {"id": "m", "type": "message", "role": "assistant",
                                          "model": "claude-x", "content": [], "usage": {}}},
]
TAIL = [{"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {}},
        {"type": "message_stop"}]


def blocks(n: int, citations_each: int = 0) -> list[dict]:
    out = []
    for i in range(n):
        out.append({"type": "content_block_start", "index": i,
                    "content_block": {"type": "text", "text": ""}})
        for c in range(citations_each):
            out.append({"type": "content_block_delta", "index": i, "delta": {
                "type": "citations_delta", "citation": {
                    "type": "web_search_result_location", "url": f"https://s.example/{i}/{c}",
                    "title": "S", "cited_text": "x", "encrypted_index": "e"}}})
        out.append({"type": "content_block_delta", "index": i,
                    "delta": {"type": "text_delta", "text": f"block {i}"}})
        out.append({"type": "content_block_stop", "index": i})
    return out


def pings(n: int) -> bytes:
    return (_sse([*HEAD, *blocks(1)]) + b'data: {"type":"ping"}\n\n' * n + _sse(TAIL))


def peak_bytes(raw: bytes) -> int:
    tracemalloc.start()
    try:
        _builder, records = assemble("anthropic", [ResponseFile("pings", raw)])
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
        assert len(records) == 1


def test_the_parse_holds_one_event_at_a_time():
    """Memory per response is bounded: five times the pings, not five times the memory (the
    parse used to read every event into a row first: 700,000 pings took 450 MB)."""
    small, large = pings(20_000), pings(100_000)
    assert len(large) > 2_000_000
    small_peak, large_peak = peak_bytes(small), peak_bytes(large)
    assert large_peak < 8 * 1024 * 1024, large_peak
    assert large_peak < 1.5 * small_peak + 1024 * 1024, (small_peak, large_peak)


@pytest.fixture
def alice(django_user_model):
    return django_user_model.objects.create_user("alice")


@pytest.fixture
def alice_api(alice):
    from tests.api.conftest import token_client

    return token_client(alice)


@pytest.fixture
def limits(settings):
    settings.TURNSCOPE_MAX_EVENTS_PER_TURN = 40
    settings.TURNSCOPE_MAX_CITATIONS_PER_TURN = 30
    return settings


@pytest.mark.parametrize("raw, what", [
    (_sse([*HEAD, *blocks(41), *TAIL]), "more than 40 events"),
    (_sse([*HEAD, *blocks(4, citations_each=8), *TAIL]), "more than 30 citations"),
])
def test_a_turn_past_its_limits_is_refused_with_nothing_written(limits, raw, what,
                                                                django_user_model, tmp_path):
    owner = django_user_model.objects.create_user("limited")
    with pytest.raises(TurnTooLarge, match=what):
        ingest("anthropic", [ResponseFile("big", raw)], owner=owner)
    path = tmp_path / "big.sse"
    path.write_bytes(raw)
    with pytest.raises(CommandError, match=what):
        call_command("ingest", "--provider", "anthropic", "--owner", "limited", str(path))
    assert not Conversation.objects.exists() and not Event.objects.exists()
    # at the limit: stored
    ok = _sse([*HEAD, *blocks(40), *TAIL]) if "events" in what else _sse(
        [*HEAD, *blocks(3, citations_each=10), *TAIL])
    assert ingest("anthropic", [ResponseFile("ok", ok)], owner=owner).status == "complete"


def test_the_api_refuses_a_turn_past_its_limits_with_a_413(limits, alice_api):
    response = alice_api.generic("POST", "/api/v1/conversations/ingest?provider=anthropic",
                                 _sse([*HEAD, *blocks(41), *TAIL]),
                                 content_type="text/event-stream")
    assert response.status_code == 413, response.content
    assert "more than 40 events" in response.json()["detail"]
    assert not Conversation.objects.exists()


def test_an_import_document_past_its_limits_is_refused(limits, alice):
    source = ingest("anthropic", [ResponseFile("ok", _sse([*HEAD, *blocks(40), *TAIL]))],
                    owner=alice).conversation
    doc = orjson.loads(export_json(source))
    doc["conversation"]["id"] = "00000000-0000-4000-8000-0000000000aa"
    doc["turns"][0]["events"].append({**doc["turns"][0]["events"][-1], "seq": 999,
                                      "id": "00000000-0000-4000-8000-0000000000ab"})
    with pytest.raises(TurnTooLarge, match="more than 40 events"):
        import_document(doc, owner=alice)
    assert Conversation.objects.count() == 1


@pytest.mark.django_db(transaction=True)
def test_a_live_turn_past_its_limits_is_cut_there(limits, alice):
    conversation = store.create_conversation(owner=alice)
    raw = _sse([*HEAD, *blocks(60), *TAIL]).decode()
    turn = async_to_sync(runner.run_recording)(
        conversation, "anthropic", [sources.WireResponse("big", raw)], speed=0)
    assert (turn.status, turn.end_reason) == ("interrupted", "interrupted")
    assert 0 < turn.events.count() <= 41


def test_the_loop_guard_reads_the_setting():
    """``may_continue`` is the live call's one guard (tests/live/test_calls.py drives it)."""
    assert may_continue(0)  # the default allows continuing a paused turn
    with override_settings(TURNSCOPE_MAX_CONTINUATIONS=2):
        assert may_continue(1) and not may_continue(2)
    with override_settings(TURNSCOPE_MAX_CONTINUATIONS=0):
        assert not may_continue(0)
    with override_settings(TURNSCOPE_MAX_CONTINUATIONS=-3):  # read as 0, never as "no limit"
        assert max_continuations() == 0 and not may_continue(0)
