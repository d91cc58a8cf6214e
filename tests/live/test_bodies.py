"""live.bodies: daphne refuses a body over its endpoint's cap before reading it (declared), or as
soon as it passes the cap (chunked); nothing reaches the app. The end-to-end measure (three 1 GiB
attempts, the server's RSS) is ``test_bodies_e2e.py``.

The patch rests on daphne's and Twisted's internals: canaries pin the code it was written
against (an upgrade that changes it fails here: re-read the patch against the new code, then
update the fingerprint)."""

from __future__ import annotations

from types import SimpleNamespace

import orjson
import pytest
from daphne.http_protocol import WebRequest
from twisted.internet.testing import StringTransport
from twisted.web import http

from live import bodies
from tests.support import source_fingerprint


@pytest.fixture
def patched(monkeypatch, settings):
    for name in ("gotLength", "handleContentChunk", "requestReceived"):
        monkeypatch.setattr(WebRequest, name, getattr(WebRequest, name))
    bodies.limit_request_bodies()
    settings.TURNSCOPE_MAX_UPLOAD_BYTES = 1000
    settings.TURNSCOPE_PROXY_MAX_BODY_BYTES = 5000
    settings.TURNSCOPE_IMPORT_MAX_BYTES = 200_000
    later = []
    from twisted.internet import reactor
    monkeypatch.setattr(reactor, "callLater", lambda *a: later.append(a))
    return later


def channel(processed: list) -> tuple[http.HTTPChannel, StringTransport]:
    server = SimpleNamespace(protocol_connected=lambda p: None,
                             protocol_disconnected=lambda p: None)

    class Request(WebRequest):
        def process(self) -> None:
            processed.append(self.content.read())
            self.setResponseCode(200)
            self.finish()

    made = http.HTTPChannel()
    made.requestFactory = Request
    made.factory = SimpleNamespace(server=server, log=lambda request: None)
    transport = StringTransport()
    made.makeConnection(transport)
    return made, transport


def test_a_declared_length_over_the_cap_is_413_before_any_of_the_body(patched):
    processed: list = []
    made, transport = channel(processed)
    made.dataReceived(b"POST /accounts/login/ HTTP/1.1\r\nHost: x\r\nContent-Length: 1001\r\n"
                      b"Content-Type: application/x-www-form-urlencoded\r\n"
                      b"Expect: 100-continue\r\n\r\n")
    answer = transport.value()
    assert answer.startswith(b"HTTP/1.1 413 ")
    assert b"100 Continue" not in answer  # nothing after the answer
    assert b"limit of 1000 bytes" in answer
    made.dataReceived(b"x" * 1001)  # what the client still sends is dropped
    assert processed == [] and transport.value() == answer
    assert patched and patched[0][0] == bodies.LINGER  # the connection goes after a while


def test_a_chunked_body_is_cut_as_it_passes_the_cap(patched):
    processed: list = []
    made, transport = channel(processed)
    made.dataReceived(b"POST /proxy/anthropic/v1/messages HTTP/1.1\r\nHost: x\r\n"
                      b"Transfer-Encoding: chunked\r\n\r\n")
    for _ in range(4):
        made.dataReceived(b"3e8\r\n" + b"y" * 1000 + b"\r\n")
    assert transport.value() == b""  # 4000 bytes: under the proxy's 5000
    chunk = b"3e8\r\n" + b"y" * 1000 + b"\r\n"
    made.dataReceived(chunk + chunk + b"0\r\n\r\n")
    assert transport.value().startswith(b"HTTP/1.1 413 ")
    assert processed == []
    # in the provider's own error shape: an SDK reads it as its provider's 413
    error = orjson.loads(transport.value().partition(b"\r\n\r\n")[2])
    assert error["type"] == "error" and error["error"]["type"] == "request_too_large"


def test_a_body_within_its_cap_reaches_the_app_whole(patched):
    processed: list = []
    made, transport = channel(processed)
    body = b"z" * 150_000
    made.dataReceived(b"POST /upload/ HTTP/1.1\r\nHost: x\r\nContent-Length: 150000\r\n"
                      b"Content-Type: multipart/form-data; boundary=b\r\n\r\n" + body)
    assert processed == [body]
    assert transport.value().startswith(b"HTTP/1.1 200 ")


def test_each_endpoint_has_its_cap(settings):
    settings.TURNSCOPE_MAX_UPLOAD_BYTES = 1
    settings.TURNSCOPE_PROXY_MAX_BODY_BYTES = 2
    settings.TURNSCOPE_IMPORT_MAX_BYTES = 3
    assert bodies.cap(b"/accounts/login/?next=/") == 1
    assert bodies.cap(b"/proxy/t/abc/openai/v1/responses") == 2
    assert bodies.cap(b"/%70roxy/openai/v1/responses") == 2
    assert bodies.cap(b"/upload/") == 3
    assert bodies.cap(b"/api/v1/conversations/import?format=vcr") == 3
    assert bodies.cap(b"/api/v1/conversations/ingest") == 3
    assert bodies.cap(b"/api/v1/conversations") == 1


def test_the_upstream_code_the_patch_rests_on_is_unchanged():
    assert {name: source_fingerprint(code) for name, code in [
        ("Request.gotLength", http.Request.gotLength),
        ("Request.handleContentChunk", http.Request.handleContentChunk),
        ("Request.requestReceived", http.Request.requestReceived),
        ("HTTPChannel.allHeadersReceived", http.HTTPChannel.allHeadersReceived),
        ("HTTPChannel.lineReceived", http.HTTPChannel.lineReceived),
        ("HTTPChannel._send100Continue", http.HTTPChannel._send100Continue),
        ("WebRequest.process", WebRequest.process),
    ]} == {
        "Request.gotLength": "33e3062d638191a9",
        "Request.handleContentChunk": "c171516e5ca7b464",
        "Request.requestReceived": "eb1724c9c32b9b2c",
        "HTTPChannel.allHeadersReceived": "a6e49e4e8b7682de",
        "HTTPChannel.lineReceived": "a1036e59284bb9cc",
        "HTTPChannel._send100Continue": "643b7f6d20ff39a7",
        "WebRequest.process": "1da7a24671a5b42d",
    }
