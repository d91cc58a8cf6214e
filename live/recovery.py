"""Turns whose runner is gone: a server restart, a killed process.

A streaming turn without a runner heartbeat, in a conversation nothing has written to for
``ORPHAN_AFTER`` seconds, is finished as interrupted: the text its tail had streamed so far is
committed as an incomplete event (with its citations, marked incomplete), so the page says what
happened and keeps the partial text. With the local-memory cache the tail dies with its process;
with Redis it survives the restart.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

from django.core.cache import cache
from django.db import transaction
from django.utils import timezone

from conversations import redaction, store, streaming
from conversations.models import Turn
from live.models import Heartbeat
from streams.bodies import ReasoningBody
from streams.builder import AttributionRecord, EventRecord

log = logging.getLogger("turnscope.live")

ORPHAN_AFTER = 60  # seconds of silence before a turn without heartbeat counts as orphaned


# -- heartbeats: the runner's, in the database (every process sees it) and in the cache ---------


def beat(turn_id: Any, info: dict[str, Any]) -> None:
    """The runner of ``turn_id`` is alive (``info``: its host and pid). One upsert: every
    live turn beats, and ``update_or_create`` took a read, a savepoint and a write."""
    Heartbeat.objects.bulk_create(
        [Heartbeat(turn_id=turn_id, beat_at=timezone.now(),
                   host=str(info.get("host", ""))[:255], pid=int(info.get("pid") or 0))],
        update_conflicts=True, unique_fields=["turn"], update_fields=["beat_at", "host", "pid"],
    )


def stop_beating(turn_id: Any) -> None:
    Heartbeat.objects.filter(turn_id=turn_id).delete()


def is_running(turn_id: Any) -> bool:
    """Whether a runner beats for ``turn_id``: in this process's cache (cheap, and shared when
    it is Redis), else in the database (a runner in another process, e.g. ``manage.py
    replay``, whose cache this process cannot see)."""
    if streaming.is_running(turn_id):
        return True
    fresh = timezone.now() - timedelta(seconds=streaming.HEARTBEAT_TTL)
    return Heartbeat.objects.filter(turn_id=turn_id, beat_at__gte=fresh).exists()


def reap_orphans(conversation_id: Any = None, *, force: bool = False) -> list[Turn]:
    """Finish orphaned streaming turns (of one conversation, or all). ``force`` skips the
    silence check: for a server that knows it runs alone and has just started."""
    turns = Turn.objects.filter(status=Turn.Status.STREAMING).select_related("conversation")
    if conversation_id is not None:
        turns = turns.filter(conversation_id=conversation_id)
    quiet_since = timezone.now() - timedelta(seconds=ORPHAN_AFTER)
    reaped = []
    for turn in turns:
        if is_running(turn.pk):
            continue
        if not force and turn.conversation.updated_at > quiet_since:
            continue
        if not cache.add(f"turnscope:live:reap:{turn.pk}", 1, 30):
            continue  # another process is on it
        if _finish_orphan(turn):
            reaped.append(turn)
    return reaped


def _finish_orphan(turn: Turn) -> bool:
    tail = streaming.current_tail(turn.pk) or {}
    with transaction.atomic():
        locked = Turn.objects.select_for_update().get(pk=turn.pk)
        if locked.status != Turn.Status.STREAMING or is_running(turn.pk):
            return False  # finished meanwhile, or its runner beat since the first look
        text = tail.get("text") or ""
        if tail.get("key") and text:
            cites = [
                AttributionRecord(url=c.get("url", ""), title=c.get("title", ""), incomplete=True)
                for c in tail.get("citations") or []
            ]
            if tail.get("kind") == "reasoning":
                record = EventRecord("reasoning", text=text, incomplete=True,
                                     body=ReasoningBody(redacted=False))
            else:
                record = EventRecord("message", text=text, incomplete=True, attributions=cites)
            # The tail is the text as it streamed, redacted a chunk at a time: a key split
            # across chunks is only whole here.
            store.append_events(locked, redaction.redact_records([record]))
        store.finish_turn(locked, status=Turn.Status.INTERRUPTED, end_reason="interrupted")
        stop_beating(turn.pk)
    streaming.forget_db_tail(turn.pk)
    try:
        streaming.drop_tail(turn.pk)
    except Exception:  # it expires; the turn is finished, so nobody reads it
        streaming.cache_failed("drop a tail")
    log.warning("turn %s had no runner left: finished as interrupted", turn.pk)
    return True
