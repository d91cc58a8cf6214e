"""The recording proxy's connection to the providers: a request forwarded exactly, its response
read raw.

The proxy's own client, not ``upstream.client``'s httpx: the proxy's first byte waits for it.
Twenty streaming requests at once from one event loop, against a local upstream answering in
under a millisecond, waited 42-51 ms at p50 (86-106 ms at p99) for their first bytes through
httpx and 6 ms (9 ms) through aiohttp; a bare socket client, 3.5 ms. httpx's pool and its
per-read work took the rest, and in the proxy that was most of its added time to first byte
(``bench.proxy``). Live calls, one per user action, stay on ``upstream.client``.

What the provider gets is what the app sent: the headers it sent, in its order and spelling,
and no header the client would add on its own (``Accept``, ``Accept-Encoding``,
``User-Agent``, a ``Content-Type`` for the body) unless the app sent it; the URL as built
(``proxy.paths``), never re-quoted; no cookie kept from an earlier response (one pool serves
every user); no proxy from the environment; no redirect followed. What the app gets back is
the provider's bytes as they came: never decoded (``auto_decompress`` is off), each read as it
arrives.

    response = await forward.send("POST", url, headers=[(b"x-api-key", key), ...], content=body)
    try:
        async for chunk in response.iter_raw(): ...
    finally:
        await response.aclose()
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import AsyncIterator, Sequence

import aiohttp
from multidict import CIMultiDict
from yarl import URL

from upstream import client

# What aiohttp adds to a request that does not set it: left out, unless the app sent it.
_AUTO_HEADERS = frozenset({"Accept", "Accept-Encoding", "User-Agent", "Content-Type"})

_sessions: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, aiohttp.ClientSession] = (
    weakref.WeakKeyDictionary()
)


class ForwardError(Exception):
    """The provider could not be reached, or its response broke off."""


class Timeout(ForwardError):
    """No connection, or no byte for a read timeout's time (``upstream.client.timeouts``)."""


class Unreachable(ForwardError):
    """No response: the connection failed or the provider's answer was not HTTP."""


class Unsendable(ForwardError):
    """A header value that is not UTF-8: aiohttp writes header values as UTF-8, so any other
    bytes would reach the provider changed. Refused, nothing sent."""


class BrokeOff(ForwardError):
    """The response stopped before its end (the connection closed, or fell silent)."""


class Response:
    """A provider's response whose headers are in; its body is read with ``iter_raw``."""

    def __init__(self, response: aiohttp.ClientResponse) -> None:
        self._response = response
        self.status_code = response.status
        self.raw_headers: list[tuple[bytes, bytes]] = list(response.raw_headers)
        self._whole = False

    async def iter_raw(self) -> AsyncIterator[bytes]:
        """The body's bytes as they arrive (chunked transfer coding removed, nothing else);
        ``BrokeOff`` when it stops before its end."""
        try:
            async for chunk in self._response.content.iter_any():
                yield chunk
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise BrokeOff(type(exc).__name__) from exc
        self._whole = True

    async def aclose(self) -> None:
        """Done with it: the connection goes back to the pool when the body was read whole,
        else it is closed (the provider stops sending)."""
        if self._whole:
            self._response.release()
        else:
            self._response.close()


def session() -> aiohttp.ClientSession:
    """The running loop's pool of connections to the providers (made on first use)."""
    loop = asyncio.get_running_loop()
    found = _sessions.get(loop)
    if found is None or found.closed:
        # A session holds its loop, so a loop that ended without ``aclose`` stays here: let go
        # of those (their sockets close with them).
        for ended in [other for other in _sessions if other.is_closed()]:
            del _sessions[ended]
        found = _sessions[loop] = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=0, keepalive_timeout=60),
            cookie_jar=aiohttp.DummyCookieJar(),
            auto_decompress=False,
            trust_env=False,
        )
    return found


def _timeout() -> aiohttp.ClientTimeout:
    # read per request: a changed setting applies to the next request, as for a new client
    httpx_timeout = client.timeouts()
    return aiohttp.ClientTimeout(total=None, connect=httpx_timeout.connect,
                                 sock_read=httpx_timeout.read)


async def send(method: str, target: str, *, headers: Sequence[tuple[bytes, bytes]] = (),
               content: bytes = b"") -> Response:
    """Send a request; the response once its headers are in. Raises ``Timeout`` (connect or
    first byte), ``Unreachable`` and ``Unsendable``."""
    try:
        # UTF-8 both ways: what aiohttp writes is then the app's bytes, exactly
        sent = CIMultiDict((k.decode("latin-1"), v.decode("utf-8")) for k, v in headers)
    except UnicodeDecodeError as exc:
        raise Unsendable("a header value is not UTF-8") from exc
    try:
        response = await session().request(
            method, URL(target, encoded=True), headers=sent, data=content or None,
            skip_auto_headers=[name for name in _AUTO_HEADERS if name not in sent],
            allow_redirects=False, timeout=_timeout())
    except TimeoutError as exc:
        raise Timeout(type(exc).__name__) from exc
    except aiohttp.ClientError as exc:
        raise Unreachable(type(exc).__name__) from exc
    return Response(response)


async def aclose() -> None:
    """Close the running loop's pool."""
    found = _sessions.pop(asyncio.get_running_loop(), None)
    if found is not None:
        await found.close()
