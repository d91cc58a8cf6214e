"""Turns stored outside the live runner: a recorded response ingested through the API (into a
new conversation or one of yours), a span an OpenTelemetry exporter sent. An open page of the
conversation is told of each turn stored, as the runner tells it of its own."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.db.models import Max

from conversations import ingest
from conversations.actions import announce
from conversations.actions.create import announce_created
from conversations.models import Conversation, Turn


def last_index(conversation: Conversation) -> int:
    """The index of the conversation's newest turn; -1 when it has none."""
    newest = Turn.objects.filter(conversation_id=conversation.pk).aggregate(n=Max("index"))["n"]
    return -1 if newest is None else int(newest)


def announce_turns_after(conversation: Conversation, index: int) -> None:
    """Announce the conversation's turns after ``index`` (those just stored), each with the
    conversation's last event seq, so a page behind it fetches them."""
    seq = Conversation.objects.filter(pk=conversation.pk).values_list("next_seq", flat=True) \
        .first()
    if seq is None:
        return
    for turn in Turn.objects.filter(conversation_id=conversation.pk, index__gt=index) \
            .order_by("index"):
        announce.announce(announce.turn_message(turn, seq - 1), conversation=conversation.pk)


def ingest_response(provider: str, files: Sequence[ingest.ResponseFile], *, owner: Any,
                    title: str = "", prompt: str = "", conversation: Conversation | None = None,
                    remember: bool = False) -> ingest.IngestSummary:
    """``ingest.ingest``: a new conversation is announced to its owner's list; turns stored into
    an existing one to its page. ``remember``: as ``ingest.ingest``'s (``AlreadyImported``)."""
    before = -1 if conversation is None else last_index(conversation)
    summary = ingest.ingest(provider, files, owner=owner, title=title, prompt=prompt,
                            conversation=conversation, remember=remember)
    if conversation is None:
        announce_created(summary.conversation)
    else:
        announce_turns_after(conversation, before)
    return summary
