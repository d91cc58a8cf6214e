"""The resync document: what the store (and the tail store) holds for a conversation now."""

from __future__ import annotations

from typing import Any

from django.db.models import Max

from conversations.models import Conversation, Event, Turn
from live import recovery, streaming


def turn_state(turn: Turn, last_seq: int | None = None) -> dict[str, Any]:
    return {
        "id": str(turn.id),
        "index": turn.index,
        "role": turn.role,
        "status": turn.status,
        "end_reason": turn.end_reason or None,
        "model": turn.model_provenance,
        "last_seq": last_seq or 0,
    }


def conversation_state(conversation: Conversation, after: int = 0) -> dict[str, Any]:
    """``{"conversation", "last_seq", "turns": [...], "tails": {turn id: tail}}``.

    ``last_seq`` is read before the turns, so it never claims more than the turns show; turns
    that changed after it are simply fetched again later. ``turns[].last_seq`` is the turn's
    newest event seq, ``changed`` says whether it is newer than ``after``.
    """
    recovery.reap_orphans(conversation.pk)
    last_seq = (
        Conversation.objects.filter(pk=conversation.pk).values_list("next_seq", flat=True).get()
        - 1
    )
    newest = dict(
        Event.objects.filter(conversation_id=conversation.pk)
        .values_list("turn_id")
        .annotate(Max("seq"))
    )
    turns = []
    for turn in conversation.turns.order_by("index"):
        state = turn_state(turn, newest.get(turn.id))
        state["changed"] = state["last_seq"] > after
        turns.append(state)
    streaming_ids = [t["id"] for t in turns if t["status"] == Turn.Status.STREAMING]
    return {
        "type": "state",
        "conversation": str(conversation.pk),
        "last_seq": last_seq,
        "turns": turns,
        "tails": streaming.current_tails(streaming_ids),
    }
