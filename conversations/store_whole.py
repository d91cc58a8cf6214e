"""Actions on whole conversations: rename, owner change, delete (bookkeeping of the event
log, which they never edit: a delete removes a conversation whole). Their search and facet
rows follow in the same transaction (``conversations.search``)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import QuerySet

from conversations import search, source_tally
from conversations.models import Attribution, Conversation, Event, ProviderPayload, Turn
from streams.builder import storable

log = logging.getLogger("turnscope.store")

def rename_conversation(conversation: Conversation, title: str) -> None:
    """Give ``conversation`` a new title (bookkeeping: no turn or event changes)."""
    conversation.title = storable(title)[:300]
    with transaction.atomic():
        Conversation.objects.filter(pk=conversation.pk).update(title=conversation.title)
        search.retitle(conversation.pk, conversation.title)


def set_owner(conversation: Conversation, owner: Any) -> None:
    """Give ``conversation`` to ``owner`` (None: nobody; staff only see it then); the filter
    choices' counts follow."""
    with transaction.atomic():
        old = Conversation.objects.select_for_update().filter(pk=conversation.pk) \
            .values_list("owner_id", flat=True).first()
        new = None if owner is None else owner.pk
        moved = Conversation.objects.filter(pk=conversation.pk)
        # The new owner imported the same source already: this one is a copy of it for them
        # (one conversation per source and owner).
        source = moved.values_list("source", flat=True).first()
        if source and Conversation.objects.filter(owner_id=new, source=source).exists():
            moved.update(source="")
        with source_tally.changing(conversation.pk):
            moved.update(owner_id=new)
        conversation.owner = owner
        if old != new:
            search.move_counts(conversation.pk, old, new)


class ConversationBusy(RuntimeError):
    """The conversation has a turn still streaming: it cannot be removed under its runner."""


@dataclass
class Deleted:
    conversation: Any  # its id
    turns: int
    events: int
    attributions: int
    payloads: int  # provider payload rows removed (those no other conversation uses)


def delete_conversation(conversation: Conversation) -> Deleted:
    """Remove ``conversation`` whole: its turns, events, attributions, recordings and cached
    renderings, and the provider payloads nothing else references. A payload a fork (or any
    other conversation) still uses stays. Nothing of another conversation changes, except that
    its forks no longer name it as their source; nothing is edited, only removed whole.

    Refused (``ConversationBusy``) while a turn is streaming: its runner still writes."""
    for attempt in range(3):
        try:
            return _delete_conversation(conversation)
        except IntegrityError:
            # A render cache row written for one of its events while the delete collected
            # them (a page or an export still reading it): the rows found again next time.
            if attempt == 2:
                raise
    raise AssertionError("unreachable")


def _delete_conversation(conversation: Conversation) -> Deleted:
    delete = QuerySet.delete  # the append-only querysets refuse .delete(); a whole removal may
    with transaction.atomic():
        locked = Conversation.objects.select_for_update().filter(pk=conversation.pk).first()
        if locked is None:
            raise Conversation.DoesNotExist(f"conversation {conversation.pk} does not exist")
        # Its turns locked before their cached renderings are collected: a cache row written
        # for one of them meanwhile (an export's, a page's) waits for this delete, then finds
        # the turn gone, instead of the delete failing on it (a ForeignKeyViolation, a 500).
        turns = list(Turn.objects.select_for_update().filter(conversation=locked)
                     .values_list("status", flat=True))
        if Turn.Status.STREAMING in turns:
            raise ConversationBusy("a turn of this conversation is still streaming")
        events = Event.objects.filter(conversation=locked)
        attributions = Attribution.objects.filter(event__conversation=locked)
        payload_ids = set(events.exclude(payload=None).values_list("payload_id", flat=True))
        payload_ids |= set(attributions.exclude(replay=None).values_list("replay_id", flat=True))
        counts = Deleted(locked.pk, len(turns), 0, 0, 0)
        search.forget(locked.pk, locked.owner_id)  # before its facets go
        counts.attributions = delete(attributions)[0]
        counts.events = sum(n for model, n in delete(events)[1].items()
                            if model == Event._meta.label)
        # Recordings and cached fragments go with their turns (CASCADE).
        with source_tally.changing(locked.pk):  # its Sources rows go with its turns
            delete(Turn.objects.filter(conversation=locked))
            delete(Conversation.objects.filter(pk=locked.pk))
        counts.payloads = _delete_unused_payloads(payload_ids)
    log.info("deleted conversation %s: %d turns, %d events, %d payloads", counts.conversation,
             counts.turns, counts.events, counts.payloads)
    return counts


def _delete_unused_payloads(ids: set[Any]) -> int:
    removed = 0
    pending = sorted(ids, key=str)
    for start in range(0, len(pending), 500):  # within every database's parameter limit
        batch = pending[start:start + 500]
        used = set(Event.objects.filter(payload_id__in=batch).values_list("payload_id",
                                                                           flat=True))
        used |= set(Attribution.objects.filter(replay_id__in=batch).values_list("replay_id",
                                                                                flat=True))
        unused = [pk for pk in batch if pk not in used]
        if unused:
            removed += QuerySet.delete(ProviderPayload.objects.filter(pk__in=unused))[0]
    return removed
