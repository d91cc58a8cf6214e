"""``POST /otlp/v1/traces``: the OTLP/HTTP trace receiver, a plain ASGI app ahead of Django.

As the OTLP specification describes it (protocol/exporter and OTLP/HTTP):

* the body is an ``ExportTraceServiceRequest``, ``application/x-protobuf`` or
  ``application/json``, optionally ``Content-Encoding: gzip``; the answer is an
  ``ExportTraceServiceResponse`` in the request's encoding, 200, with ``partial_success``
  naming how many spans were refused and why (an LLM span that could not be stored);
* a body that cannot be read is a 400 with a ``google.rpc.Status`` (code and message), in the
  request's encoding, not to be retried; over ``TURNSCOPE_OTLP_MAX_BODY_BYTES`` (before or after
  decompression) a 413;
* busy (``TURNSCOPE_OTLP_CONCURRENCY`` exports being stored already) a 429, the database
  unreachable a 503, both with ``Retry-After``: the exporter retries, and a span received twice
  is one turn (``otlp.record``).

Auth: the user's Turnscope token, ``Authorization: Bearer <token>`` or ``X-Turnscope-Token``
(what ``OTEL_EXPORTER_OTLP_HEADERS`` sets), checked as the proxy checks it; missing or wrong: 401.
Plain ASGI, like the proxy, so that Django's middleware adds no CSRF check, cookies or page
headers to a machine's endpoint.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import DatabaseError
from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from otlp import wire

log = logging.getLogger("turnscope.otlp")

PREFIX = "/otlp/"
TRACES = "/otlp/v1/traces"
RETRY_AFTER = b"5"  # seconds an exporter waits before retrying a 429 / 503

# google.rpc.Code values for the errors this receiver answers.
INVALID_ARGUMENT, NOT_FOUND, RESOURCE_EXHAUSTED, UNIMPLEMENTED, UNAVAILABLE, UNAUTHENTICATED = (
    3, 5, 8, 12, 14, 16)

_busy = 0  # exports being read or stored now (one event loop: no lock needed)


def _header(scope: dict[str, Any], name: bytes) -> str:
    for key, value in scope.get("headers") or []:
        if key.lower() == name:
            return str(value.decode("latin-1").strip())
    return ""


def token_of(scope: dict[str, Any]) -> str:
    """The Turnscope token the request carries: ``Authorization: Bearer <token>`` (also
    ``Token <token>``, as the API takes it) or ``X-Turnscope-Token``."""
    authorization = _header(scope, b"authorization")
    scheme, _, value = authorization.partition(" ")
    if scheme.lower() in ("bearer", "token") and value.strip():
        return value.strip()
    return _header(scope, b"x-turnscope-token")


def status_body(code: int, message: str, json: bool) -> bytes:
    """A ``google.rpc.Status`` (code, message; no details), encoded as the request was: two
    fields, written by hand rather than pulling googleapis-common-protos in for them."""
    if json:
        import orjson

        return orjson.dumps({"code": code, "message": message})
    text = message.encode()
    return b"\x08" + _varint(code) + b"\x12" + _varint(len(text)) + text


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


async def _respond(send: Any, status: int, body: bytes, json: bool,
                   extra: list[tuple[bytes, bytes]] | None = None) -> None:
    media = wire.JSON if json else wire.PROTOBUF
    await send({"type": "http.response.start", "status": status, "headers": [
        (b"content-type", media.encode()), (b"content-length", str(len(body)).encode()),
        (b"cache-control", b"no-store"), *(extra or [])]})
    await send({"type": "http.response.body", "body": body})


async def _error(send: Any, status: int, code: int, message: str, json: bool,
                 extra: list[tuple[bytes, bytes]] | None = None) -> None:
    await _respond(send, status, status_body(code, message, json), json, extra)


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


def _limit() -> int:
    return int(getattr(settings, "TURNSCOPE_OTLP_MAX_BODY_BYTES", 16 * 1024 * 1024))


async def application(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] != "http":
        return
    media = _header(scope, b"content-type").split(";")[0].strip().lower()
    json = media == wire.JSON
    if scope["path"].rstrip("/") != TRACES:
        await _error(send, 404, NOT_FOUND, "Turnscope receives OTLP traces at "
                     "/otlp/v1/traces only (set OTEL_EXPORTER_OTLP_ENDPOINT to …/otlp).", json)
        return
    if scope["method"] != "POST":
        await _error(send, 405, UNIMPLEMENTED, "POST an ExportTraceServiceRequest.", json,
                     [(b"allow", b"POST")])
        return
    if media not in (wire.JSON, wire.PROTOBUF):
        await _error(send, 415, INVALID_ARGUMENT, f"unsupported Content-Type {media!r} "
                     f"({wire.PROTOBUF} or {wire.JSON})", json)
        return
    limit = _limit()
    too_large = f"the request body is larger than Turnscope's limit of {limit} bytes"
    declared = _header(scope, b"content-length")
    if declared.isdigit() and int(declared) > limit:
        await _error(send, 413, RESOURCE_EXHAUSTED, too_large, json)
        return
    global _busy
    if _busy >= int(getattr(settings, "TURNSCOPE_OTLP_CONCURRENCY", 4)):
        await _error(send, 429, RESOURCE_EXHAUSTED, "Turnscope is storing other exports; "
                     "retry later.", json, [(b"retry-after", RETRY_AFTER)])
        return
    _busy += 1
    try:
        await _export(scope, receive, send, json, limit, too_large)
    finally:
        _busy -= 1


async def _export(scope: dict[str, Any], receive: Any, send: Any, json: bool, limit: int,
                  too_large: str) -> None:
    from proxy.app import Unavailable, user_for

    body = await _read_body(receive, limit)
    if body is None:
        await _error(send, 413, RESOURCE_EXHAUSTED, too_large, json)
        return
    try:
        user = await user_for(token_of(scope))
    except Unavailable:
        await _error(send, 503, UNAVAILABLE, "Turnscope could not check the token.", json,
                     [(b"retry-after", RETRY_AFTER)])
        return
    if user is None:
        await _error(send, 401, UNAUTHENTICATED, "Turnscope needs a valid token "
                     "(Authorization: Bearer <token>, or X-Turnscope-Token).", json)
        return
    encoding = _header(scope, b"content-encoding")
    try:
        received = await asyncio.to_thread(_decode, body, encoding, scope, limit)
    except wire.TooLarge as exc:
        await _error(send, 413, RESOURCE_EXHAUSTED, str(exc), json)
        return
    except wire.MalformedExport as exc:
        await _error(send, 400, INVALID_ARGUMENT, str(exc), json)
        return
    try:
        rejected, errors = await sync_to_async(_store)(user, received)
    except DatabaseError as exc:
        log.error("otlp: could not store an export (%s)", type(exc).__name__, exc_info=True)
        await _error(send, 503, UNAVAILABLE, "Turnscope could not store the spans now; "
                     "retry later.", json, [(b"retry-after", RETRY_AFTER)])
        return
    response = ExportTraceServiceResponse()
    if rejected:
        response.partial_success.rejected_spans = rejected
        response.partial_success.error_message = "; ".join(errors)[:2000]
    out = (json_format.MessageToJson(response, indent=None).encode() if json
           else response.SerializeToString())
    await _respond(send, 200, out, json)


def _decode(body: bytes, encoding: str, scope: dict[str, Any], limit: int) -> list[wire.Span]:
    media = _header(scope, b"content-type")
    return wire.spans(wire.parse_request(wire.decompress(body, encoding, limit), media))


def _store(user: Any, received: list[wire.Span]) -> tuple[int, list[str]]:
    """Store each LLM call; ``(spans refused, why)``. Spans that are no LLM call are
    acknowledged and not stored."""
    from django.db import close_old_connections

    from otlp import record

    close_old_connections()
    rejected, errors = 0, []
    for call in record.calls(received):
        try:
            record.record(user, call)
        except ValueError as exc:  # this span's content: the others are kept
            rejected += 1
            errors.append(f"{call.name}: {exc}")
            log.warning("otlp: refused %s (%s)", call.name, exc)
    return rejected, errors


def routed(fallback: Any) -> Any:
    """``fallback`` with ``/otlp/`` taken off ahead of it."""

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"].startswith(PREFIX):
            await application(scope, receive, send)
        else:
            await fallback(scope, receive, send)

    return app
