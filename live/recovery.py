"""Turns whose runner is gone: a server restart, a killed process.

A streaming turn whose heartbeat names a server instance that is gone (``live.instances``: a
clean stop, a lease run out, a process no longer on this host) is finished at once; one without
a runner heartbeat at all (a runner outside any server instance, e.g. ``manage.py replay``), in
a conversation nothing has written to for ``ORPHAN_AFTER`` seconds. A turn that records a
captured exchange this host's capture log still holds is left to the recording of that log
(``proxy.catchup``), which completes it with every byte the app received. Others are finished
as interrupted: the text its tail had streamed so far is
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

from conversations import store, streaming
from conversations.models import Turn
from guards import redaction
from live import capture, instances
from live.models import Heartbeat, RecordedExchange
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
                   host=str(info.get("host", ""))[:255], pid=int(info.get("pid") or 0),
                   instance=str(info.get("instance") or ""))],
        update_conflicts=True, unique_fields=["turn"],
        update_fields=["beat_at", "host", "pid", "instance"],
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
    turns = list(turns)
    owners = dict(Heartbeat.objects.filter(turn_id__in=[t.pk for t in turns])
                  .values_list("turn_id", "instance"))
    gone = instances.gone(set(owners.values()))
    reaped = []
    for turn in turns:
        owner_gone = owners.get(turn.pk, "") in gone
        if not owner_gone and is_running(turn.pk):
            continue
        if not (force or owner_gone) and turn.conversation.updated_at > quiet_since:
            continue
        if _left_to_the_log(turn):
            continue
        if not cache.add(f"turnscope:live:reap:{turn.pk}", 1, 30):
            continue  # another process is on it
        if _finish_orphan(turn):
            reaped.append(turn)
    return reaped


def _left_to_the_log(turn: Turn) -> bool:
    """Whether an exchange this turn records is still in this host's capture log: its
    recording completes the turn (with every byte the app got), not the reaper."""
    undone = list(RecordedExchange.objects.filter(turn=turn, done=False)
                  .values_list("pk", flat=True))
    if not undone:
        return False
    log_ = capture.get_log()
    for xid in undone:
        found = log_.get(str(xid))
        if found is not None and found.recorded is None:
            return True
    return False


def _finish_orphan(turn: Turn) -> bool:
    tail = streaming.current_tail(turn.pk) or {}
    with transaction.atomic():
        locked = Turn.objects.select_for_update().get(pk=turn.pk)
        if locked.status != Turn.Status.STREAMING or is_running(turn.pk):
            return False  # finished meanwhile, or its runner beat since the first look
        # A runner that died between storing a block and clearing its tail left both.
        after = tail.get("stored_seq")
        stored = (locked.events.filter(seq__gt=after).only("seq", "kind")
                  if after is not None else [])
        tail = streaming.shown_tail(tail, stored) or {}
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
