"""The text of blocks that are still streaming, where every process can read it.

The runner of a turn owns its *tail*: the text of the block it is streaming, the citations seen
for it so far and the per-turn ``delta_seq`` of the last delta it published. The runner writes
it to the Django cache (Redis when ``REDIS_URL`` is set, so any process can read it) at every
coalesced flush; the page's turn fragment and the resync endpoint read it back with
``current_tail``. A tail with ``key`` None means "between blocks": no text is streaming, but the
delta counter is still needed to place later deltas. A reader reads the tail before the turn's
events and shows it through ``shown_tail``: the runner stores a finished block, then clears the
tail, so the block is shown once whenever the reader comes.

It lives here, below ``live``, because the pages (``reading``) show a streaming turn's tail too:
``live`` writes it, everyone reads it, and ``conversations`` never imports ``live``.

The cache is a fast path, not the truth: when it errs (Redis down or restarting) the readers
read the tail the runner keeps in the database meanwhile (``StreamingTail``, written with
``keep_tail_in_db`` until the cache takes a write again), and a reader never fails because the
cache did (a miss is only ever a moment: the runner rewrites the whole tail at its next
flush). A heartbeat that cannot be read counts as running: an outage must not make live turns
look orphaned.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from typing import Any

from django.core.cache import cache

log = logging.getLogger("turnscope.live")

TAIL_TTL = 6 * 3600  # seconds; a finished turn deletes its tail
HEARTBEAT_TTL = 15  # seconds; the runner refreshes it every HEARTBEAT_EVERY
HEARTBEAT_EVERY = 4


def tail_key(turn_id: Any) -> str:
    return f"turnscope:live:tail:{turn_id}"


def heartbeat_key(turn_id: Any) -> str:
    return f"turnscope:live:run:{turn_id}"


def current_tail(turn_id: Any) -> dict[str, Any] | None:
    """The streaming tail of ``turn_id``: ``{"key", "kind", "text", "delta_seq", "block_seq",
    "citations"}``, or None when no runner streams that turn.

    ``key`` is the block's key (None between blocks), ``kind`` "message" or "reasoning",
    ``text`` the block's text so far (raw markdown, untrusted: escape it), ``delta_seq`` the
    last delta folded into ``text``, ``block_seq`` the delta_seq that opened this block.
    """
    return current_tails([turn_id]).get(str(turn_id))


def current_tails(turn_ids: list[Any]) -> dict[str, dict[str, Any]]:
    if not turn_ids:
        return {}
    keys = {tail_key(t): str(t) for t in turn_ids}
    try:
        found = cache.get_many(list(keys))
    except Exception:  # the cache is down: the copy the runner keeps in the database meanwhile
        cache_failed("read the streaming tails")
        return _db_tails(list(keys.values()))
    return {keys[k]: v for k, v in found.items() if isinstance(v, dict)}


def shown_tail(tail: dict[str, Any] | None, events: Iterable[Any]) -> dict[str, Any] | None:
    """``tail`` as a reader shows it beside the turn's stored ``events`` (read after the tail):
    without its text when its block is among them. The runner stores a finished block before it
    clears the tail, so a reader between the two has both; the block is the one of the tail's
    kind stored after the tail's ``stored_seq``."""
    if not tail or not tail.get("key") or tail.get("stored_seq") is None:
        return tail
    kind = tail.get("kind") or "message"
    after = int(tail["stored_seq"])
    if any(e.seq > after and e.kind == kind for e in events):
        return {**tail, "key": None, "kind": None, "text": "", "citations": [], "lead": "",
                "block_seq": None}
    return tail


def _db_tails(turn_ids: list[str]) -> dict[str, dict[str, Any]]:
    from conversations.models import StreamingTail

    rows = StreamingTail.objects.filter(turn_id__in=turn_ids).values_list("turn_id", "tail")
    return {str(turn): tail for turn, tail in rows if isinstance(tail, dict)}


def write_tail(turn_id: Any, tail: dict[str, Any]) -> None:
    """To the cache; raises if the cache does (the runner then calls ``keep_tail_in_db``)."""
    cache.set(tail_key(turn_id), tail, TAIL_TTL)


def keep_tail_in_db(turn_id: Any, tail: dict[str, Any]) -> None:
    from conversations.models import StreamingTail

    StreamingTail.objects.update_or_create(turn_id=turn_id, defaults={"tail": tail})


def forget_db_tail(turn_id: Any) -> None:
    from conversations.models import StreamingTail

    StreamingTail.objects.filter(turn_id=turn_id).delete()


def drop_tail(turn_id: Any) -> None:
    cache.delete(tail_key(turn_id))


def beat(turn_id: Any, info: dict[str, Any]) -> None:
    cache.set(heartbeat_key(turn_id), info, HEARTBEAT_TTL)


def is_running(turn_id: Any) -> bool:
    try:
        return cache.get(heartbeat_key(turn_id)) is not None
    except Exception:
        cache_failed("read a heartbeat")
        return True  # unknown: never reap a turn because the cache is down


def stop_beating(turn_id: Any) -> None:
    cache.delete(heartbeat_key(turn_id))


_last_warning = 0.0
WARN_EVERY = 10.0  # seconds: one line per outage-ish, not one per request


def cache_failed(doing: str) -> None:
    """Log that the cache failed (at most every ``WARN_EVERY`` seconds per process)."""
    global _last_warning
    now = time.monotonic()
    if now - _last_warning >= WARN_EVERY:
        _last_warning = now
        log.warning("the cache is unavailable (could not %s): falling back to the database",
                    doing, exc_info=True)
