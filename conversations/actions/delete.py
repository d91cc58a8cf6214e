"""Deleting a conversation (its page, the list's selection, the API, the admin, a replay
discarded when done)."""

from __future__ import annotations

from conversations import store
from conversations.actions import announce
from conversations.models import Conversation


def delete_conversation(conversation: Conversation) -> store.Deleted:
    """Remove ``conversation`` whole (``store.delete_conversation``: refused with
    ``ConversationBusy`` while a turn streams), and tell its open page and its owner's list."""
    deleted = store.delete_conversation(conversation)
    announce.removed(deleted.conversation, conversation.owner_id)
    return deleted
