"""Conversations kept only until they are done: a live replay started with "discard
when done".

The mark lives in the cache (Redis when configured, so every process sees it); the process that
runs the live replay deletes the conversation once it has finished, unless the mark was
taken away meanwhile ("keep it").
"""

from __future__ import annotations

import logging
from typing import Any

from django.core.cache import cache

from conversations import store
from conversations.actions.delete import delete_conversation
from conversations.models import Conversation

log = logging.getLogger("turnscope.discard")

KEEP_MARK_FOR = 7 * 24 * 3600  # seconds; a live replay longer than this is kept


def _key(conversation_id: Any) -> str:
    return f"turnscope:discard-when-done:{conversation_id}"


def mark(conversation_id: Any) -> None:
    try:
        cache.set(_key(conversation_id), 1, KEEP_MARK_FOR)
    except Exception:  # the cache is down: the live replay is kept, which loses nothing
        log.warning("discard when done: %s cannot be marked, it is kept", conversation_id,
                    exc_info=True)


def unmark(conversation_id: Any) -> None:
    cache.delete(_key(conversation_id))


def marked(conversation_id: Any) -> bool:
    """Whether it is marked; not, when the cache cannot say (so nothing is deleted on doubt)."""
    try:
        return bool(cache.get(_key(conversation_id)))
    except Exception:
        log.warning("discard when done: the cache is unavailable", exc_info=True)
        return False


def discard_if_marked(conversation: Conversation) -> bool:
    """Delete ``conversation`` if it is still marked; whether it was."""
    if not marked(conversation.pk):
        return False
    try:
        delete_conversation(conversation)
    except (store.ConversationBusy, Conversation.DoesNotExist) as exc:
        log.warning("discard when done: %s kept (%s)", conversation.pk, exc)
        return False
    finally:
        unmark(conversation.pk)
    return True
