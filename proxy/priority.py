"""First bytes before recording: the proxy's forwarding has priority over its recording.

Forwarding and recording share one process (one event loop, one GIL) and, on a small machine,
the cores with the apps and everything else. A recorder's work — parsing, the database writes,
publishing — is real CPU, and when it runs while other apps' requests are arriving and waiting
for the provider's answer, their first bytes wait for it: at 20 concurrent streams it added
13 ms at p50 and 40–70 ms at p99 to the time to first byte, against nothing for forwarding
alone (``bench/proxy.py``).

So the forwarder marks the requests that have not had their first byte yet (``waiting``), and a
recorder asks before each piece of its work (``Yielder``): while such a request is in flight, or
one got its first byte less than ``QUIET`` seconds ago (requests come in bursts: the next one of
the burst is likely still on its way), the recorder waits. It waits at most ``MAX_YIELD`` at a
time and then works unhindered for as long, so a steady flow of requests halves recording's
pace at worst and never starves it. What the recorder has not read yet waits in its queue:
nothing is lost, and the live view lags by at most ``MAX_YIELD``.
"""

from __future__ import annotations

import asyncio
import contextlib
import weakref
from collections.abc import Iterator

# bench.proxy (with its earlier httpx client), 20 streams x 10 rounds, A/B on 2 idle cores (added
# TTFB p50 / p99, ms): 0.01 s and 0.05 s gave 13-25 / 18-111; 0.03 s and 0.25 s give 12-16 /
# 22-25. A burst's first bytes arrive over tens of milliseconds, and the recorders' database
# work between two yields is not interruptible: they wait for the whole burst, not a gap in it.
QUIET = 0.03  # seconds without a waiting request before recording goes on
MAX_YIELD = 0.25  # seconds a recorder waits at most, then as long unhindered


class _Traffic:
    """One event loop's requests waiting for their first byte."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.waiting = 0
        self.last = float("-inf")  # when the last one stopped waiting

    def busy(self) -> bool:
        return self.waiting > 0 or self.loop.time() - self.last < QUIET


_per_loop: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Traffic] = (
    weakref.WeakKeyDictionary()
)


def _traffic() -> _Traffic:
    loop = asyncio.get_running_loop()
    found = _per_loop.get(loop)
    if found is None:
        found = _per_loop[loop] = _Traffic(loop)
    return found


class FirstByte:
    """One forwarded request: ``sent()`` once its first byte (or its error response) went to
    the app; leaving the ``waiting`` block does the same."""

    def __init__(self, traffic: _Traffic) -> None:
        self._traffic = traffic
        self._done = False

    def sent(self) -> None:
        if not self._done:
            self._done = True
            self._traffic.waiting -= 1
            self._traffic.last = self._traffic.loop.time()


@contextlib.contextmanager
def waiting() -> Iterator[FirstByte]:
    """The forwarder's side: the request waits for its first byte inside this block."""
    traffic = _traffic()
    traffic.waiting += 1
    first = FirstByte(traffic)
    try:
        yield first
    finally:
        first.sent()


class Yielder:
    """A recorder's side: ``await yielder()`` before each piece of work."""

    def __init__(self) -> None:
        self._free_until = float("-inf")

    async def __call__(self) -> None:
        traffic = _traffic()
        now = traffic.loop.time()
        if now < self._free_until or not traffic.busy():
            return
        deadline = now + MAX_YIELD
        while traffic.busy() and traffic.loop.time() < deadline:
            await asyncio.sleep(QUIET / 2)
        self._free_until = traffic.loop.time() + MAX_YIELD
