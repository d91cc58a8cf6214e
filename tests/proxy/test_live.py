"""A proxied stream while it is in flight, and Gemini's JSON-array stream form."""

from __future__ import annotations

import threading
import time

import httpx
import pytest

from conversations.ingest import ResponseFile, ingest
from conversations.models import Turn
from live import bundled
from tests.proxy.conftest import GOOGLE_KEY, wait_recorded
from tests.proxy.test_failures import MESSAGES_BODY, headers
from tests.proxy.test_sdk import portable, served_context
from upstream.recorded import reply

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_list_shows_a_proxied_stream_live(upstream, proxy_url, token, owner, client):
    raw = bundled.sample("anthropic-tides").responses[0].raw.encode()
    upstream.add(reply("anthropic", raw, pace=0.03))
    client.force_login(owner)

    def app() -> None:
        with httpx.Client(timeout=30) as http:
            http.post(f"{proxy_url}/proxy/anthropic/v1/messages", content=MESSAGES_BODY,
                      headers=headers(token))

    streaming = threading.Thread(target=app)
    streaming.start()
    live_seen = False
    deadline = time.monotonic() + 20
    while streaming.is_alive() and time.monotonic() < deadline:
        if 'class="badge live"' in client.get("/").content.decode():
            live_seen = streaming.is_alive()
            break
        time.sleep(0.05)
    streaming.join(30)
    wait_recorded()
    assert live_seen, "the list never showed the proxied stream as live"
    assert Turn.objects.get(role="agent").status == "complete"
    assert 'class="badge live"' not in client.get("/").content.decode()


def test_gemini_json_array_stream_is_passed_through_and_recorded(upstream, proxy_url, token,
                                                                 owner):
    raw = bundled.sample("gemini-lighthouses").responses[0].raw.encode()
    upstream.add(reply("google", raw, pace=0.01))
    with httpx.Client(timeout=30) as http:
        response = http.post(
            f"{proxy_url}/proxy/google/v1beta/models/gemini-2.5-flash:streamGenerateContent",
            content=b'{"contents": [{"role": "user", "parts": [{"text": "Lighthouses?"}]}]}',
            headers={"x-goog-api-key": GOOGLE_KEY, "content-type": "application/json",
                     "x-turnscope-token": token})
    assert response.status_code == 200
    assert response.content == upstream.sent[0]
    assert response.content.startswith(b"[{") and response.content.endswith(b"]")
    wait_recorded()
    turn = Turn.objects.get(role="agent")
    assert turn.status == "complete"
    request = upstream.requests[0]
    summary = ingest("google", [ResponseFile("array", upstream.sent[0],
                                             served_context(upstream, request))], owner=owner)
    assert portable(turn) == portable(summary.turn)
    assert any(e.kind == "message" and e.attributions.exists() for e in turn.events.all())
