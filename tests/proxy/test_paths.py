"""Proxy paths: a path goes upstream only to where it says, and it is recorded exactly when it
is forwarded to a recorded endpoint."""

from __future__ import annotations

import socket

import httpx
import orjson
import pytest

from conversations.models import Turn
from live import bundled
from proxy import paths
from tests.proxy.conftest import ANTHROPIC_KEY, wait_recorded
from upstream.recorded import Reply, reply

pytestmark = pytest.mark.django_db(transaction=True)

TIDES = bundled.sample("anthropic-tides").responses[0].raw.encode()
BODY = orjson.dumps({"model": "claude-sonnet-4-6", "max_tokens": 100, "stream": True,
                     "messages": [{"role": "user", "content": "Tides?"}]})


def raw_request(base: str, target: str, token: str) -> tuple[int, bytes]:
    """``GET target`` sent as written (an HTTP client would fold the dot segments itself)."""
    host, port = base.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(f"GET {target} HTTP/1.1\r\nHost: {host}\r\nx-turnscope-token: {token}\r\n"
                     f"x-api-key: {ANTHROPIC_KEY}\r\nConnection: close\r\n\r\n".encode())
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split()[1]), body


@pytest.mark.parametrize("below", [
    "/v1/../admin/", "/v1/%2e%2e/admin/", "/v1/%2E%2e/admin", "/v1/.%2e/admin",
    "/v1/%252e%252e/admin", "/v1/./messages", "/v1/%2e/messages", "/..", "/v1/..%5cadmin",
    "/v1/messages%0d%0aX-Injected:%201", "/v1/models%0a", "/v1/a%00b",
])
def test_dot_segments_and_control_characters_are_a_400_in_the_providers_shape(
    below, upstream, proxy_url, token
):
    upstream.add(Reply(chunks=(b"{}",), content_type="application/json"))
    status, body = raw_request(proxy_url, "/proxy/anthropic" + below, token)
    assert status == 400
    error = orjson.loads(body)
    assert error["type"] == "error" and error["error"]["type"] == "invalid_request_error"
    assert not upstream.requests  # nothing forwarded


def test_the_google_shape_for_a_refused_path(upstream, proxy_url, token):
    status, body = raw_request(proxy_url, "/proxy/google/v1beta/models/../../files", token)
    assert status == 400 and orjson.loads(body)["error"]["status"] == "INVALID_ARGUMENT"


def test_a_doubled_slash_is_forwarded_and_recorded_as_the_endpoint_it_reaches(
    upstream, proxy_url, token
):
    upstream.add(reply("anthropic", TIDES))
    with httpx.Client() as http:
        response = http.post(f"{proxy_url}/proxy/anthropic//v1//messages", content=BODY,
                             headers={"x-api-key": ANTHROPIC_KEY, "x-turnscope-token": token,
                                      "anthropic-version": "2023-06-01",
                                      "content-type": "application/json"})
    assert response.status_code == 200
    assert upstream.requests[0].path == "/v1/messages"
    wait_recorded()
    assert Turn.objects.filter(role=Turn.Role.AGENT).count() == 1


def test_an_encoded_question_mark_stays_in_the_path_and_is_not_recorded(
    upstream, proxy_url, token
):
    upstream.add(reply("anthropic", TIDES))
    with httpx.Client() as http:
        http.post(f"{proxy_url}/proxy/anthropic/v1/messages%3Fbeta=1", content=BODY,
                  headers={"x-api-key": ANTHROPIC_KEY, "x-turnscope-token": token,
                           "content-type": "application/json"})
    [request] = upstream.requests
    assert (request.path, request.query) == ("/v1/messages?beta=1", "")  # not /v1/messages
    wait_recorded()
    assert not Turn.objects.exists()


def test_paths_as_forwarded():
    assert paths.encoded("/v1beta/models/gemini-2.5-flash:streamGenerateContent") == (
        "/v1beta/models/gemini-2.5-flash:streamGenerateContent")
    assert paths.encoded("/v1/a b#c%d") == "/v1/a%20b%23c%25d"
    assert paths.refusal("/v1/messages") is None
    assert paths.refusal("/v1/a..b/c.d") is None  # dots inside a name are a name
