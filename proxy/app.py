"""The recording proxy's ASGI app: ``/proxy/<provider>/…`` and ``/proxy/t/<token>/<provider>/…``,
where ``<provider>`` is a provider, ``azure``, ``vertex`` or a named upstream
(``upstream.hosts``).

It is routed ahead of Django (``turnscope.asgi``), on the daphne the app already runs: Django's
middleware would add headers of its own (CSP, X-Frame-Options, cookies), refuse a POST without a
CSRF token and put a request/response cycle in front of every byte; a plain ASGI app controls the
response headers exactly and adds next to no latency.

For each request:

1. The Turnscope token (``X-Turnscope-Token`` or the path form) names the user; missing or wrong:
   401 in the provider's error shape, nothing forwarded. ``X-Turnscope-Conversation`` must name
   one of that user's conversations (else 404, nothing forwarded). A body over
   ``TURNSCOPE_PROXY_MAX_BODY_BYTES``: 413, nothing forwarded.
2. The request goes to the provider (``upstream.forward``) with every header the app sent but the
   hop-by-hop ones, ``Host`` and Turnscope's own (``X-Turnscope-*``, and the browser's ``Cookie``
   and CSRF header: a logged-in browser opening a proxy URL sends them). The provider credentials
   (``x-api-key``, ``Authorization``, ``x-goog-api-key``, ``?key=``, Azure's ``api-key``,
   Vertex AI's ``Authorization: Bearer`` Google token) pass through and are kept
   nowhere: not in a recording, not in a log line. ``Accept-Encoding`` is narrowed to what the
   recorder can decode (gzip, deflate, identity).
3. The app gets the provider's status, headers (less hop-by-hop ones and ``Set-Cookie``: the
   proxy answers on Turnscope's origin) and body bytes exactly, each
   chunk as it arrives: the raw bytes, never decoded or re-encoded, so a gzip-encoded response
   reaches the app gzip-encoded, byte for byte (the recorder decodes its own copy). Every
   response carries ``ISOLATION``: a browser never runs, sniffs or frames what a provider sent.
4. A recorded endpoint's exchange goes to the capture log first (``proxy.capture``): each chunk
   is committed there before the app gets it, and recording reads it from there (its own task,
   ``proxy.recorder``, which yields to every request still waiting for its first byte:
   ``proxy.priority``). Upstream unreachable: 502, timing out before the response: 504, both in
   the provider's shape and recorded as a failed turn. The app disconnecting closes the upstream
   request; the turn ends interrupted with what streamed. The provider breaking off mid-response
   breaks off the app's response too, after exactly the bytes it got (the connection is closed
   without the response's end, so its SDK raises as it would talking to the provider), and the
   turn ends interrupted.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import re
import time
from typing import Any

import orjson
from asgiref.sync import sync_to_async
from django.conf import settings

from proxy import capture, endpoints, paths, priority, threads
from upstream import client as upstream
from upstream import errors, forward, hosts

log = logging.getLogger("turnscope.proxy")

PREFIX = "/proxy/"
HOP_BY_HOP = frozenset({
    b"connection", b"keep-alive", b"proxy-authenticate", b"proxy-authorization", b"te",
    b"trailer", b"trailers", b"transfer-encoding", b"upgrade", b"proxy-connection",
})
# Answered here: the server read the whole body before the request goes on, and a client that
# sees this header waits for the provider's "100 Continue" before it sends the body.
ANSWERED = frozenset({b"expect"})
# Turnscope's own: the browser's cookies (its session and CSRF token on this origin), Django's
# CSRF header and the API's token scheme. None of them is a provider's; they never leave.
APP_HEADERS = frozenset({b"cookie", b"cookie2", b"x-csrftoken"})
API_TOKEN_SCHEME = b"token "  # ``Authorization: Token <key>`` is Turnscope's API, no provider's
# What an upstream response may not do to Turnscope's origin (the proxy answers on it): set or
# clear its cookies and storage, or weaken the headers below.
DROPPED_RESPONSE = frozenset({
    b"set-cookie", b"set-cookie2", b"clear-site-data", b"x-content-type-options",
    b"referrer-policy",
})
# Every proxy response is inert in a browser (it is the provider's bytes, on Turnscope's origin):
# no script, no plugin, no subresource, an opaque origin (sandbox), never sniffed as HTML, never
# framed, no referrer. SDK clients read none of these.
ISOLATION = (
    (b"content-security-policy", b"sandbox; default-src 'none'; frame-ancestors 'none'"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
)
TOKEN_HEADER = b"x-turnscope-token"
CONVERSATION_HEADER = b"x-turnscope-conversation"
DECODABLE = ("gzip", "deflate", "identity")
TOKEN_TTL = 5.0  # seconds a checked token is trusted without asking the database again
TOKEN_REFRESH = TOKEN_TTL / 2  # older than this, a request starts the next check meanwhile

_TOKEN = re.compile(r"^[A-Za-z0-9]{1,128}$")
_tokens: dict[str, tuple[float, Any]] = {}  # key -> (when it was checked, its user)
_checking: dict[str, asyncio.Task[Any]] = {}  # key -> the check under way


def route(path: str) -> tuple[str, str, str] | None:
    """``(provider, path below its prefix, token from the path or "")``, or None."""
    if not path.startswith(PREFIX):
        return None
    rest = path[len(PREFIX):]
    token = ""
    if rest.startswith("t/"):
        token, _, rest = rest[2:].partition("/")
    provider, _, below = rest.partition("/")
    if hosts.find(provider) is None:  # a provider, Azure, Vertex AI or a named upstream
        return None
    return provider, "/" + below, token


class Unavailable(Exception):
    """The token could not be checked (the database is unreachable)."""


def _lookup(key: str) -> Any:
    from django.db import InterfaceError, OperationalError, close_old_connections, connection
    from rest_framework.authtoken.models import Token

    for attempt in range(2):
        close_old_connections()  # a pool thread's connection may have gone stale since last time
        try:
            token = Token.objects.select_related("user").filter(key=key).first()
            break
        except (OperationalError, InterfaceError):
            # The connection died under us (the database restarted since it was opened): once
            # more on a new one before the request is refused with a 503.
            if attempt:
                raise
            log.warning("proxy: a stale database connection, trying a new one")
            connection.close()
    if token is None or not token.user.is_active:
        return None
    return token.user


async def user_for(key: str) -> Any:
    """The active user whose Turnscope token is ``key``, or None; ``Unavailable`` when the
    database cannot say. The lookup is on every request's path to its first byte, so a checked
    token is trusted for ``TOKEN_TTL`` seconds (a deleted token stops working within that
    time), checked again in the background once it is ``TOKEN_REFRESH`` old (a steady client
    never waits for the database), and requests arriving together share one check (a burst of
    twenty is one query, not twenty in a queue for the pool's threads)."""
    if not key or not _TOKEN.match(key):
        return None
    hit = _tokens.get(key)
    if hit is not None:
        age = time.monotonic() - hit[0]
        if age < TOKEN_TTL:
            if age >= TOKEN_REFRESH:
                _check(key)
            return hit[1]
    # shielded: a request that goes away does not cancel the check the others wait for
    return await asyncio.shield(_check(key))


def _check(key: str) -> asyncio.Task[Any]:
    """The check of ``key`` under way on this loop, or a new one."""
    loop = asyncio.get_running_loop()
    found = _checking.get(key)
    if found is not None and not found.done() and found.get_loop() is loop:
        return found
    task = _checking[key] = loop.create_task(_checked(key))

    def done(finished: asyncio.Task[Any]) -> None:
        if _checking.get(key) is finished:
            del _checking[key]
        if not finished.cancelled():
            finished.exception()  # a background check's failure is logged in ``_checked``

    task.add_done_callback(done)
    return task


async def _checked(key: str) -> Any:
    started = time.monotonic()
    # a pool thread, not the database thread the recorders write from: never queued behind them
    try:
        user = await sync_to_async(_lookup, thread_sensitive=False)(key)
    except Exception as exc:
        log.error("proxy: could not check a token (%s)", type(exc).__name__, exc_info=True)
        raise Unavailable from exc
    if user is None:
        _tokens.pop(key, None)  # deleted or deactivated: refused from now on
        return None
    if len(_tokens) > 10_000:
        _tokens.clear()
    _tokens[key] = (started, user)
    return user


def _header(headers: list[tuple[bytes, bytes]], name: bytes) -> str:
    for key, value in headers:
        if key.lower() == name:
            return value.decode("latin-1").strip()
    return ""


def _accept_encoding(value: bytes) -> bytes:
    """The app's Accept-Encoding narrowed to what the recorder decodes (its preferences kept)."""
    kept = []
    for item in value.decode("latin-1").split(","):
        name = item.split(";")[0].strip().lower()
        if name in DECODABLE:
            kept.append(item.strip())
    return ", ".join(kept).encode() if kept else b"identity"


def forwarded_headers(headers: list[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    """What goes to the provider: the app's headers less hop-by-hop ones (and those the
    Connection header names), Host, Content-Length (set from the body) and Turnscope's own
    (``X-Turnscope-*``, and the browser's cookies and CSRF token for this origin)."""
    named = {n.strip().lower().encode() for k, v in headers if k.lower() == b"connection"
             for n in v.decode("latin-1").split(",")}
    out = []
    for key, value in headers:
        name = key.lower()
        if (name in HOP_BY_HOP or name in named or name in ANSWERED
                or name in (b"host", b"content-length")
                or name in APP_HEADERS or name.startswith(b"x-turnscope-")
                or (name == b"authorization" and value[:6].lower() == API_TOKEN_SCHEME)):
            continue
        if name == b"accept-encoding":
            value = _accept_encoding(value)
        out.append((key, value))
    return out


def response_headers(raw: list[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    """What the app gets of the provider's headers: all but hop-by-hop ones and those that
    would act on Turnscope's origin (cookies, Clear-Site-Data), with ``ISOLATION`` added."""
    named = {n.strip().lower().encode() for k, v in raw if k.lower() == b"connection"
             for n in v.decode("latin-1").split(",")}
    return [(k, v) for k, v in raw if k.lower() not in HOP_BY_HOP and k.lower() not in named
            and k.lower() not in DROPPED_RESPONSE] + list(ISOLATION)


async def _respond(send: Any, status: int, body: bytes) -> None:
    await send({"type": "http.response.start", "status": status, "headers": [
        (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
        *ISOLATION]})
    await send({"type": "http.response.body", "body": body})


async def _error(send: Any, provider: str, status: int, code: str, message: str) -> None:
    await _respond(send, status, errors.body(provider, status, code, message))


async def _read_body(receive: Any, limit: int) -> bytes | None:
    """The request body, or None once it passes ``limit`` bytes (or the client went away)."""
    body = bytearray()
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        body += message.get("body", b"")
        if len(body) > limit:
            return None
        if not message.get("more_body"):
            return bytes(body)


async def application(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] != "http":
        return
    found = route(scope["path"])
    if found is None:
        served = ", ".join(f"/proxy/{name}" for name in hosts.names())
        await _respond(send, 404, orjson.dumps({"error": {"message": (
            f"Turnscope proxies {served} only (Azure OpenAI once TURNSCOPE_UPSTREAM_AZURE is "
            "set, other OpenAI-compatible hosts named in TURNSCOPE_UPSTREAMS).")}}))
        return
    service, path, path_token = found
    host = hosts.find(service)
    assert host is not None  # route found it
    provider = hosts.wire_for(host, path)  # whose wire format, and error shape, it speaks
    problem = paths.refusal(path)
    if problem is not None:
        await _error(send, provider, 400, "invalid_path", problem + " Nothing was sent to the "
                     "provider.")
        return
    path = paths.normalized(path)
    with priority.waiting() as first:  # forwarding comes before any recording
        await _proxy(scope, receive, send, provider, path, path_token, first, service)


async def _proxy(scope: dict[str, Any], receive: Any, send: Any, provider: str, path: str,
                 path_token: str, first: priority.FirstByte, service: str = "") -> None:
    service = service or provider
    headers = list(scope.get("headers") or [])
    limit = int(getattr(settings, "TURNSCOPE_PROXY_MAX_BODY_BYTES", 32 * 1024 * 1024))
    declared = _header(headers, b"content-length")
    too_large = f"The request body is larger than Turnscope's limit of {limit} bytes."
    if declared.isdigit() and int(declared) > limit:
        await _error(send, provider, 413, "request_too_large", too_large)
        return
    body = await _read_body(receive, limit)
    if body is None:
        await _error(send, provider, 413, "request_too_large", too_large)
        return
    try:
        user = await user_for(path_token or _header(headers, TOKEN_HEADER))
    except Unavailable:
        await _error(send, provider, 503, "turnscope_unavailable",
                     "Turnscope could not check the token; nothing was sent to the provider.")
        return
    if user is None:
        await _error(send, provider, 401, "invalid_turnscope_token",
                     "Turnscope needs a valid token (X-Turnscope-Token header, or the base URL "
                     "/proxy/t/<token>/" + service + "); nothing was sent to the provider.")
        return
    conversation = None
    wanted = _header(headers, CONVERSATION_HEADER)
    if wanted:
        conversation = await sync_to_async(threads.owned, thread_sensitive=False)(user, wanted)
        if conversation is None:
            await _error(send, provider, 404, "conversation_not_found",
                         "X-Turnscope-Conversation names no conversation of yours; nothing was "
                         "sent to the provider.")
            return
    method = scope["method"]
    query = scope.get("query_string", b"")
    target = upstream.url(service, paths.encoded(path), query)
    endpoint = endpoints.recorded(service, method, path)
    recorder = None
    if endpoint is not None:
        recorder = capture.hub().open(user=user, endpoint=endpoint, body=body, url=target,
                                      api_version=_header(headers, b"anthropic-version") or None,
                                      conversation=conversation)
    try:
        await _forward(provider, method, target, forwarded_headers(headers), body, receive,
                       send, recorder, first)
    finally:
        if recorder is not None and not recorder.started:  # a bug before any response
            recorder.failed(502, "proxy_error", "Turnscope's proxy failed before the provider "
                            "answered.")


async def _forward(provider: str, method: str, target: str, headers: list[tuple[bytes, bytes]],
                   body: bytes, receive: Any, send: Any, recorder: capture.Capture | None,
                   first: priority.FirstByte) -> None:
    try:
        response = await forward.send(method, target, headers=headers, content=body)
    except (forward.Timeout, forward.Unsendable, forward.Unreachable) as exc:
        status, code, message = _not_forwarded(exc)
        if recorder is not None:
            recorder.failed(status, code, message)
        await _error(send, provider, status, code, message)
        return
    raw_headers = response.raw_headers
    if recorder is not None:
        recorder.response(response.status_code, raw_headers)
    me = asyncio.current_task()
    gone = asyncio.Event()
    done = False

    async def watch() -> None:
        # the app going away cancels the forwarding: the upstream request is closed at once
        while (await receive())["type"] != "http.disconnect":
            pass
        if not done:  # (a server also says "disconnect" once the response is complete)
            gone.set()
            if me is not None:
                me.cancel()

    watcher = asyncio.ensure_future(watch())
    try:
        await send({"type": "http.response.start", "status": response.status_code,
                    "headers": response_headers(raw_headers)})
        async for chunk in response.iter_raw():
            if recorder is not None:
                await recorder.append(chunk)  # in the capture log before the app has it
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
            first.sent()
        if recorder is not None:
            recorder.end("complete")
        done = True
        await send({"type": "http.response.body", "body": b"", "more_body": False})
    except asyncio.CancelledError:
        if not gone.is_set():
            raise
        # the app disconnected: swallow our own cancellation, the response is over
        if me is not None:
            me.uncancel()
    except forward.BrokeOff as exc:
        # the provider broke off mid-response: so does the app's response, after exactly the
        # bytes it got, without its end (its SDK raises, as it would talking to the provider)
        done = True
        log.warning("proxy: %s stopped mid-response (%s)", provider, exc)
        if recorder is not None:
            recorder.end("cut")
        await _break_off(send)
    finally:
        watcher.cancel()
        if recorder is not None:
            recorder.end("gone")
        with contextlib.suppress(Exception):
            await asyncio.shield(response.aclose())


def _not_forwarded(exc: forward.ForwardError) -> tuple[int, str, str]:
    """The app's answer (status, code, message) to a request that got no response."""
    if isinstance(exc, forward.Timeout):
        return (504, "upstream_timeout",
                "The provider did not answer in time (Turnscope's proxy gave up).")
    if isinstance(exc, forward.Unsendable):
        return (400, "invalid_request_header",
                f"Turnscope's proxy cannot forward this request: {exc}. Nothing was sent.")
    return 502, "upstream_unreachable", f"Turnscope's proxy could not reach the provider ({exc})."


class ResponseCut(Exception):
    """Raised out of the app to make a server close a response mid-way (uvicorn does)."""


async def _break_off(send: Any) -> None:
    """Close the app's connection without ending its response. Under daphne (``send`` is its
    reply function bound to the request's protocol) the connection is closed once what was
    sent is written out; any other server closes the connection of an app that raises
    mid-response."""
    protocol = send.args[0] if isinstance(send, functools.partial) and send.args else None
    transport = getattr(protocol, "transport", None)
    if transport is not None and hasattr(transport, "loseConnection"):
        transport.loseConnection()
        return
    raise ResponseCut("the provider broke off the response")


def redacted_path(text: str) -> str:
    """A request line as it may be logged: no path token, no credential (``?key=``, or any
    query parameter that holds one), exactly as every other log line."""
    from guards.redaction import redact_log_line

    return redact_log_line(text)


def redact_access_log() -> None:
    """Daphne's access log writes every request's path with its query straight to a stream (not
    through ``logging``): the path-form token and keys in query parameters would land in it.
    Its entries go through the log redaction (``redacted_path``) instead."""
    try:
        from daphne.access import AccessLogGenerator
    except ImportError:
        return
    original = AccessLogGenerator.write_entry
    if getattr(original, "redacting", False):
        return

    def write_entry(self: Any, host: Any, date: Any, request: str, *args: Any,
                    **kwargs: Any) -> Any:
        return original(self, host, date, redacted_path(str(request)), *args, **kwargs)

    write_entry.redacting = True  # type: ignore[attr-defined]
    AccessLogGenerator.write_entry = write_entry


def routed(fallback: Any) -> Any:
    """``fallback`` (Django) with ``/proxy/`` taken off ahead of it."""

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"].startswith(PREFIX):
            await application(scope, receive, send)
        else:
            await fallback(scope, receive, send)

    return app
