"""The text of blocks that are still streaming, where every process can read it.

The runner of a turn owns its *tail*: the text of the block it is streaming, the citations seen
for it so far and the per-turn ``delta_seq`` of the last delta it published. The runner writes
it to the Django cache (Redis when ``REDIS_URL`` is set, so any process can read it) at every
coalesced flush; the page's turn fragment and the resync endpoint read it back with
``current_tail``. A tail with ``key`` None means "between blocks": no text is streaming, but the
delta counter is still needed to place later deltas.

It lives here, below ``live``, because the pages (``reading``) show a streaming turn's tail too:
``live`` writes it, everyone reads it, and ``conversations`` never imports ``live``.
"""

from __future__ import annotations

from typing import Any

from django.core.cache import cache

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
    value = cache.get(tail_key(turn_id))
    return value if isinstance(value, dict) else None


def current_tails(turn_ids: list[Any]) -> dict[str, dict[str, Any]]:
    if not turn_ids:
        return {}
    keys = {tail_key(t): str(t) for t in turn_ids}
    found = cache.get_many(list(keys))
    return {keys[k]: v for k, v in found.items() if isinstance(v, dict)}


def write_tail(turn_id: Any, tail: dict[str, Any]) -> None:
    cache.set(tail_key(turn_id), tail, TAIL_TTL)


def drop_tail(turn_id: Any) -> None:
    cache.delete(tail_key(turn_id))


def beat(turn_id: Any, info: dict[str, Any]) -> None:
    cache.set(heartbeat_key(turn_id), info, HEARTBEAT_TTL)


def is_running(turn_id: Any) -> bool:
    return cache.get(heartbeat_key(turn_id)) is not None


def stop_beating(turn_id: Any) -> None:
    cache.delete(heartbeat_key(turn_id))
