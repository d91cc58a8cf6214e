"""The recorder's decoding: one decoder and line splitter for all of a response (a turn cut at
its cap included), and a cap on the decoded size."""

from __future__ import annotations

import httpx
import orjson
import pytest

from conversations.models import Turn
from guards.redaction import WireLines
from live import bundled
from live.models import Recording
from proxy import recorder
from tests.proxy.conftest import ANTHROPIC_KEY, wait_recorded
from upstream.recorded import Reply, reply

pytestmark = pytest.mark.django_db(transaction=True)

TIDES = bundled.sample("anthropic-tides").responses[0].raw.encode()
BODY = orjson.dumps({"model": "claude-sonnet-4-6", "max_tokens": 100, "stream": True,
                     "messages": [{"role": "user", "content": "Tides?"}]})
MB = 1024 * 1024


def post(proxy_url: str, token: str) -> bytes:
    with httpx.Client(timeout=60) as http, http.stream(
        "POST", f"{proxy_url}/proxy/anthropic/v1/messages", content=BODY,
        headers={"x-api-key": ANTHROPIC_KEY, "x-turnscope-token": token,
                 "anthropic-version": "2023-06-01", "content-type": "application/json",
                 "accept-encoding": "gzip"},
    ) as response:
        return b"".join(response.iter_raw())


def test_a_gzip_turn_cut_at_its_event_cap_keeps_the_whole_response_decoded(
    upstream, proxy_url, token, settings
):
    settings.TURNSCOPE_MAX_EVENTS_PER_TURN = 3
    upstream.add(reply("anthropic", TIDES, gzip=True))
    post(proxy_url, token)
    wait_recorded()
    turn = Turn.objects.get(role=Turn.Role.AGENT)
    assert turn.status == "interrupted"  # cut at the cap
    [kept] = Recording.objects.get(turn=turn).response_list
    assert "\ufffd" not in kept["raw"]
    assert kept["raw"].encode() == TIDES  # the rest, decoded like the start


def test_a_response_that_decodes_past_the_cap_is_recorded_as_too_large(
    upstream, proxy_url, token, monkeypatch
):
    monkeypatch.setattr(recorder, "MAX_DECODED", 2 * MB)
    bomb = b": " + b"x" * (8 * MB) + b"\n\n"  # 8 MB that gzip makes a few kB of
    upstream.add(Reply(chunks=(*reply("anthropic", TIDES).chunks[:3], bomb), gzip=True))
    received = post(proxy_url, token)
    assert received == upstream.sent[0]  # the app got every byte regardless
    assert len(received) < 100_000
    wait_recorded()
    turn = Turn.objects.get(role=Turn.Role.AGENT)
    [error] = [e.typed_body.to_body()["error"] for e in turn.events.order_by("seq")
               if e.kind == "error"]
    assert error["code"] == "response_too_large"
    assert "too large" in error["message"]


def test_wire_lines_hold_a_long_line_until_it_ends():
    lines = WireLines()
    assert lines.feed(b"data: " + b"a" * 1000) == b""
    assert lines.pending == 1006
    assert lines.feed(b"b" * 10) == b""
    assert lines.feed(b"c\nd") == b"data: " + b"a" * 1000 + b"b" * 10 + b"c\n"
    assert lines.pending == 1
    assert lines.close() == b"d" and lines.pending == 0
