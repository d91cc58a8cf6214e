"""The ``turn`` and ``events`` messages (``live.protocol``) that announce stored turns and
events to a conversation's viewers: built by the live runner, and by the proxy's catch-up
(``turn_message`` is the business actions', ``conversations.actions.announce``)."""

from __future__ import annotations

from typing import Any

from conversations.actions.announce import turn_message
from conversations.models import Event, Turn
from streams.bodies import ActivityBody


def event_brief(event: Event) -> dict[str, Any]:
    brief: dict[str, Any] = {"id": str(event.id), "seq": event.seq, "kind": event.kind,
                             "incomplete": event.incomplete}
    body = event.typed_body
    if isinstance(body, ActivityBody):
        brief["activity"] = {"id": body.id, "name": body.name, "state": body.state,
                             "summary": body.summary}
    return brief


def events_message(turn: Turn, events: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "type": "events", "turn": str(turn.pk), "index": turn.index,
        "seq_from": events[0]["seq"], "seq_to": events[-1]["seq"], "events": events,
    }


def opened_messages(
    opened: list[tuple[Turn, list[Event]]], last_seq: int
) -> list[dict[str, Any]]:
    """What announces freshly opened turns, ``last_seq`` being the conversation's last event
    seq after them: each turn (its seq covers what came before it), then its events."""
    seq = last_seq - sum(len(events) for _, events in opened)
    out: list[dict[str, Any]] = []
    for turn, events in opened:
        out.append(turn_message(turn, seq))
        if events:
            out.append(events_message(turn, [event_brief(e) for e in events]))
            seq = events[-1].seq
    return out
