"""Rendering a recorded turn once, in the background, so that its first view and its first
export read caches instead of rendering.

The store queues every turn it records finished, or finishes, in the same transaction
(``PendingRender``): durable, so a server stopped or crashed before rendering leaves the queue as
it was, and the next drain (any server's) takes it. ``drain`` takes the oldest queued turns and
renders each once: its message HTML and page fragment (``reading.turn_views``, which caches
them as the page does), then its Markdown and HTML export chunks (``projections.warm_exports``,
reading that same message HTML). A turn is removed from the queue only after its caches are
written; everything is keyed by renderer version and the turn's last seq, so a drain that meets
fresh caches renders nothing, and a cache made by an older renderer is never served (it is
made again on the next read).

A drain that fails on the database leaves its turns queued (the next round retries); a turn
whose rendering raises is logged and dropped from the queue (it would fail the same way again;
the page and the exports still render it when asked, as they do any turn not cached).
"""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from collections.abc import Iterable
from datetime import timedelta
from typing import Any

from django.db import DatabaseError, router, transaction
from django.db.models import Q
from django.utils import timezone

from conversations import cache_rows
from conversations.models import Conversation, PendingRender, Turn

log = logging.getLogger("turnscope.render")

DRAIN_BATCH = 50  # turns a drain takes at once (~0.2 s of CPU): a server round stays short


def queue(turn_ids: Iterable[Any], *, connection: Any = None) -> None:
    """Queue these (finished) turns for rendering; inside the caller's transaction, on its
    ``connection`` (the store's writer), so that a turn is queued if and only if it is
    recorded."""
    now = timezone.now()
    rows = [(pk, now) for pk in turn_ids]
    if rows:
        cache_rows.put(PendingRender, ("turn", "queued_at"), rows, unique=("turn",),
                       replace=("queued_at",), connection=connection)


def queue_all_finished(batch: int = 2000) -> int:
    """Queue every finished turn (``render_pending --all``); returns how many."""
    total = 0
    finished = Turn.objects.exclude(status=Turn.Status.STREAMING).order_by("pk")
    last = None
    while True:
        page = finished.filter(pk__gt=last) if last is not None else finished
        ids = list(page.values_list("pk", flat=True)[:batch])
        if not ids:
            return total
        with transaction.atomic(using=router.db_for_write(PendingRender)):
            queue(ids)
        total += len(ids)
        last = ids[-1]


def pending() -> int:
    """How many turns wait to be rendered."""
    return PendingRender.objects.count()


def waited(seconds: float) -> bool:
    """Whether a queued turn has waited ``seconds`` or more."""
    since = timezone.now() - timedelta(seconds=seconds)
    return PendingRender.objects.filter(queued_at__lte=since).exists()


def drain(limit: int = DRAIN_BATCH) -> int:
    """Render the (at most ``limit``) oldest queued turns and take them off the queue; returns
    how many were taken. Streaming turns (continued since they were queued) are taken off: they
    are queued again when they finish."""
    from conversations import projections, reading

    rows = list(PendingRender.objects.order_by("queued_at", "turn_id")
                .values_list("turn_id", "queued_at")[:limit])
    if not rows:
        return 0
    taken = [pk for pk, _ in rows]
    by_conversation: dict[Any, list[Turn]] = defaultdict(list)
    for turn in Turn.objects.filter(pk__in=taken).exclude(status=Turn.Status.STREAMING):
        by_conversation[turn.conversation_id].append(turn)
    conversations = Conversation.objects.in_bulk(list(by_conversation))
    for conversation_id, turns in by_conversation.items():
        conversation = conversations.get(conversation_id)
        if conversation is None:
            continue  # deleted meanwhile: its queue rows went with its turns
        try:
            reading.turn_views(conversation, turns)
            projections.warm_exports(conversation, [t.pk for t in turns])
        except DatabaseError:
            raise  # the database is busy or down: everything stays queued for the next round
        except Exception:
            log.exception("could not render turns %s of conversation %s in the background; "
                          "they are rendered when read", [str(t.pk) for t in turns],
                          conversation_id)
    # A turn queued again meanwhile (continued, then finished again) has a later time: it
    # stays for the next round.
    done = Q()
    for pk, queued_at in rows:
        done |= Q(turn_id=pk, queued_at=queued_at)
    with transaction.atomic(using=router.db_for_write(PendingRender)):
        PendingRender.objects.filter(done).delete()
    log.debug("rendered %d turns in the background", len(taken))
    return len(taken)


def drain_for(seconds: float, batch: int = DRAIN_BATCH) -> int:
    """Drain batches until the queue is empty or ``seconds`` have passed (a server's round:
    its other work goes on between rounds); returns how many turns were taken."""
    end = time.monotonic() + seconds
    total = 0
    while time.monotonic() < end and (taken := drain(batch)):
        total += taken
    return total


def drain_all(batch: int = DRAIN_BATCH) -> int:
    """Drain until the queue is empty (a management command's, a test's or a bench's); returns
    how many turns were taken."""
    total = 0
    while taken := drain(batch):
        total += taken
    return total
