"""The resync document: what the store (and the tail store) holds for a conversation now."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from channels.db import database_sync_to_async
from django.db.models import Max

from conversations import provenance, streaming
from conversations.actions import announce
from conversations.models import Conversation, Turn
from live import recovery


def conversation_state(conversation: Conversation, after: int = 0) -> dict[str, Any]:
    """``{"conversation", "last_seq", "title", "shown", "turns": [...], "tails": {turn id:
    tail}}``.

    ``last_seq`` is read before the turns, so it never claims more than the turns show; turns
    that changed after it are simply fetched again later. ``turns[].last_seq`` is the turn's
    newest event seq, ``changed`` says whether it is newer than ``after``.
    """
    next_seq, title = (
        Conversation.objects.filter(pk=conversation.pk).values_list("next_seq", "title").get()
    )
    last_seq = next_seq - 1
    # Every connecting viewer asks for this: two queries, no model instances.
    turns = []
    for id_, index, role, status, end_reason, provider, model, newest in (
        Turn.objects.filter(conversation_id=conversation.pk)
        .order_by("index")
        .annotate(newest=Max("events__seq"))
        .values_list("id", "index", "role", "status", "end_reason", "provider", "model",
                     "newest")
    ):
        turns.append({
            "id": str(id_), "index": index, "role": role, "status": status,
            "end_reason": end_reason or None,
            "model": provenance.agent_model(provider, model),
            "last_seq": newest or 0, "changed": (newest or 0) > after,
        })
    streaming_ids = [t["id"] for t in turns if t["status"] == Turn.Status.STREAMING]
    # A streaming turn whose runner stopped beating may be an orphan: finish it, read again.
    if any(not recovery.is_running(t) for t in streaming_ids) and recovery.reap_orphans(
        conversation.pk
    ):
        return conversation_state(conversation, after)
    return {
        "type": "state",
        "conversation": str(conversation.pk),
        "last_seq": last_seq,
        # the title as a rename left it: a page that missed the announcement catches up
        "title": title, "shown": announce.shown_title(title),
        "turns": turns,
        "tails": streaming.current_tails(streaming_ids),
    }


# -- shared reads ------------------------------------------------------------------------------

# A read asked for and not yet begun, per event loop and conversation. Viewers that connect
# together (a page opened in many tabs, a server restart reconnecting everyone) share it: each
# asked after it had joined the conversation's group, and the read begins after every one of
# them asked, so it misses nothing any of them needs.
_waiting: dict[tuple[int, Any], asyncio.Future[dict[str, Any]]] = {}
_waiting_lock = threading.Lock()


async def shared_conversation_state(conversation: Conversation, after: int = 0) -> dict[str, Any]:
    """``conversation_state`` through the database thread, sharing a read that has been asked
    for but not begun yet. Each caller gets its own copy, with ``changed`` for its ``after``."""
    loop = asyncio.get_running_loop()
    key = (id(loop), conversation.pk)
    with _waiting_lock:
        shared = _waiting.get(key)
        if shared is None:
            shared = _waiting[key] = loop.create_future()
            leader = True
        else:
            leader = False
    if leader:

        def read() -> dict[str, Any]:
            with _waiting_lock:  # from here on, newcomers need a read of their own
                if _waiting.get(key) is shared:
                    del _waiting[key]
            return conversation_state(conversation)

        try:
            snapshot = await database_sync_to_async(read)()
        except BaseException as exc:
            with _waiting_lock:
                if _waiting.get(key) is shared:
                    del _waiting[key]
            if not shared.done():
                shared.set_exception(exc if isinstance(exc, Exception) else RuntimeError(
                    "the shared read was cancelled"))
                shared.exception()  # retrieved here: followers read again on their own
            raise
        shared.set_result(snapshot)
    else:
        try:
            snapshot = await asyncio.shield(shared)
        except Exception:
            snapshot = await database_sync_to_async(conversation_state)(conversation)
    turns = [{**t, "changed": t["last_seq"] > after} for t in snapshot["turns"]]
    return {**snapshot, "turns": turns, "tails": dict(snapshot["tails"])}
