"""Fork a conversation at a turn: a new conversation holding turns 0..at_turn of the source.

Turns, events and attributions are copied as new rows with new ids; events get new, contiguous
seqs (1, 2, …) in the source's seq order. Provider payloads are immutable, so they are shared by
reference, never copied. ``agent.model`` provenance is copied verbatim from the stored turn: a
fork never asks a provider or an adapter which model a turn "would" use now.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.utils import timezone

from conversations import store
from conversations.models import Attribution, Conversation, Event, Turn

BATCH = 2000  # events copied per round trip; keeps memory flat for long conversations


class ForkError(ValueError):
    """The fork point does not exist or cannot be forked (a turn there is still streaming)."""


def fork(
    source: Conversation, at_turn: int, *, owner: Any = None, title: str | None = None
) -> Conversation:
    """Create and return the fork. All or nothing."""
    if isinstance(at_turn, bool) or not isinstance(at_turn, int) or at_turn < 0:
        raise ForkError("at_turn must be a turn index (an integer >= 0)")
    with transaction.atomic():
        # Lock the source like store.append_events does, so no event lands mid-copy.
        source = Conversation.objects.select_for_update().get(pk=source.pk)
        turns = list(source.turns.filter(index__lte=at_turn).order_by("index"))
        if not turns or turns[-1].index != at_turn:
            count = source.turns.count()
            raise ForkError(
                f"at_turn {at_turn} does not exist (the conversation has {count} "
                f"turn{'s' if count != 1 else ''})"
            )
        streaming = [t.index for t in turns if t.status == Turn.Status.STREAMING]
        if streaming:
            raise ForkError(f"turn {streaming[0]} is still streaming; fork after it finishes")
        fork = store.create_conversation(
            title=source.title if title is None else title, owner=owner, forked_from=source,
            forked_at_turn=at_turn,
        )
        turn_ids = _copy_turns(turns, fork)
        copied = _copy_events(source, turn_ids, fork)
        Conversation.objects.filter(pk=fork.pk).update(
            next_seq=copied + 1, updated_at=timezone.now()
        )
    fork.refresh_from_db()
    return fork


def _copy_turns(turns: list[Turn], fork: Conversation) -> dict[Any, Any]:
    copies = []
    for turn in turns:
        copy = Turn(
            conversation=fork, index=turn.index, role=turn.role, status=turn.status,
            end_reason=turn.end_reason, agent_id=turn.agent_id,
            provider=turn.provider, model=turn.model,  # verbatim, never re-resolved
            responses=turn.responses, created_at=turn.created_at,
            completed_at=turn.completed_at,
        )
        copy.validate_invariants()  # bulk_create skips Turn.save()
        copies.append(copy)
    Turn.objects.bulk_create(copies)
    return {turn.pk: copy.pk for turn, copy in zip(turns, copies, strict=True)}


def _copy_events(source: Conversation, turn_ids: dict[Any, Any], fork: Conversation) -> int:
    """Copy the events of the forked turns in seq order, BATCH at a time; return how many."""
    seq = 0
    last_seq = 0
    while True:
        batch = list(
            Event.objects.filter(conversation=source, turn_id__in=list(turn_ids),
                                 seq__gt=last_seq)
            .order_by("seq")[:BATCH]
        )
        if not batch:
            return seq
        last_seq = batch[-1].seq
        by_event: dict[Any, list[Attribution]] = {}
        for a in Attribution.objects.filter(event__in=batch).order_by("event_id", "ordinal"):
            by_event.setdefault(a.event_id, []).append(a)
        events, attributions = [], []
        for event in batch:
            seq += 1
            copy = Event(
                conversation=fork, turn_id=turn_ids[event.turn_id], seq=seq, kind=event.kind,
                text=event.text, incomplete=event.incomplete, body=event.body,
                activity_id=event.activity_id,
                payload_id=event.payload_id,  # shared: payloads are immutable
                created_at=event.created_at,
            )
            events.append(copy)
            for a in by_event.get(event.pk, ()):
                attributions.append(Attribution(
                    event=copy, ordinal=a.ordinal, url=a.url, title=a.title, excerpt=a.excerpt,
                    range_start=a.range_start, range_end=a.range_end, incomplete=a.incomplete,
                    replay_id=a.replay_id,  # shared
                ))
        Event.objects.bulk_create(events)
        Attribution.objects.bulk_create(attributions)
