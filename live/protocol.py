"""The live wire protocol: what the server publishes, and what a browser may send.

Server -> browser (JSON text frames); every message carries sequence information:

* ``hello``  on connect: ``{"type", "conversation", "last_seq", "turns": [turn state...]}``.
* ``turn``   a turn started, got its model, or finished: ``{"type", "conversation", "turn",
  "index", "role", "status", "end_reason", "model": {"provider","model"} | null,
  "seq", "ts"}``. ``seq`` is the conversation's last committed event seq when it was sent.
* ``events`` events were committed: ``{"type", "conversation", "turn", "index", "seq_from",
  "seq_to", "events": [{"id","seq","kind","incomplete", "activity"?}], "ts"}``. Seqs are
  per conversation and contiguous; ``seq_from`` > last seen + 1 is a gap.
* ``delta``  streamed text (the first of a burst at once, what follows within 50 ms of it
  coalesced): ``{"type", "conversation", "turn", "index", "key", "kind", "delta_seq",
  "block_seq", "text", "citations": [{"url","title"}], "rx", "ts"}``; ``rx`` is when the
  oldest text in it reached the runner, ``ts`` when it was published (ms since the epoch).
  ``delta_seq`` counts deltas per turn (1, 2, 3 …), ``block_seq`` is the delta_seq that
  opened the block. A delta_seq > last seen + 1 is a gap.
* ``batch``  several of the above in order, one frame: ``{"type": "batch", "messages": [...]}``
  (what one ~50 ms window of a turn produced: events, then the delta, then a turn change).
* ``state``  answer to ``sync``: the same document as ``GET /c/<id>/state/`` (it holds the
  conversation's ``title`` and ``shown`` title too).
* ``conversation`` what a business action changed (a rename, a delete), announced on commit:
  ``conversations.actions.announce`` describes it.
* ``pong``, ``error`` (``{"type": "error", "error": "..."}``).

Browser -> server (text frames, at most ``MAX_CLIENT_MESSAGE`` bytes, JSON objects only):
``{"type": "ping"}`` and ``{"type": "sync", "after": <int seq>}``. Nothing a browser sends is
ever forwarded to the channel layer.
"""

from __future__ import annotations

import time
from typing import Any

import orjson

from conversations.actions import announce

MAX_CLIENT_MESSAGE = 1024  # bytes
CLIENT_TYPES = frozenset({"ping", "sync"})
GROUP_MESSAGE_TYPE = announce.GROUP_MESSAGE_TYPE  # handled by LiveConsumer.live_message


class InvalidClientMessage(ValueError):
    pass


def group_name(conversation_id: Any) -> str:
    return announce.conversation_group(conversation_id)


def dumps(message: dict[str, Any]) -> str:
    return orjson.dumps(message).decode()


def now_ts() -> float:
    return round(time.time() * 1000, 3)  # ms since the epoch: the publish time


def parse_client_message(text: str | None, raw: bytes | None) -> dict[str, Any]:
    """Validate one frame from a browser; the result only ever holds known, typed fields."""
    if raw is not None or text is None:
        raise InvalidClientMessage("binary frames are not accepted")
    if len(text.encode()) > MAX_CLIENT_MESSAGE:
        raise InvalidClientMessage("message too large")
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError:
        raise InvalidClientMessage("not JSON") from None
    if not isinstance(value, dict):
        raise InvalidClientMessage("a message must be a JSON object")
    kind = value.get("type")
    if kind not in CLIENT_TYPES:
        raise InvalidClientMessage("unknown message type")
    if kind == "ping":
        return {"type": "ping"}
    after = value.get("after", 0)
    if isinstance(after, bool) or not isinstance(after, int) or not 0 <= after < 2**53:
        raise InvalidClientMessage("after must be a non-negative integer")
    return {"type": "sync", "after": after}
