"""Who may record, fidelity (headers, gzip, pass-through paths) and every failure case."""

from __future__ import annotations

import gzip
import socket
import threading
import time

import httpx
import orjson
import pytest

from conversations.models import Conversation, Turn
from live import bundled
from live import runner as live_runner
from tests.proxy import sdk
from tests.proxy.cases import Case
from tests.proxy.conftest import ANTHROPIC_KEY, wait_recorded
from upstream.recorded import Reply, error_reply, reply

pytestmark = pytest.mark.django_db(transaction=True)

TIDES = bundled.sample("anthropic-tides").responses[0].raw.encode()
ANTHROPIC = Case("x", "anthropic", b"", True, model="claude-sonnet-4-6")
ANTHROPIC_BODY = Case("x", "anthropic", b"", False, model="claude-sonnet-4-6")
MESSAGES_BODY = orjson.dumps({"model": "claude-sonnet-4-6", "max_tokens": 100, "stream": True,
                              "messages": [{"role": "user", "content": "Tides?"}]})


def headers(token: str, **more: str) -> dict[str, str]:
    return {"x-api-key": ANTHROPIC_KEY, "anthropic-version": "2023-06-01",
            "content-type": "application/json", "x-turnscope-token": token, **more}


def only_turn() -> Turn:
    return Turn.objects.get(role=Turn.Role.AGENT)


def error_events(turn: Turn) -> list[dict]:
    return [e.typed_body.to_body()["error"] for e in turn.events.order_by("seq")
            if e.kind == "error"]


# -- tokens ------------------------------------------------------------------------------------


@pytest.mark.parametrize("wanted", [None, "0" * 40, "bad token!"])
def test_missing_or_wrong_token_is_401_in_the_providers_shape_and_nothing_forwarded(
    wanted, upstream, proxy_url
):
    upstream.add(reply("anthropic", TIDES))
    given = {"X-Turnscope-Token": wanted} if wanted else {}
    result = sdk.call(ANTHROPIC, f"{proxy_url}/proxy/anthropic", given)
    assert result[:3] == ("error", "AuthenticationError", 401)
    assert result[3]["type"] == "error" and result[3]["error"]["type"] == "authentication_error"
    for case, name in ((Case("x", "openai", b"", False, model="gpt-5-mini"),
                        "AuthenticationError"),):
        got = sdk.call(case, f"{proxy_url}/proxy/openai", given)
        assert got[:3] == ("error", name, 401)
        assert got[3]["code"] == "invalid_turnscope_token"
    google = sdk.call(Case("x", "google", b"", False, model="gemini-2.5-pro"),
                      f"{proxy_url}/proxy/google", given)
    assert google[:3] == ("error", "ClientError", None) or google[0] == "error"
    assert "UNAUTHENTICATED" in str(google)
    assert upstream.requests == []
    assert not Conversation.objects.exists()


def test_the_token_in_the_path_works_for_clients_that_set_only_a_base_url(
    upstream, proxy_url, token, owner
):
    upstream.add(reply("anthropic", TIDES))
    result = sdk.call(ANTHROPIC, f"{proxy_url}/proxy/t/{token}/anthropic")
    assert result[0] == "ok"
    wait_recorded()
    assert only_turn().conversation.owner == owner
    assert upstream.requests[0].path == "/v1/messages"


def test_turnscope_headers_are_not_forwarded_and_hop_by_hop_headers_not_passed(
    upstream, proxy_url, token
):
    upstream.add(Reply(chunks=(b'{"data": []}',), content_type="application/json",
                       headers=(("x-request-id", "req_1"), ("keep-alive", "timeout=5"))))
    with httpx.Client() as http:
        response = http.get(f"{proxy_url}/proxy/anthropic/v1/models?limit=2",
                            headers={**headers(token), "x-turnscope-conversation": "",
                                     "connection": "keep-alive, x-drop-me", "x-drop-me": "1"})
    assert response.status_code == 200 and response.content == b'{"data": []}'
    assert response.headers["x-request-id"] == "req_1"
    assert "keep-alive" not in response.headers
    [request] = upstream.requests
    assert (request.method, request.path, request.query) == ("GET", "/v1/models", "limit=2")
    names = {name for name, _ in request.headers}
    assert not {n for n in names if n.startswith("x-turnscope")}
    assert "x-drop-me" not in names
    assert request.header("x-api-key") == ANTHROPIC_KEY
    wait_recorded()
    assert not Conversation.objects.exists()  # not a recorded endpoint


# -- fidelity ----------------------------------------------------------------------------------


def test_a_gzip_encoded_stream_reaches_the_client_byte_for_byte_and_is_recorded(
    upstream, proxy_url, token
):
    upstream.add(reply("anthropic", TIDES, gzip=True))
    received = bytearray()
    with httpx.Client() as http, http.stream(
        "POST", f"{proxy_url}/proxy/anthropic/v1/messages", content=MESSAGES_BODY,
        headers=headers(token, **{"accept-encoding": "gzip, br, zstd"}),
    ) as response:
        assert response.headers["content-encoding"] == "gzip"
        for chunk in response.iter_raw():
            received += chunk
    assert bytes(received) == upstream.sent[0]  # passed through, not re-encoded
    assert gzip.decompress(bytes(received)) == TIDES
    # the recorder can read what it asked for: br / zstd were not asked of the provider
    assert upstream.requests[0].header("accept-encoding") == "gzip"
    wait_recorded()
    turn = only_turn()
    assert (turn.status, turn.end_reason) == ("complete", "end_turn")
    assert "Two bulges" in "".join(e.text for e in turn.events.filter(kind="message"))


def test_chunks_reach_the_client_as_they_arrive(upstream, proxy_url, token):
    upstream.add(reply("anthropic", TIDES, pace=0.05))
    arrivals = []
    with httpx.Client() as http, http.stream(
        "POST", f"{proxy_url}/proxy/anthropic/v1/messages", content=MESSAGES_BODY,
        headers=headers(token),
    ) as response:
        for _ in response.iter_raw():
            arrivals.append(time.monotonic())
    # not buffered: the body arrives over the time the upstream takes to send it
    assert len(arrivals) > 10
    assert arrivals[-1] - arrivals[0] > 0.5


# -- failures ------------------------------------------------------------------------------------


def test_an_upstream_error_passes_through_and_is_a_failed_turn(upstream, proxy_url, token,
                                                               owner, client):
    overloaded = error_reply("anthropic", 429, "", "Number of request tokens has exceeded "
                             "your per-minute rate limit", headers=(("retry-after", "7"),))
    upstream.add(overloaded, overloaded)
    direct = sdk.call(ANTHROPIC_BODY, upstream.url)
    proxied = sdk.call(ANTHROPIC_BODY, f"{proxy_url}/proxy/anthropic",
                       {"X-Turnscope-Token": token})
    assert proxied == direct
    assert proxied[:3] == ("error", "RateLimitError", 429)
    wait_recorded()
    turn = only_turn()
    assert (turn.status, turn.end_reason) == ("failed", "error")
    assert error_events(turn) == [{"code": "rate_limit_error", "message": "Number of request "
                                   "tokens has exceeded your per-minute rate limit"}]
    client.force_login(owner)
    page = client.get(f"/c/{turn.conversation_id}/").content.decode()
    assert "rate_limit_error" in page and "per-minute rate limit" in page


def test_an_in_stream_error_passes_through_and_fails_the_turn(upstream, proxy_url, token):
    upstream.add(Reply(chunks=(
        b'event: message_start\ndata: {"type":"message_start","message":{"id":"msg_1",'
        b'"type":"message","role":"assistant","model":"claude-sonnet-4-6","content":[],'
        b'"stop_reason":null,"usage":{"input_tokens":3,"output_tokens":1}}}\n\n',
        b'event: error\ndata: {"type":"error","error":{"type":"overloaded_error",'
        b'"message":"Overloaded"}}\n\n')))
    result = sdk.call(ANTHROPIC, f"{proxy_url}/proxy/anthropic", {"X-Turnscope-Token": token})
    assert result[0] == "error" and "Overloaded" in str(result)
    wait_recorded()
    turn = only_turn()
    assert (turn.status, turn.end_reason) == ("failed", "error")
    assert error_events(turn)[0]["code"] == "overloaded_error"


def test_an_unreachable_upstream_is_502_in_the_providers_shape_and_a_failed_turn(
    settings, proxy_url, token
):
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    settings.TURNSCOPE_UPSTREAM = {"anthropic": f"http://127.0.0.1:{port}"}
    result = sdk.call(ANTHROPIC, f"{proxy_url}/proxy/anthropic", {"X-Turnscope-Token": token})
    assert result[:3] == ("error", "InternalServerError", 502)
    assert result[3]["error"]["type"] == "api_error"
    wait_recorded()
    turn = only_turn()
    assert turn.status == "failed"
    assert error_events(turn)[0]["code"] == "upstream_unreachable"


def test_an_upstream_timing_out_is_504_and_a_failed_turn(settings, upstream, proxy_url, token):
    settings.TURNSCOPE_UPSTREAM_READ_TIMEOUT = 0.3
    from upstream import client as upstream_client

    upstream_client._clients.clear()  # a client with the short timeout
    upstream.add(reply("anthropic", TIDES, first_byte=2.0))
    result = sdk.call(Case("x", "openai", b"", False, model="gpt-5-mini"),
                      f"{proxy_url}/proxy/openai", {"X-Turnscope-Token": token})
    upstream_client._clients.clear()
    assert result[:3] == ("error", "InternalServerError", 504)
    assert result[3]["code"] == "upstream_timeout"
    wait_recorded()
    assert error_events(only_turn())[0]["code"] == "upstream_timeout"


def test_a_client_disconnecting_closes_the_upstream_request_and_interrupts_the_turn(
    upstream, proxy_url, token
):
    upstream.add(reply("anthropic", TIDES, pace=0.1))
    with httpx.Client() as http, http.stream(
        "POST", f"{proxy_url}/proxy/anthropic/v1/messages", content=MESSAGES_BODY,
        headers=headers(token),
    ) as response:
        seen = b""
        for chunk in response.iter_raw():
            seen += chunk
            if b"Two bulges" in seen:
                break  # the app stops reading and goes away
    wait_recorded()
    deadline = time.monotonic() + 5
    while not (upstream.requests[0].disconnected and upstream.sent) and (
            time.monotonic() < deadline):
        time.sleep(0.05)
    assert upstream.requests[0].disconnected
    assert len(upstream.sent[0]) < len(TIDES)
    turn = only_turn()
    assert (turn.status, turn.end_reason) == ("interrupted", "interrupted")
    last = turn.events.order_by("seq").last()
    assert last.incomplete and last.text.startswith("## Two bulges")


def test_a_body_over_the_cap_is_413_in_the_providers_shape_and_not_forwarded(
    settings, upstream, proxy_url, token
):
    settings.TURNSCOPE_PROXY_MAX_BODY_BYTES = 1000
    result = sdk.call(ANTHROPIC_BODY, f"{proxy_url}/proxy/anthropic",
                      {"X-Turnscope-Token": token},
                      messages=[{"role": "user", "content": "x" * 2000}])
    assert result[:3] == ("error", "ContentTooLargeError", 413)
    assert result[3]["error"]["type"] == "request_too_large"
    assert upstream.requests == []


def test_unreadable_wire_data_never_breaks_the_clients_stream(upstream, proxy_url, token):
    garbage = TIDES.replace(b"event: message_delta", b"this is not SSE at all", 1)
    upstream.add(Reply(chunks=reply("anthropic", garbage).chunks))
    with httpx.Client() as http:
        response = http.post(f"{proxy_url}/proxy/anthropic/v1/messages", content=MESSAGES_BODY,
                             headers=headers(token))
    assert response.content == garbage  # every byte, as the upstream sent it
    wait_recorded()
    turn = only_turn()
    assert turn.status in ("interrupted", "failed")


def test_a_live_recording_that_breaks_off_is_completed_from_the_capture_log(
    upstream, proxy_url, token, monkeypatch, caplog
):
    """The second write of the live recording fails: the app is not affected, and the turn is
    recorded whole from the capture log, as a recording that never failed would be."""
    calls = {"n": 0}
    real = live_runner._write_db

    async def busy(*args):
        calls["n"] += 1
        if calls["n"] == 2:
            raise RuntimeError("database is busy")
        return await real(*args)

    monkeypatch.setattr(live_runner, "_write_db", busy)
    served = reply("anthropic", TIDES, pace=0.002)
    upstream.add(served, served, served)
    direct = sdk.call(ANTHROPIC, upstream.url)
    proxied = sdk.call(ANTHROPIC, f"{proxy_url}/proxy/anthropic", {"X-Turnscope-Token": token})
    assert proxied == direct and proxied[0] == "ok"
    wait_recorded()
    assert calls["n"] >= 2  # the live recording did break off
    again = sdk.call(ANTHROPIC, f"{proxy_url}/proxy/anthropic", {"X-Turnscope-Token": token})
    assert again == direct
    wait_recorded()
    broken, clean = Turn.objects.filter(role=Turn.Role.AGENT).order_by("created_at")
    assert (broken.status, broken.end_reason) == ("complete", clean.end_reason)
    assert [(e.kind, e.text, e.incomplete) for e in broken.events.order_by("seq")] == [
        (e.kind, e.text, e.incomplete) for e in clean.events.order_by("seq")]
    assert (broken.provider, broken.model) == (clean.provider, clean.model)
    assert broken.recording.response_list[0]["raw"] == clean.recording.response_list[0]["raw"]
    assert any("recorded from the capture log" in r.getMessage() for r in caplog.records)


def test_streams_in_parallel_are_recorded_separately(upstream, proxy_url, token):
    served = reply("anthropic", TIDES, pace=0.01)
    upstream.add(*[served] * 4)
    results = []

    def one(n: int) -> None:
        results.append(sdk.call(ANTHROPIC, f"{proxy_url}/proxy/anthropic",
                                {"X-Turnscope-Token": token},
                                messages=[{"role": "user", "content": f"Tides {n}?"}]))

    threads = [threading.Thread(target=one, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert [r[0] for r in results] == ["ok"] * 4
    wait_recorded()
    assert Conversation.objects.count() == 4
    assert set(Turn.objects.filter(role="agent").values_list("status", flat=True)) == {
        "complete"}


def test_at_most_half_the_slots_record_live_and_the_rest_from_the_log(
        upstream, proxy_url, token, settings, monkeypatch):
    """A live recording holds its slot as long as its stream lasts: with 2 slots one records
    live, and the other streams, waiting for a slot, are recorded from the log once they end
    (each whole, as the live one is)."""
    from proxy.capture import Hub

    settings.TURNSCOPE_RECORDING_SLOTS = 2
    seen = {"live": 0, "from_log": 0}
    start_live, start_from_log = Hub._start_live, Hub._start_from_log

    def live(self, *args):
        start_live(self, *args)
        seen["live"] = max(seen["live"], len(self.live))

    def from_log(self, *args):
        seen["from_log"] += 1
        start_from_log(self, *args)

    monkeypatch.setattr(Hub, "_start_live", live)
    monkeypatch.setattr(Hub, "_start_from_log", from_log)
    served = reply("anthropic", TIDES, pace=0.005)
    upstream.add(*[served] * 6)
    results: list = []

    def one(n: int) -> None:
        results.append(sdk.call(ANTHROPIC, f"{proxy_url}/proxy/anthropic",
                                {"X-Turnscope-Token": token},
                                messages=[{"role": "user", "content": f"Tides {n}?"}]))

    threads = [threading.Thread(target=one, args=(n,)) for n in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert [r[0] for r in results] == ["ok"] * 6
    deadline = time.monotonic() + 30  # an exchange that ended waits up to a second for a slot
    while Turn.objects.filter(role="agent").exclude(status="streaming").count() < 6:
        assert time.monotonic() < deadline, "not every exchange was recorded"
        time.sleep(0.05)
    wait_recorded()
    assert seen["live"] == 1 and seen["from_log"] >= 1
    turns = Turn.objects.filter(role="agent")
    assert turns.count() == 6 and {t.status for t in turns} == {"complete"}
    texts = {"".join(e.text for e in t.events.order_by("seq") if e.kind == "message")
             for t in turns}
    assert len(texts) == 1 and texts.pop()
