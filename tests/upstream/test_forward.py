"""The proxy's connection to the providers sends what the app sent, and nothing of its own, and
hands back the provider's bytes as they came."""

from __future__ import annotations

import asyncio
import gzip
import socket
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from tests.servers import served
from upstream import forward
from upstream.recorded import RecordedUpstream, Reply

BODY = b'{"model": "m", "stream": true}'
SSE = (b"event: a\ndata: {}\n\n", b"event: b\ndata: {}\n\n", b"event: c\ndata: {}\n\n")


def _run(upstream: RecordedUpstream, call: Callable[[str], Awaitable[Any]]) -> Any:
    with served(upstream) as server:

        async def go() -> Any:
            try:
                return await call(server.url)
            finally:
                await forward.aclose()

        return asyncio.run(go())


async def _read(url: str, headers: list[tuple[bytes, bytes]], path: str = "/v1/messages"
                ) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
    response = await forward.send("POST", url + path, headers=headers, content=BODY)
    body = bytearray()
    try:
        async for chunk in response.iter_raw():
            body += chunk
    finally:
        await response.aclose()
    return response.status_code, response.raw_headers, bytes(body)


def test_the_provider_gets_the_apps_headers_and_no_header_of_the_clients_own():
    upstream = RecordedUpstream()
    upstream.add(Reply(chunks=SSE))
    status, _, body = _run(upstream, lambda url: _read(url, [
        (b"X-Api-Key", b"sk-test"), (b"anthropic-version", b"2023-06-01"),
        (b"X-Repeated", b"one"), (b"X-Repeated", b"two")]))
    assert (status, body) == (200, b"".join(SSE))
    [request] = upstream.requests
    names = [name for name, _ in request.headers]
    # no Accept, Accept-Encoding, User-Agent or Content-Type the app did not send
    assert sorted(set(names)) == ["anthropic-version", "content-length", "host", "x-api-key",
                                  "x-repeated"]
    assert [v for k, v in request.headers if k == "x-repeated"] == ["one", "two"]
    assert request.body == BODY


def test_headers_the_app_sent_go_as_sent():
    upstream = RecordedUpstream()
    upstream.add(Reply(chunks=SSE))
    _run(upstream, lambda url: _read(url, [
        (b"User-Agent", b"Anthropic/Python 0.70.0"), (b"Accept", b"text/event-stream"),
        (b"Accept-Encoding", b"gzip"), (b"Content-Type", b"application/json")]))
    [request] = upstream.requests
    assert request.header("user-agent") == "Anthropic/Python 0.70.0"
    assert request.header("accept") == "text/event-stream"
    assert request.header("accept-encoding") == "gzip"
    assert request.header("content-type") == "application/json"


def test_a_utf8_header_value_goes_byte_for_byte_and_other_bytes_are_refused():
    upstream = RecordedUpstream()
    upstream.add(Reply(chunks=SSE))
    value = "café ☕".encode()
    _run(upstream, lambda url: _read(url, [(b"x-title", value)]))
    [request] = upstream.requests
    assert request.header("x-title").encode("latin-1") == value  # (the server reads latin-1)

    async def latin1(url: str) -> None:
        await forward.send("POST", url + "/v1/messages", headers=[(b"x-title", b"caf\xe9")],
                           content=BODY)

    with pytest.raises(forward.Unsendable):
        _run(upstream, latin1)
    assert len(upstream.requests) == 1  # nothing sent


def test_an_expect_header_is_answered_by_the_proxy_not_forwarded():
    from proxy.app import forwarded_headers

    sent = forwarded_headers([(b"Expect", b"100-continue"), (b"x-api-key", b"k")])
    assert sent == [(b"x-api-key", b"k")]


def test_the_url_is_sent_as_built_and_the_query_as_it_came():
    upstream = RecordedUpstream()
    upstream.add(Reply(chunks=SSE))
    _run(upstream, lambda url: _read(
        url, [], "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse&x=a%2Fb"))
    [request] = upstream.requests
    assert request.path == "/v1beta/models/gemini-2.5-flash:streamGenerateContent"
    assert request.query == "alt=sse&x=a%2Fb"


def test_a_gzip_encoded_response_comes_back_encoded_byte_for_byte():
    upstream = RecordedUpstream()
    upstream.add(Reply(chunks=SSE, gzip=True))
    _, headers, body = _run(upstream, lambda url: _read(url, [(b"accept-encoding", b"gzip")]))
    assert (b"content-encoding", b"gzip") in [(k.lower(), v) for k, v in headers]
    assert body == upstream.sent[0]
    assert gzip.decompress(body) == b"".join(SSE)


def test_a_cookie_a_provider_set_is_not_sent_on_the_next_request():
    upstream = RecordedUpstream()
    cookie = ("set-cookie", "__cf_bm=USERONE; Path=/; HttpOnly")
    upstream.add(Reply(chunks=SSE, headers=(cookie,)), Reply(chunks=SSE, headers=(cookie,)))

    async def twice(url: str) -> None:
        for _ in range(2):  # by name: a cookie jar keeps no cookie of an IP address anyway
            await _read(url.replace("127.0.0.1", "localhost"), [])

    _run(upstream, twice)
    assert [r.header("cookie") for r in upstream.requests] == [None, None]


def test_a_response_cut_short_breaks_off_after_the_bytes_that_came():
    upstream = RecordedUpstream()
    upstream.add(Reply(chunks=SSE, cut_after=2))
    got = bytearray()

    async def read(url: str) -> None:
        response = await forward.send("POST", url + "/v1/messages", content=BODY)
        try:
            async for chunk in response.iter_raw():
                got.extend(chunk)
        finally:
            await response.aclose()

    with pytest.raises(forward.BrokeOff):
        _run(upstream, read)
    assert bytes(got) == b"".join(SSE[:2])


def test_a_closed_port_is_unreachable_and_a_silent_provider_times_out(settings):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]

    async def closed() -> None:
        try:
            await forward.send("POST", f"http://127.0.0.1:{port}/v1/messages", content=BODY)
        finally:
            await forward.aclose()

    with pytest.raises(forward.Unreachable):
        asyncio.run(closed())

    settings.TURNSCOPE_UPSTREAM_READ_TIMEOUT = 0.3
    upstream = RecordedUpstream()
    upstream.add(Reply(chunks=SSE, first_byte=2.0))
    with pytest.raises(forward.Timeout):
        _run(upstream, lambda url: forward.send("POST", url + "/v1/messages", content=BODY))
