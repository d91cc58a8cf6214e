"""Who may start a live call now: every live call (the composer's Send, Re-run with…, the API's
turns and re-runs) costs the operator a provider request on the server's key, so each user is
held to the same two limits whichever way they ask:

* ``TURNSCOPE_LIVE_CALL_RATE`` (default ``20/min``) live calls started, counted in the cache
  (every process together, as the other rate limits);
* ``TURNSCOPE_LIVE_CALLS_CONCURRENT`` (default ``3``) agent turns streaming at once in the
  user's conversations (from the database: every process's turns).

Past either: ``TooMany``, a 429 with a message saying which limit and what to do.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.cache import cache

from conversations.models import Turn
from guards import ratelimit


class TooMany(Exception):
    """Over a live-call limit (the views and the API answer 429 with the message)."""

    status = 429


def rate() -> str:
    return str(getattr(settings, "TURNSCOPE_LIVE_CALL_RATE", "20/min") or "20/min")


def concurrent() -> int:
    return max(1, int(getattr(settings, "TURNSCOPE_LIVE_CALLS_CONCURRENT", 3) or 3))


def admit(owner_id: Any) -> None:
    """Let a live call of ``owner_id``'s start (counting it), or raise ``TooMany``."""
    most = concurrent()
    streaming = Turn.objects.filter(conversation__owner_id=owner_id, role=Turn.Role.AGENT,
                                     status=Turn.Status.STREAMING).count()
    if streaming >= most:
        raise TooMany(f"You have {streaming} turns streaming; at most {most} may stream at once. "
                      "Stop one or wait for it to end, then send again.")
    if not ratelimit.allow(cache, "live-call", str(owner_id), rate()):
        raise TooMany(f"Too many live calls (the limit is {rate()} per user); wait a little, "
                      "then send again.")
