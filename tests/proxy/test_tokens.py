"""The proxy's token check is on every request's way to its first byte: requests arriving
together share one lookup, a steady client never waits for one, and a deleted token stops
working within ``TOKEN_TTL``."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest

from proxy import app

KEY = "k" * 40


class Lookups:
    """A stand-in for the database lookup: counts its calls, answers ``user`` slowly."""

    def __init__(self, user: Any = "ana", delay: float = 0.05) -> None:
        self.user, self.delay, self.calls = user, delay, 0
        self.lock = threading.Lock()

    def __call__(self, key: str) -> Any:
        with self.lock:
            self.calls += 1
        time.sleep(self.delay)
        if isinstance(self.user, Exception):
            raise self.user
        return self.user


@pytest.fixture
def lookups(monkeypatch):
    found = Lookups()
    monkeypatch.setattr(app, "_lookup", found)
    monkeypatch.setattr(app, "_tokens", {})
    monkeypatch.setattr(app, "_checking", {})
    return found


def test_requests_arriving_together_share_one_lookup(lookups):
    async def burst() -> list[Any]:
        return await asyncio.gather(*[app.user_for(KEY) for _ in range(20)])

    assert asyncio.run(burst()) == ["ana"] * 20
    assert lookups.calls == 1


def test_a_token_checked_a_while_ago_answers_at_once_and_is_checked_again_meanwhile(lookups):
    app._tokens[KEY] = (time.monotonic() - app.TOKEN_REFRESH - 0.1, "ana")

    async def request() -> tuple[Any, float]:
        started = time.monotonic()
        user = await app.user_for(KEY)
        waited = time.monotonic() - started
        await asyncio.gather(*app._checking.values())  # the check in the background ends
        return user, waited

    user, waited = asyncio.run(request())
    assert user == "ana" and waited < lookups.delay  # not waiting for the lookup
    assert lookups.calls == 1
    assert time.monotonic() - app._tokens[KEY][0] < 1  # checked afresh


def test_a_deleted_token_is_refused_once_its_check_comes_back(lookups):
    app._tokens[KEY] = (time.monotonic() - app.TOKEN_REFRESH - 0.1, "ana")
    lookups.user = None  # deleted since

    async def two_requests() -> list[Any]:
        first = await app.user_for(KEY)  # still trusted: within TOKEN_TTL
        await asyncio.gather(*app._checking.values())
        return [first, await app.user_for(KEY)]

    assert asyncio.run(two_requests()) == ["ana", None]
    assert KEY not in app._tokens


def test_an_expired_token_waits_for_its_check(lookups):
    app._tokens[KEY] = (time.monotonic() - app.TOKEN_TTL - 0.1, "ana")
    lookups.user = None
    assert asyncio.run(app.user_for(KEY)) is None
    assert lookups.calls == 1


def test_a_database_that_cannot_answer_is_unavailable_and_a_background_failure_is_not(lookups):
    lookups.user = RuntimeError("the database is away")
    with pytest.raises(app.Unavailable):
        asyncio.run(app.user_for(KEY))

    app._tokens[KEY] = (time.monotonic() - app.TOKEN_REFRESH - 0.1, "ana")

    async def request() -> Any:
        user = await app.user_for(KEY)
        await asyncio.gather(*app._checking.values(), return_exceptions=True)
        return user

    assert asyncio.run(request()) == "ana"  # trusted until TOKEN_TTL, the check failing
    assert lookups.calls == 2


def test_a_request_that_goes_away_does_not_cancel_the_check_others_wait_for(lookups):
    async def one_leaves() -> Any:
        leaving = asyncio.ensure_future(app.user_for(KEY))
        staying = asyncio.ensure_future(app.user_for(KEY))
        await asyncio.sleep(0.01)
        leaving.cancel()
        return await staying

    assert asyncio.run(one_leaves()) == "ana"
    assert lookups.calls == 1
