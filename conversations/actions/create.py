"""Conversations that begin: a new empty one, a fork, an import. Each is announced to its
owner's open list once stored."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from conversations import forking, store, uploads
from conversations.actions import announce
from conversations.models import Conversation
from guards import redaction


def new_conversation(owner: Any, title: str = "") -> Conversation:
    """An empty conversation of ``owner``'s (the list's "New conversation")."""
    conversation = store.create_conversation(title=redaction.redact_text(title[:300]),
                                             owner=owner)
    announce_created(conversation)
    return conversation


def fork_conversation(source: Conversation, at_turn: int, *, owner: Any, title: str | None = None
         ) -> Conversation:
    """``forking.fork`` (``ForkError`` when it cannot), the title redacted."""
    forked = forking.fork(source, at_turn, owner=owner,
                          title=redaction.redact_text(title) if title is not None else None)
    announce_created(forked)
    return forked


def import_files(files: Sequence[uploads.Upload], *, owner: Any, format: str = "auto",
                 recordings: str = "auto", copy: bool = False) -> Iterator[uploads.Result]:
    """``uploads.import_files``, each conversation stored (and its forks) announced as it is
    stored, before its result is yielded."""
    for result in uploads.import_files(files, owner=owner, format=format,
                                       recordings=recordings, copy=copy):
        if isinstance(result, uploads.Imported):
            for conversation in [result.conversation, *result.forks]:
                announce_created(conversation)
        yield result


def announce_created(conversation: Conversation) -> None:
    """Announce a conversation some other path stored (a replay's target, an API ingest)."""
    if conversation.owner_id is not None:
        announce.added(conversation.pk, conversation.owner_id, conversation.title)
