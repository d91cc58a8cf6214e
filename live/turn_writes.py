"""The live runner's transactions: opening and resuming a streaming turn, appending what it
completed, failing it. Each is one transaction and runs in the database thread (the runner calls
them through ``loop_io.db``); the proxy's catch-up calls them directly."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterable, Sequence
from typing import Any

import orjson
from django.db import transaction

from conversations import store
from conversations.models import Conversation, Event, Turn
from guards import redaction
from live import instances, recovery, sources
from live.models import RecordedExchange, Recording
from streams import parts
from streams.bodies import ErrorBody
from streams.builder import EventRecord


def beat_info() -> dict[str, Any]:
    """Who runs the turn (asked each time: a worker may fork after import)."""
    return {"host": socket.gethostname(), "pid": os.getpid(), "instance": instances.current()}


def open_turns(
    conversation: Conversation,
    prompt: str | Sequence[EventRecord],
    recording: tuple[str, list[sources.WireResponse]] | None,
    agent_id: str | None = None,
    exchange: str | None = None,
    beat: bool = True,
) -> list[tuple[Turn, list[Event]]]:
    """The user turn holding ``prompt`` (when given: a text, or the user turn's events) and the
    streaming agent turn after it (``agent_id`` its agent), with the recording behind the agent
    turn and its first heartbeat: one transaction. Each turn comes with its events.
    ``exchange``: the captured exchange (``live.capture``) the turn records, bound to it in the
    same transaction (recording it again finds this turn). ``beat=False``: no heartbeat, for a
    caller that finishes the turn in the same transaction (nobody sees it streaming)."""
    if isinstance(prompt, str):
        specs = [store.user_turn(redaction.redact_text(prompt))] if prompt else []
    else:
        specs = [store.NewTurn(Turn.Role.USER, redaction.redact_records(prompt))] if prompt else []
    specs.append(store.NewTurn(Turn.Role.AGENT, (), status=Turn.Status.STREAMING,
                               agent_id=agent_id))
    with store.atomic():
        opened = store.open_turns(conversation, specs)
        if beat:
            recovery.beat(opened[-1][0].pk, beat_info())  # alive from its first moment
        if exchange is not None:  # (next_seq as open_turns' row lock left it)
            RecordedExchange.objects.create(id=exchange, turn=opened[-1][0],
                                            base_seq=conversation.next_seq - 1)
        if recording:
            provider, responses = recording
            Recording.objects.create(
                turn=opened[-1][0], provider=provider,
                responses=orjson.dumps([r.as_dict() for r in responses]).decode(),
            )
    return opened


def resume_turn(
    turn: Turn, before: Sequence[EventRecord], exchange: str | None = None
) -> tuple[list[Event], list[Iterable[parts.Part]]]:
    """Mark the finished agent ``turn`` streaming again and append ``before`` to it, in one
    transaction; returns those events and the part stream that rebuilds what it held.
    ``exchange``: as ``open_turns``'."""
    [stored] = sources.event_responses(turn)
    stored_parts = list(stored)  # read here, in the database thread
    with transaction.atomic():
        store.resume_turn(turn)
        recovery.beat(turn.pk, beat_info())
        prime = last_seq(turn.conversation)
        events = store.append_events(turn, redaction.redact_records(before))
        if exchange is not None:
            RecordedExchange.objects.create(id=exchange, turn=turn, prime_seq=prime,
                                            base_seq=events[-1].seq if events else prime)
    return events, [stored_parts]


def write(
    turn: Turn,
    records: list[EventRecord],
    model: tuple[str, str] | None,
    finish: dict[str, Any] | None,
) -> list[Event]:
    """Append ``records``, record the ``model`` and ``finish`` the turn, whichever are given, in
    one transaction. The credential scan runs here, in the database thread, not on the loop."""
    records = redaction.redact_records(records)
    if model is None and finish is None:
        return store.append_events(turn, records)
    with transaction.atomic():
        events = store.append_events(turn, records)
        if model is not None:
            store.set_provenance(turn, *model)
        if finish is not None:
            store.finish_turn(turn, **finish)
            recovery.stop_beating(turn.pk)  # as the failure and the reaper do: in the same commit
    return events




def fail(turn: Turn, code: str, message: str) -> list[Event]:
    with transaction.atomic():
        locked = Turn.objects.select_for_update().get(pk=turn.pk)
        if locked.status != Turn.Status.STREAMING:
            return []  # it ended already: what it holds stands
        events = store.append_events(locked, [EventRecord("error", body=ErrorBody(code, message))])
        store.finish_turn(locked, status=Turn.Status.FAILED, end_reason="error")
        recovery.stop_beating(turn.pk)
    turn.status, turn.end_reason = locked.status, locked.end_reason
    return events



def open_user_turn(conversation: Conversation, text: str) -> list[tuple[Turn, list[Event]]]:
    return store.open_turns(conversation, [store.user_turn(redaction.redact_text(text))])



def last_seq(conversation: Conversation) -> int:
    return Conversation.objects.values_list("next_seq", flat=True).get(pk=conversation.pk) - 1

