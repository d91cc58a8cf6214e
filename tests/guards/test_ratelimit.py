"""The rate limits count in whatever cache their caller hands in (no Django needed)."""

from __future__ import annotations

from typing import Any

import pytest

from guards import ratelimit


class DictCache:
    """Django's cache API over a dict, without expiry (one window)."""

    def __init__(self) -> None:
        self.data: dict[str, Any] = {}

    def add(self, key: str, value: Any, timeout: int | None = None) -> bool:
        if key in self.data:
            return False
        self.data[key] = value
        return True

    def incr(self, key: str, delta: int = 1) -> int:
        if key not in self.data:
            raise ValueError(key)
        self.data[key] += delta
        return int(self.data[key])

    def set(self, key: str, value: Any, timeout: int | None = None) -> None:
        self.data[key] = value

    def get(self, key: str, default: Any = None) -> Any:
        return self.data.get(key, default)

    def delete(self, key: str) -> Any:
        return self.data.pop(key, None) is not None


class DownCache(DictCache):
    def add(self, key: str, value: Any, timeout: int | None = None) -> bool:
        raise ConnectionError("cache down")

    def get(self, key: str, default: Any = None) -> Any:
        raise ConnectionError("cache down")


def test_attempts_count_per_scope_and_identity_up_to_the_rate():
    cache = DictCache()
    assert [ratelimit.allow(cache, "login", "a", "3/min") for _ in range(4)] == [
        True, True, True, False]
    assert ratelimit.exceeded(cache, "login", "a", "3/min")
    assert not ratelimit.exceeded(cache, "login", "b", "3/min")
    assert not ratelimit.exceeded(cache, "replay", "a", "3/min")
    ratelimit.reset(cache, "login", "a")
    assert not ratelimit.exceeded(cache, "login", "a", "3/min")


def test_identities_are_not_readable_in_the_keys():
    cache = DictCache()
    ratelimit.count(cache, "login", "203.0.113.9\nalice", "3/min")
    (key,) = cache.data
    assert "alice" not in key and "203.0.113.9" not in key


def test_a_cache_that_is_down_allows():
    cache = DownCache()
    assert ratelimit.allow(cache, "login", "a", "1/min")
    assert ratelimit.count(cache, "login", "a", "1/min") == 0
    assert not ratelimit.exceeded(cache, "login", "a", "1/min")


def test_a_malformed_rate_is_refused():
    with pytest.raises(ValueError):
        ratelimit.parse_rate("ten per minute")
