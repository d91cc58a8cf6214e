"""A live replay: a stored conversation played again, turn by turn, into a new conversation
whose viewers watch it stream (the "Replay live" button, ``manage.py replay``). Agent turns come
from their recording when there is one (fed through the provider's adapter again, at the
recorded pace times ``speed``), else from their stored events.

A recorded agent turn is played as a live call's answer arrives (``live.call_capture``): each
recorded response is an exchange of the capture log (kind ``replay``) bound to the new turn as it
opens, and each of its events is committed to the log, at the recorded pace, before the runner
reads it. A server killed mid-replay leaves that exchange in the log; the next start records it
into the same turn (``proxy.catchup``): the turn keeps every character the runner had read (its
unfinished block too, whose text was only in the cache), interrupted.

Not to be confused with a *native replay* (a turn's stored provider payloads sent back exactly
to their provider, ``conversations.next_request``)."""

from __future__ import annotations

import asyncio
import io
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import orjson

import providers
from conversations import store
from conversations.models import Conversation, Turn
from live import call_capture, publish, sources, turn_messages, turn_writes
from live.loop_io import db, off_loop
from live.models import Recording
from live.runner import COALESCE_SECONDS, TurnRunner
from streams import parts

# Bytes of a recording that make no part yet (pings, a JSON body) held before they go to the
# capture log anyway.
MAX_CHUNK = 64 * 1024


async def _add_user_turn(conversation: Conversation, text: str, layer: Any = None) -> Turn:
    """A user turn holding ``text``, published (a prompt that no agent turn follows yet)."""
    opened = await db(turn_writes.open_user_turn)(conversation, text)
    last_seq = conversation.next_seq - 1  # read under the row lock
    await publish.publish_all(conversation.pk, turn_messages.opened_messages(opened, last_seq),
                              layer)
    return opened[0][0]


def _source_turns(source: Conversation) -> list[tuple[Turn, str, Any]]:
    """(turn, user text or "", recording or None) for every turn of ``source``, in order."""
    out = []
    for turn in source.turns.order_by("index"):
        if turn.role == Turn.Role.AGENT:
            out.append((turn, "", Recording.objects.filter(turn=turn).first()))
        else:
            text = "\n\n".join(
                e.text for e in turn.events.order_by("seq") if e.kind == "message"
            )
            out.append((turn, text, None))
    return out


async def live_replay(
    source: Conversation,
    target: Conversation,
    *,
    speed: float = 1.0,
    coalesce: float = COALESCE_SECONDS,
    layer: Any = None,
) -> Conversation:
    """Play every turn of ``source`` into ``target``: user turns at once, agent turns live,
    from their recording when there is one, else from their stored events."""
    prompt = ""  # a user turn's text, opened together with the agent turn that answers it
    for turn, text, recording in await db(_source_turns)(source):
        if turn.role != Turn.Role.AGENT:
            if text:
                if prompt:
                    await _add_user_turn(target, prompt, layer)
                prompt = text
            continue
        if recording is not None:
            await _play_recording(target, recording, prompt, speed=speed, coalesce=coalesce,
                                  layer=layer)
        else:
            runner = TurnRunner(target, speed=speed, coalesce=coalesce, layer=layer)
            await runner.run(await db(sources.event_responses)(turn), prompt=prompt)
        prompt = ""
    if prompt:
        await _add_user_turn(target, prompt, layer)
    return target


async def _play_recording(target: Conversation, recording: Recording, prompt: str, *,
                          speed: float, coalesce: float, layer: Any) -> Turn:
    """A recorded agent turn played live into ``target`` (after a user turn holding ``prompt``,
    when given), its responses through the capture log."""
    provider = recording.provider
    wire = await off_loop(
        sources.redacted, [sources.WireResponse(**r) for r in recording.response_list])
    xid = call_capture.new_id()
    opened = await db(turn_writes.open_turns)(target, prompt, (provider, wire), None, xid)
    captured = call_capture.CallCapture(opened[-1][0], target.pk, target.owner_id, xid,
                                        kind="replay")
    runner = TurnRunner(target, speed=speed, coalesce=coalesce, layer=layer)
    pace = sources.Pace(speed)
    responses = (_played(captured, provider, response, pace, runner.settle if n else None)
                 for n, response in enumerate(wire))
    try:
        return await runner.run(responses, opened=opened)
    finally:
        # recorded (or, the turn left streaming, released to the log's recording)
        await asyncio.shield(captured.recorded())


async def _played(captured: call_capture.CallCapture, provider: str,
                  response: sources.WireResponse, pace: sources.Pace,
                  settle: Callable[[], Awaitable[None]] | None) -> AsyncIterator[parts.Part]:
    """One recorded response as a provider's arrives: an event at a time, at the recorded pace,
    its bytes committed to the capture log before the runner reads its parts. ``settle``: a
    continuation's, the response before it is stored first (its exchange is bound after it)."""
    if settle is not None:
        await settle()
    body = orjson.dumps(response.request) if response.request is not None else b""
    await captured.open(provider, response.name, response.endpoint or "", body,
                        response.api_version, response.served_by)
    await captured.respond(200)
    parser = providers.stream_parser(provider, response.context())
    held = bytearray()  # read, not in the log yet: they make no part so far
    try:
        for line in io.BytesIO(response.raw.encode()):
            held += line
            try:
                found = parser.feed(line)
            except Exception:  # unreadable: the log keeps what the runner was given
                await captured.chunk(bytes(held))
                raise
            if not found and len(held) < MAX_CHUNK:
                continue
            await pace.wait(sum(sources.pace(part) for part in found))
            await captured.chunk(bytes(held))
            held.clear()
            for part in found:
                yield part
        if held:
            await captured.chunk(bytes(held))
        for part in parser.close():
            yield part
        await captured.end("complete")
    finally:
        if captured.current is not None:  # stopped before the response was over
            await asyncio.shield(captured.end("gone"))


def create_live_replay_target(source: Conversation, owner: Any) -> Conversation:
    title = f"Replay of {source.title or source.pk}"
    return store.create_conversation(title=title, owner=owner)

