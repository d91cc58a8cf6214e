"""``bench.proxy``'s instrumentation inside the servers: where a proxied request's first byte
waits.

``timed(app)`` wraps an ASGI app (daphne's ``turnscope.asgi``, the recorded upstream): for each
HTTP request it notes when the request reached the app and when the app handed the server the
response body's first bytes, by the request's ``x-bench-via`` header (``direct`` or ``proxy``:
the proxy forwards it, so the upstream tells its direct requests from the proxy's). A task
watches the event loop: how late a 1 ms sleep wakes (the loop's lag: a callback, or another
thread holding the GIL, keeps it from running). ``GET /__bench_timing`` answers the figures so
far as JSON and starts over (the bench asks after its warm-up and at the end).

The servers' own clocks, so the client's queueing is not in them: the proxy's figure minus the
upstream's for the proxied requests is the time the proxy adds inside its process; the client's
added TTFB minus that is the network and the servers' HTTP handling.
"""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict
from typing import Any

import orjson

PATH = "/__bench_timing"
LAG_TICK = 0.001


def _via(scope: dict[str, Any]) -> str:
    for name, value in scope.get("headers") or ():
        if name == b"x-bench-via":
            return value.decode("latin-1")
    return "other"


def timed(app: Any) -> Any:
    firsts: dict[str, list[float]] = defaultdict(list)
    lags: list[float] = []
    watching: list[asyncio.Task[None]] = []

    async def watch() -> None:
        while True:
            started = time.perf_counter()
            await asyncio.sleep(LAG_TICK)
            lags.append(time.perf_counter() - started - LAG_TICK)

    async def report(send: Any) -> None:
        body = orjson.dumps({"first_byte_s": firsts, "loop_lag_s": lags})
        firsts.clear()
        lags.clear()
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"application/json"),
                                (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})

    async def application(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return await app(scope, receive, send)
        if not watching:
            watching.append(asyncio.ensure_future(watch()))
        if scope["path"] == PATH:
            return await report(send)
        arrived = time.perf_counter()
        via = _via(scope)
        sent = False

        # (not daphne's own reply function: a response the upstream cut would not be broken
        # off as the proxy does it under daphne. The bench's upstream never cuts one.)
        async def timed_send(message: dict[str, Any]) -> None:
            nonlocal sent
            await send(message)
            if not sent and message["type"] == "http.response.body":
                sent = True
                firsts[via].append(time.perf_counter() - arrived)

        return await app(scope, receive, timed_send)

    return application


def _daphne_app() -> Any:
    from turnscope.asgi import application as turnscope

    return timed(turnscope)


def __getattr__(name: str) -> Any:
    # ``daphne bench.proxy_timing:application``: Django is set up only when daphne asks
    if name == "application":
        found = globals()["application"] = _daphne_app()
        return found
    raise AttributeError(name)
