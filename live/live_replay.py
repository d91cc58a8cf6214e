"""A live replay: a stored conversation played again, turn by turn, into a new conversation
whose viewers watch it stream (the "Replay live" button, ``manage.py replay``). Agent turns come
from their recording when there is one (fed through the provider's adapter again, at the
recorded pace times ``speed``), else from their stored events.

Not to be confused with a *native replay* (a turn's stored provider payloads sent back exactly
to their provider, ``conversations.next_request``)."""

from __future__ import annotations

from typing import Any

from conversations import store
from conversations.models import Conversation, Turn
from live import publish, sources, turn_messages, turn_writes
from live.loop_io import db, off_loop
from live.models import Recording
from live.runner import COALESCE_SECONDS, TurnRunner


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
        runner = TurnRunner(target, speed=speed, coalesce=coalesce, layer=layer)
        if recording is not None:
            wire = await off_loop(
                sources.redacted, [sources.WireResponse(**r) for r in recording.response_list])
            await runner.run(sources.wire_responses(recording.provider, wire),
                             recording=(recording.provider, wire), prompt=prompt)
        else:
            await runner.run(await db(sources.event_responses)(turn), prompt=prompt)
        prompt = ""
    if prompt:
        await _add_user_turn(target, prompt, layer)
    return target


def create_live_replay_target(source: Conversation, owner: Any) -> Conversation:
    title = f"Replay of {source.title or source.pk}"
    return store.create_conversation(title=title, owner=owner)

