"""Fixed-window rate limits in a cache the caller hands in (Django's, which is Redis when
configured, so every process counts together): actions that cost far more than the request asking
for them (a live replay) and guesses at a password.

A rate is ``"N/period"``: ``period`` is ``s``, ``min``, ``hour`` or ``day``, optionally with a
count (``"10/15min"``). A cache that is down fails open (the action is allowed and a warning
logged): a rate limit must not take the site down with it.
"""

from __future__ import annotations

import hashlib
import logging
import re
from typing import Any, Protocol

log = logging.getLogger("turnscope.ratelimit")

_RATE = re.compile(r"^\s*(\d+)\s*/\s*(\d*)\s*(s|sec|min|m|hour|h|day|d)\s*$")
_SECONDS = {"s": 1, "sec": 1, "m": 60, "min": 60, "h": 3600, "hour": 3600, "d": 86400,
            "day": 86400}


class Cache(Protocol):
    """What the counting needs of a cache (Django's cache API, without importing Django)."""

    def add(self, key: str, value: Any, timeout: int | None = ...) -> bool: ...
    def incr(self, key: str, delta: int = ...) -> int: ...
    def set(self, key: str, value: Any, timeout: int | None = ...) -> None: ...
    def get(self, key: str, default: Any = ...) -> Any: ...
    def delete(self, key: str) -> Any: ...


def parse_rate(rate: str) -> tuple[int, int]:
    """``(limit, window seconds)`` of ``"N/period"`` (``ValueError`` if malformed)."""
    match = _RATE.match(rate)
    if not match:
        raise ValueError(f"not a rate: {rate!r} (expected e.g. '10/min' or '5/15min')")
    count, multiple, unit = match.groups()
    return int(count), int(multiple or 1) * _SECONDS[unit]


def _key(scope: str, ident: str) -> str:
    # Hashed: an identity (an IP and a username) is not a cache key's business to show.
    return f"turnscope:rate:{scope}:{hashlib.sha256(ident.encode()).hexdigest()[:32]}"


def count(cache: Cache, scope: str, ident: str, rate: str) -> int:
    """Count one attempt of ``ident`` at ``scope``; returns the attempts in this window."""
    window = parse_rate(rate)[1]
    key = _key(scope, ident)
    try:
        if cache.add(key, 1, window):
            return 1
        try:
            return int(cache.incr(key))
        except ValueError:  # expired between add and incr
            cache.set(key, 1, window)
            return 1
    except Exception:
        log.warning("rate limit %s: the cache is unavailable, allowing", scope, exc_info=True)
        return 0


def allow(cache: Cache, scope: str, ident: str, rate: str) -> bool:
    """Count one attempt; whether it is within ``rate``."""
    return count(cache, scope, ident, rate) <= parse_rate(rate)[0]


def exceeded(cache: Cache, scope: str, ident: str, rate: str) -> bool:
    """Whether ``ident`` has used up ``rate`` at ``scope`` (counts nothing)."""
    try:
        seen = cache.get(_key(scope, ident)) or 0
    except Exception:
        log.warning("rate limit %s: the cache is unavailable, allowing", scope, exc_info=True)
        return False
    return int(seen) >= parse_rate(rate)[0]


def reset(cache: Cache, scope: str, ident: str) -> None:
    try:
        cache.delete(_key(scope, ident))
    except Exception:
        log.warning("rate limit %s: the cache is unavailable", scope, exc_info=True)
