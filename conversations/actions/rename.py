"""Renaming a conversation (its page, the API, the admin, a live call titling an untitled one)."""

from __future__ import annotations

from django.db import transaction

from conversations import store
from conversations.actions import announce
from conversations.models import Conversation
from guards import redaction


def rename_conversation(conversation: Conversation, title: str) -> None:
    """Give ``conversation`` the title ``title`` (redacted: a key pasted into a title is not
    kept), and tell its open page and its owner's open list."""
    with transaction.atomic():
        store.rename_conversation(conversation, redaction.redact_text(title))
        announce.updated(conversation.pk, conversation.owner_id, conversation.title)
