"""Fork a conversation at a turn: a new conversation holding turns 0..at_turn of the source.

What is copied and how (new rows and ids, contiguous seqs, payloads shared by reference,
``agent.model`` provenance verbatim: a fork never asks a provider or an adapter which model a
turn "would" use now) is the store's ``copy_turns``; this module decides what may be forked.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction

from conversations import store
from conversations.models import Conversation, Turn


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
        return store.copy_turns(source, turns, store.NewConversation(
            title=source.title if title is None else title, owner=owner, forked_from=source,
            forked_at_turn=at_turn,
        ))
