"""Giving a conversation to another owner (the admin): it leaves one list and joins another."""

from __future__ import annotations

from typing import Any

from django.db import transaction

from conversations import store
from conversations.actions import announce
from conversations.models import Conversation


def set_owner(conversation: Conversation, owner: Any) -> None:
    """``store.set_owner``; the former owner's open list loses it, the new one's gains it."""
    with transaction.atomic():
        old = Conversation.objects.select_for_update().filter(pk=conversation.pk) \
            .values_list("owner_id", flat=True).first()
        store.set_owner(conversation, owner)
        new = None if owner is None else owner.pk
        if old != new:
            if old is not None:
                announce.announce({"type": "conversation", "op": "remove",
                                   "conversation": str(conversation.pk)}, owner=old)
            if new is not None:
                announce.added(conversation.pk, new, conversation.title)
