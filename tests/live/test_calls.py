"""Live calls: a turn sent by Turnscope to a (recorded, over HTTP) provider streams in through the
live path; pause_turn is continued, the loop guard stops, Stop interrupts, provider errors fail
the turn with the provider's code and message."""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import replace

import orjson
import pytest
from asgiref.sync import async_to_sync, sync_to_async

import providers
from conversations import store, streaming
from conversations.models import Conversation, Event, Turn
from live import bundled, calls
from streams import parts
from tests.servers import served
from upstream.recorded import RecordedUpstream, Reply, error_reply, reply

pytestmark = pytest.mark.django_db(transaction=True)

ANTHROPIC_KEY = "sk-ant-api03-PLANTEDliveCALLkey0123456789abcdefghij"
OPENAI_KEY = "sk-proj-PLANTEDliveCALLopenai0123456789abcdefghijk"


def sample_raw(slug: str, n: int = 0) -> bytes:
    return bundled.sample(slug).responses[n].raw.encode()


TIDES = sample_raw("anthropic-tides")
PAUSED = sample_raw("anthropic-pause-turn", 0)
CONTINUED = sample_raw("anthropic-pause-turn", 1)
SOURDOUGH = sample_raw("openai-sourdough")


@pytest.fixture
def upstream(settings, monkeypatch):
    app = RecordedUpstream(verify_replay=True)
    with served(app) as server:
        settings.TURNSCOPE_UPSTREAM = {p: server.url for p in ("anthropic", "openai", "google")}
        settings.TURNSCOPE_RECORDED_UPSTREAM = ""
        monkeypatch.setenv("ANTHROPIC_API_KEY", ANTHROPIC_KEY)
        monkeypatch.setenv("OPENAI_API_KEY", OPENAI_KEY)
        monkeypatch.delenv("GEMINI_API_KEY", raising=False)
        yield app


def run(conversation, ask, *, during=None, timeout=30.0):
    """Start a live turn and wait for it; ``during(live)`` runs while it streams."""

    async def go():
        live = await calls.start_turn(conversation, ask)
        if during is not None:
            await during(live)
        await calls.wait(live.turn, timeout=timeout)
        assert str(live.turn.pk) not in calls.running(), "the live turn did not end in time"
        return live

    live = async_to_sync(go)()
    live.turn.refresh_from_db()
    return live


def events(turn: Turn) -> list[Event]:
    return list(turn.events.order_by("seq"))


def errors_of(turn: Turn) -> list[dict]:
    return [e.typed_body.to_body()["error"] for e in events(turn) if e.kind == "error"]


ASK = calls.Ask("anthropic", "claude-sonnet-4-5", "Why are there two high tides a day?", True)


def test_a_live_turn_streams_the_answer_with_its_search_and_citations(upstream, owner):
    upstream.add(reply("anthropic", TIDES))
    conversation = store.create_conversation(owner=owner, title="Tides")
    live = run(conversation, ASK)
    turn = live.turn
    assert (turn.status, turn.end_reason) == ("complete", "end_turn")
    assert turn.model_provenance == {"provider": "anthropic",
                                     "model": "claude-sonnet-4-5-20250929"}
    user = conversation.turns.get(index=0)
    assert user.role == "user" and user.events.get().text == ASK.prompt
    kinds = [e.kind for e in events(turn)]
    assert "hosted_activity" in kinds and "message" in kinds
    assert Event.objects.filter(turn=turn, attributions__isnull=False).exists()
    # what was sent: the prompt, web search, the key from the environment (in a header only)
    [sent] = upstream.requests
    assert sent.path == "/v1/messages" and sent.header("x-api-key") == ANTHROPIC_KEY
    assert sent.json["messages"][-1]["role"] == "user"
    assert ASK.prompt in orjson.dumps(sent.json["messages"][-1]).decode()
    assert any("web_search" in t.get("type", "") for t in sent.json.get("tools", []))
    assert streaming.current_tail(turn.pk) is None


def test_the_next_turn_sends_the_earlier_ones_back(upstream, owner):
    upstream.add(reply("anthropic", TIDES), reply("anthropic", TIDES))
    conversation = store.create_conversation(owner=owner)
    run(conversation, ASK)
    run(conversation, calls.Ask("anthropic", "claude-sonnet-4-5", "And neap tides?", True))
    assert conversation.turns.count() == 4
    roles = [m["role"] for m in upstream.requests[1].json["messages"]]
    assert roles == ["user", "assistant", "user"]


def test_pause_turn_is_continued_into_the_same_agent_turn(upstream, owner):
    upstream.add(reply("anthropic", PAUSED), reply("anthropic", CONTINUED))
    conversation = store.create_conversation(owner=owner)
    turn = run(conversation, ASK).turn
    assert (turn.status, turn.end_reason) == ("complete", "end_turn")
    assert conversation.turns.count() == 2  # one user turn, one agent turn
    assert [r["trigger"] for r in turn.responses_list] == ["initial", "pause_turn"]
    # the paused message went back as the last assistant message
    assert len(upstream.requests) == 2
    continued = upstream.requests[1].json["messages"]
    assert continued[-1]["role"] == "assistant"
    assert any(b.get("type") == "server_tool_use" for b in continued[-1]["content"])
    # the search left open by the pause is closed by the continuation
    activities = {}
    for e in events(turn):
        if e.kind == "hosted_activity":
            activities[e.typed_body.id] = e.typed_body.state
    assert activities and set(activities.values()) == {"completed"}


def test_the_loop_guard_stops_and_says_so(upstream, owner, settings):
    settings.TURNSCOPE_MAX_CONTINUATIONS = 1
    upstream.add(reply("anthropic", PAUSED), reply("anthropic", PAUSED),
                 reply("anthropic", CONTINUED))
    turn = run(store.create_conversation(owner=owner), ASK).turn
    assert len(upstream.requests) == 2  # the first response and one continuation, no more
    assert turn.status == "failed"
    [error] = errors_of(turn)
    assert error["code"] == "continuation_limit"
    assert "1 continuation" in error["message"]
    assert "TURNSCOPE_MAX_CONTINUATIONS" in error["message"]


def held(raw: bytes, texts: int = 3) -> Reply:
    """``raw`` served until its ``texts``-th text delta, then held until the client hangs up:
    a Stop always lands mid-answer, however loaded the machine."""
    answer = reply("anthropic", raw)
    seen = [n for n, chunk in enumerate(answer.chunks, 1) if b'"text_delta"' in chunk]
    return replace(answer, hold_after=seen[texts - 1])


def eventually(condition, timeout: float = 10.0) -> None:
    """Wait for ``condition`` (the recorded upstream runs in its own thread)."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "the condition never held"
        time.sleep(0.01)


async def stop_when_text_streams(live):
    """Stop the turn once some of its text has streamed (the condition, not a time)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 30
    while not ((tail := streaming.current_tail(live.turn.pk)) and tail.get("text")):
        assert loop.time() < deadline, "no text streamed"
        await asyncio.sleep(0.02)
    stopped = await calls.stop(live.conversation)
    assert stopped is not None and stopped.pk == live.turn.pk


@pytest.mark.parametrize("answers", [[TIDES], [PAUSED, CONTINUED]], ids=["one", "paused"])
def test_stop_mid_stream_interrupts_the_turn_with_what_streamed(upstream, owner, answers):
    upstream.add(held(answers[0]), *(reply("anthropic", a) for a in answers[1:]))
    turn = run(store.create_conversation(owner=owner), ASK, during=stop_when_text_streams).turn
    assert (turn.status, turn.end_reason) == ("interrupted", "interrupted")
    messages = [e for e in events(turn) if e.kind == "message"]
    assert messages and messages[-1].incomplete and messages[-1].text
    full = "".join(p.text for a in answers for p in providers.parse("anthropic", a)
                   if isinstance(p, parts.TextDelta))
    assert len("".join(m.text for m in messages)) < len(full)
    assert upstream.requests[0].disconnected  # the provider request was closed
    eventually(lambda: upstream.served[0].cut)  # the provider saw the client go


@pytest.mark.parametrize("provider, model, raw", [
    ("anthropic", "claude-sonnet-4-5", TIDES),
    ("openai", "gpt-5-mini", SOURDOUGH),
], ids=["anthropic", "openai"])
def test_after_stop_the_next_turn_goes_through(upstream, owner, provider, model, raw):
    """The stopped answer goes back in the form its provider accepts after a cut, so the
    conversation goes on (the recorded provider refused it whole-or-nothing before)."""
    answer = reply(provider, raw)
    texts = [n for n, chunk in enumerate(answer.chunks, 1)
             if b'"text_delta"' in chunk or b'output_text.delta' in chunk]
    upstream.add(replace(answer, hold_after=texts[2]), reply(provider, raw))
    conversation = store.create_conversation(owner=owner)
    ask = calls.Ask(provider, model, "First question?", True)
    stopped = run(conversation, ask, during=stop_when_text_streams).turn
    assert stopped.status == "interrupted"
    eventually(lambda: upstream.served[0].cut)  # the provider saw the client go
    after = run(conversation, calls.Ask(provider, model, "And then?", True)).turn
    assert (after.status, after.end_reason) != ("failed", "error"), errors_of(after)
    assert after.status == "complete"
    assert len(upstream.requests) == 2


def test_stop_from_another_process_goes_through_the_cache_flag(upstream, owner):
    upstream.add(reply("anthropic", TIDES, pace=0.05))

    async def flag(live):
        await asyncio.sleep(0.3)
        calls._tasks.pop(str(live.turn.pk))  # as if the task ran elsewhere
        await calls.stop(live.conversation)
        calls._tasks[str(live.turn.pk)] = next(
            t for t in asyncio.all_tasks() if t.get_name() == f"call-{live.turn.pk}")

    turn = run(store.create_conversation(owner=owner), ASK, during=flag).turn
    assert (turn.status, turn.end_reason) == ("interrupted", "interrupted")


IN_STREAM_ERROR = (
    b'event: message_start\ndata: {"type":"message_start","message":{"id":"msg_1","type":'
    b'"message","role":"assistant","model":"claude-sonnet-4-5-20250929","content":[],'
    b'"stop_reason":null,"usage":{"input_tokens":5,"output_tokens":1}}}\n\n'
    b'event: error\ndata: {"type":"error","error":{"type":"overloaded_error","message":'
    b'"Overloaded"}}\n\n'
)


@pytest.mark.parametrize("answer, code, message", [
    (error_reply("anthropic", 401, "x", "invalid x-api-key"), "authentication_error",
     "invalid x-api-key"),
    (error_reply("anthropic", 429, "x", "Number of request tokens has exceeded your rate limit"),
     "rate_limit_error", "rate limit"),
    (error_reply("anthropic", 529, "x", "Overloaded"), "overloaded_error", "Overloaded"),
    (Reply(chunks=(b"upstream connect error",), status=503, content_type="text/plain"),
     "http_503", "upstream connect error"),
    (reply("anthropic", IN_STREAM_ERROR), "overloaded_error", "Overloaded"),
], ids=["401", "429", "529", "503-not-json", "in-stream"])
def test_a_provider_error_fails_the_turn_with_its_code_and_message(
    upstream, owner, client, answer, code, message
):
    upstream.add(answer)
    live = run(store.create_conversation(owner=owner), ASK)
    turn = live.turn
    assert (turn.status, turn.end_reason) == ("failed", "error")
    [error] = errors_of(turn)
    assert error["code"] == code and message in error["message"]
    # the page shows both
    client.force_login(owner)
    html = client.get(f"/c/{live.conversation.pk}/").content.decode()
    assert code in html and message in html
    # and who was asked: no response named the served model, the request did
    turn.refresh_from_db()
    assert turn.asked == "anthropic · claude-sonnet-4-5"
    if not turn.provider:  # else the response named it (the in-stream error's)
        assert "asked-chip" in html and "anthropic · claude-sonnet-4-5" in html
    else:
        assert "asked-chip" not in html


def test_after_a_failed_turn_the_person_can_send_again(upstream, owner):
    upstream.add(error_reply("anthropic", 429, "x", "slow down"), reply("anthropic", TIDES))
    conversation = store.create_conversation(owner=owner)
    assert run(conversation, ASK).turn.status == "failed"
    again = run(conversation, ASK).turn
    assert again.status == "complete" and again.index == 3
    # the failed turn holds no answer: nothing empty goes back for it
    messages = upstream.requests[1].json["messages"]
    assert all(m["content"] for m in messages) and messages[-1]["role"] == "user"


def test_an_unreachable_provider_fails_the_turn(upstream, owner, settings):
    settings.TURNSCOPE_UPSTREAM = {"anthropic": "http://127.0.0.1:9"}
    turn = run(store.create_conversation(owner=owner), ASK).turn
    assert turn.status == "failed"
    assert errors_of(turn)[0]["code"] == "upstream_unreachable"


def test_a_provider_without_a_key_is_disabled_and_nothing_is_stored(upstream, owner,
                                                                    monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    [option] = [o for o in calls.provider_options() if o.provider == "anthropic"]
    assert not option.enabled and "ANTHROPIC_API_KEY" in option.reason
    conversation = store.create_conversation(owner=owner)
    with pytest.raises(calls.CallError, match="ANTHROPIC_API_KEY"):
        async_to_sync(calls.start_turn)(conversation, ASK)
    assert not Turn.objects.exists() and not upstream.requests


def test_without_a_key_the_recorded_provider_answers_and_the_turn_says_so(upstream, owner,
                                                                          monkeypatch, settings):
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    settings.TURNSCOPE_RECORDED_UPSTREAM = settings.TURNSCOPE_UPSTREAM["anthropic"] + "/rec"
    upstream.prefix = "/rec"
    upstream.add(reply("anthropic", TIDES))
    [option] = [o for o in calls.provider_options() if o.provider == "anthropic"]
    assert option.enabled and option.recorded and "recorded" in option.label
    live = run(store.create_conversation(owner=owner), ASK)
    assert live.recorded and live.turn.status == "complete"
    assert live.turn.agent_id == calls.RECORDED_AGENT
    assert upstream.requests[0].header("x-api-key") is None  # no key goes to it


def test_a_second_turn_while_one_streams_is_busy(upstream, owner):
    upstream.add(reply("anthropic", TIDES, pace=0.05))
    conversation = store.create_conversation(owner=owner)

    async def again(live):
        with pytest.raises(calls.Busy):
            await calls.start_turn(conversation, ASK)
        await calls.stop(conversation)

    run(conversation, ASK, during=again)
    assert conversation.turns.count() == 2


def test_keys_are_never_stored_or_logged(upstream, owner, caplog):
    caplog.set_level(logging.DEBUG)
    upstream.add(reply("anthropic", TIDES), error_reply("anthropic", 401, "x",
                                                        f"bad key {ANTHROPIC_KEY}"))
    conversation = store.create_conversation(owner=owner)
    run(conversation, ASK)
    run(conversation, calls.Ask("anthropic", "claude-sonnet-4-5", "again", False))
    assert ANTHROPIC_KEY not in caplog.text
    dump = orjson.dumps([
        list(Event.objects.values()), list(Turn.objects.values()),
        list(Conversation.objects.values()),
    ], default=str).decode()
    assert ANTHROPIC_KEY not in dump and "PLANTED" not in dump


def test_rerun_answers_the_turn_again_on_another_provider_as_a_branch(upstream, owner):
    upstream.add(reply("anthropic", TIDES), reply("openai", SOURDOUGH))
    conversation = store.create_conversation(owner=owner, title="Tides")
    run(conversation, ASK)

    async def go():
        live = await calls.rerun(conversation, 1, owner,
                                 calls.Ask("openai", "gpt-5-mini", "", True))
        await calls.wait(live.turn, timeout=30)
        return live

    live = async_to_sync(go)()
    branch = live.conversation
    assert branch.pk != conversation.pk
    assert (branch.forked_from_id, branch.forked_at_turn) == (conversation.pk, 0)
    turns = list(branch.turns.order_by("index"))
    assert [t.role for t in turns] == ["user", "agent"]
    turns[1].refresh_from_db()
    assert turns[1].provider == "openai" and turns[1].status == "complete"
    sent = upstream.requests[1]
    assert sent.path == "/v1/responses" and sent.header("authorization") == f"Bearer {OPENAI_KEY}"
    assert ASK.prompt in orjson.dumps(sent.json["input"]).decode()
    assert conversation.turns.count() == 2  # the original is untouched


def test_rerun_refuses_a_user_turn_and_fork_at_copies_up_to_the_turn(upstream, owner):
    upstream.add(reply("anthropic", TIDES))
    conversation = store.create_conversation(owner=owner)
    run(conversation, ASK)
    with pytest.raises(calls.NotFound):
        async_to_sync(calls.rerun)(conversation, 0, owner,
                                   calls.Ask("openai", "gpt-5-mini", "", True))
    forked = calls.fork_at(conversation, 1, owner)
    assert forked.turns.count() == 2 and forked.forked_at_turn == 1
    with pytest.raises(calls.CallError):
        calls.fork_at(conversation, 7, owner)


def test_an_empty_conversation_needs_a_prompt(upstream, owner):
    conversation = store.create_conversation(owner=owner)
    with pytest.raises(calls.CallError, match="prompt"):
        async_to_sync(calls.start_turn)(conversation, calls.Ask("anthropic", "claude-x", ""))


def test_a_sync_view_finds_the_server_loop_where_asgiref_leaves_it():
    """``calls._server_loop`` reads asgiref's private ``SyncToAsync.threadlocal`` (the loop a
    sync view's thread serves). If asgiref stops recording it there, ``in_thread`` would make
    every live turn started from a view stream to its end inside the request: this canary fails
    first. Outside a server (no loop behind the thread) there is none."""
    async def server() -> bool:
        return await sync_to_async(calls._server_loop)() is asyncio.get_running_loop()

    assert asyncio.run(server())
    assert calls._server_loop() is None
