"""The proxy's forwarding before its recording (``proxy.priority``): a recorder waits while a
request waits for its first byte, and for a short quiet time after, but never longer than
``MAX_YIELD`` at a time."""

from __future__ import annotations

import asyncio

import pytest

from proxy import priority


def _run(coro):
    return asyncio.run(coro)


def test_with_no_request_waiting_a_recorder_goes_on_at_once():
    async def go():
        loop = asyncio.get_running_loop()
        started = loop.time()
        await priority.Yielder()()
        return loop.time() - started

    assert _run(go()) < priority.QUIET / 2


def test_a_recorder_waits_for_a_first_byte_and_the_quiet_after_it():
    async def go():
        loop = asyncio.get_running_loop()
        order = []

        async def forward():
            with priority.waiting() as first:
                await asyncio.sleep(0.02)
                order.append(("first byte", loop.time()))
                first.sent()
                await asyncio.sleep(1.0)  # the rest of the stream does not hold recording
                order.append(("stream ended", loop.time()))

        async def record():
            await asyncio.sleep(0)  # the request is in first
            await priority.Yielder()()
            order.append(("recorded", loop.time()))

        await asyncio.gather(forward(), record())
        return order

    (first, at_first), (recorded, at_recorded), (ended, _) = _run(go())
    assert (first, recorded, ended) == ("first byte", "recorded", "stream ended")
    assert at_recorded - at_first >= priority.QUIET * 0.9


def test_a_request_that_never_answers_holds_a_recorder_back_at_most_max_yield():
    async def go():
        loop = asyncio.get_running_loop()
        yielder = priority.Yielder()
        with priority.waiting():
            started = loop.time()
            await yielder()
            waited = loop.time() - started
            started = loop.time()
            await yielder()  # then it works unhindered for as long
            again = loop.time() - started
        return waited, again

    waited, again = _run(go())
    assert priority.MAX_YIELD * 0.9 <= waited < 1.0  # (generous: a loaded machine is slow)
    assert again < priority.QUIET / 2  # no wait at all: it returns without sleeping


@pytest.mark.parametrize("how", ["sent", "left"])
def test_a_request_counts_once_however_it_ends(how):
    async def go():
        with priority.waiting() as first:
            if how == "sent":
                first.sent()
                first.sent()
        traffic = priority._traffic()
        return traffic.waiting

    assert _run(go()) == 0
