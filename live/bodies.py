"""Request bodies over their endpoint's cap are refused by daphne before they are read.

Daphne calls the application only once a request's whole body has arrived: Twisted spools it
(in memory under 100 kB, else a temporary file) and daphne then hands it over. So a cap the app
checks (Django's, the proxy's) comes after the body was received whole — a declared 1 GiB body on
the login page was a 1 GB temporary file, and, as Twisted parses a urlencoded or multipart POST
into memory for its own ``request.args`` (which daphne never reads), 1 GB of memory too. An ASGI
middleware cannot help: nothing of the app runs before the body is in.

So the refusal happens where the body is received, in daphne's request (``WebRequest``):

* when the headers are in (``gotLength``), the cap of the request's path is known (``cap``): a
  declared ``Content-Length`` over it is answered 413 at once, and nothing of the body is kept;
* each piece of the body (``handleContentChunk``) is counted: a chunked body is cut as soon as it
  passes the cap, with the same 413, and what was spooled is deleted;
* Twisted's form parsing is off: daphne hands the raw body to the app, which parses it itself.

A refused request's connection stops being HTTP: the 413 is written, the write side closed, and
whatever the client still sends is read and dropped (so it can finish sending and read the
answer) for at most ``LINGER`` seconds, then the connection is dropped. Nothing reaches the app.
Memory stays flat and a temporary file never grows past its endpoint's cap.

This patches daphne's and Twisted's internals: ``tests/live/test_bodies.py`` pins the code it was
written against (as ``live.transport``'s canaries do) and fails when it changes.
"""

from __future__ import annotations

import logging
from io import BytesIO
from typing import Any
from urllib.parse import unquote_to_bytes

from daphne.http_protocol import WebRequest
from django.conf import settings

log = logging.getLogger("turnscope.http")

LINGER = 3.0  # seconds a refused request's remaining body is read and dropped

# The endpoints that take files (upload page, the API's import and ingest): their cap is the
# per-upload limit. The proxy has its own. Everything else (pages, forms, API JSON, the login)
# is capped at TURNSCOPE_MAX_UPLOAD_BYTES, Django's own DATA_UPLOAD_MAX_MEMORY_SIZE.
UPLOAD_PATHS = (b"/upload/", b"/api/v1/conversations/import", b"/api/v1/conversations/ingest")
PROXY_PREFIX = b"/proxy/"

_got_length = WebRequest.gotLength
_handle_content_chunk = WebRequest.handleContentChunk
_request_received = WebRequest.requestReceived


def cap(target: bytes) -> int:
    """The largest body the request target ``target`` (path and query, as sent) may carry."""
    path = unquote_to_bytes(target.split(b"?", 1)[0])
    if path.startswith(PROXY_PREFIX):
        return int(settings.TURNSCOPE_PROXY_MAX_BODY_BYTES)
    if path.rstrip(b"/") in {p.rstrip(b"/") for p in UPLOAD_PATHS}:
        return int(getattr(settings, "TURNSCOPE_IMPORT_MAX_BYTES", 512 * 1024 * 1024))
    return int(settings.TURNSCOPE_MAX_UPLOAD_BYTES)


def _answer(limit: int, target: bytes) -> bytes:
    """The 413, in the provider's error shape under ``/proxy/<provider>/`` (an SDK reads it as
    its provider's own), else Turnscope's."""
    from upstream import errors

    message = (f"The request body is larger than this endpoint's limit of {limit} bytes; "
               "nothing of it was read or forwarded.")
    path = unquote_to_bytes(target.split(b"?", 1)[0])
    provider = ""
    if path.startswith(PROXY_PREFIX):
        rest = path[len(PROXY_PREFIX):].decode("latin-1")
        if rest.startswith("t/"):
            rest = rest[2:].partition("/")[2]
        provider = rest.partition("/")[0]
    # A provider's own shape; any other prefix gets the common one (``errors.body``).
    body = errors.body(provider, 413, "request_too_large", message)
    return (b"HTTP/1.1 413 Content Too Large\r\nContent-Type: application/json\r\n"
            b"Content-Length: " + str(len(body)).encode() + b"\r\nConnection: close\r\n"
            b"Cache-Control: no-store\r\nX-Content-Type-Options: nosniff\r\n\r\n" + body)


def _drop(data: bytes) -> None:
    """A refused request's channel: what still arrives is read and dropped."""


def _refuse(request: Any, declared: int | None) -> None:
    request._turnscope_refused = True
    spooled, request.content = request.content, BytesIO()
    if spooled is not None:
        spooled.close()  # a temporary file is deleted as it is closed
    channel = request.channel
    channel.dataReceived = _drop  # nothing more is parsed: the request never reaches the app
    channel._send100Continue = lambda: None  # no "100 Continue" after the answer
    transport = channel.transport
    target = getattr(channel, "_path", b"")
    log.warning("refused a request body of %s bytes for %s (limit %s)",
                declared if declared is not None else "more than the limit",
                _logged(target), request._turnscope_cap)
    transport.write(_answer(request._turnscope_cap, target))
    close_writing = getattr(transport, "loseWriteConnection", None)
    if close_writing is not None:
        close_writing()
    else:
        transport.loseConnection()
    from twisted.internet import reactor  # daphne installs its own first: not at import

    reactor.callLater(LINGER, _abort, transport)


def _abort(transport: Any) -> None:
    if getattr(transport, "connected", False) and not getattr(transport, "disconnected", False):
        transport.abortConnection()


def _logged(target: bytes) -> str:
    from guards.redaction import redact_log_line

    return redact_log_line(target.decode("latin-1")[:300])


def _gotLength(self: Any, length: int | None) -> None:
    self._parsePOSTFormSubmission = False  # daphne hands the raw body on; the app parses it
    self._turnscope_refused = False
    self._turnscope_seen = 0
    self._turnscope_cap = cap(getattr(self.channel, "_path", b"") or b"")
    if length is not None and length > self._turnscope_cap:
        self.content = None
        _refuse(self, length)
        return
    _got_length(self, length)


def _handleContentChunk(self: Any, data: bytes) -> None:
    if self._turnscope_refused:
        return
    self._turnscope_seen += len(data)
    if self._turnscope_seen > self._turnscope_cap:
        _refuse(self, None)
        return
    _handle_content_chunk(self, data)


def _requestReceived(self: Any, command: bytes, path: bytes, version: bytes) -> None:
    if getattr(self, "_turnscope_refused", False):
        return  # the rest of a refused body arrived in the same read: the app never sees it
    _request_received(self, command, path, version)


def limit_request_bodies() -> None:
    """Install the caps on daphne's requests (idempotent)."""
    WebRequest.gotLength = _gotLength
    WebRequest.handleContentChunk = _handleContentChunk
    WebRequest.requestReceived = _requestReceived
