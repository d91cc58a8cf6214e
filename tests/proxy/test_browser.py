"""A real browser on a real daphne: open a conversation while a proxied stream runs (the
recorded upstream paced slowly) and see the text arrive before the stream is over."""

from __future__ import annotations

import threading
import time

import httpx
import pytest

from live import bundled
from tests.live import e2e
from tests.servers import served
from upstream.recorded import RecordedUpstream, reply

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

BODY = (b'{"model": "claude-sonnet-4-6", "max_tokens": 1024, "stream": true, '
        b'"messages": [{"role": "user", "content": "How do tides work?"}]}')


def test_a_proxied_stream_shows_live_in_the_browser(tmp_path):
    raw = bundled.sample("anthropic-tides").responses[0].raw.encode()
    upstream = RecordedUpstream([reply("anthropic", raw, pace=0.08)])
    with served(upstream) as fake:
        env = e2e.base_env(tmp_path, TURNSCOPE_UPSTREAM_ANTHROPIC=fake.url)
        setup = e2e.prepare(env)
        server = e2e.Daphne(env, tmp_path / "daphne.log")
        manager, browser = e2e.chromium()
        try:
            conversation = setup["watch"][0]
            page = e2e.logged_in_page(browser, server, setup["session"])
            page.goto(f"{server.url}/c/{conversation}/")
            page.wait_for_function("() => document.getElementById('conversation')"
                                   ".dataset.live === 'open'")
            received = bytearray()

            def app() -> None:  # the app, streaming through the proxy
                with httpx.Client(timeout=60) as http, http.stream(
                    "POST", f"{server.url}/proxy/anthropic/v1/messages", content=BODY,
                    headers={"x-api-key": "sk-ant-api03-test0000000000", "content-type":
                             "application/json", "anthropic-version": "2023-06-01",
                             "x-turnscope-token": setup["token"],
                             "x-turnscope-conversation": conversation},
                ) as response:
                    for chunk in response.iter_raw():
                        received.extend(chunk)

            streaming = threading.Thread(target=app)
            streaming.start()
            turn = e2e.wait_for_turn(server, conversation)
            page.wait_for_selector(f"#turn-{turn['id']}")
            seen = ""
            deadline = time.monotonic() + 30
            while streaming.is_alive() and time.monotonic() < deadline:
                state = page.evaluate(e2e.TURN_STATE_JS, turn["id"])
                if state and state["streamed"] and "bulges" in state["streamed"]:
                    seen = state["streamed"]
                    break
                time.sleep(0.03)
            in_flight = streaming.is_alive()
            streaming.join(30)
            page.screenshot(path=str(tmp_path / "proxied-live.png"))
            assert bytes(received) == upstream.sent[0]
            assert seen and in_flight, "no text arrived while the proxied stream was running"
            stored = e2e.wait_until_settled(page, server, conversation, turn["id"])
            assert stored["status"] == "complete"
            # What streamed is what was stored. The tail may hold a block that ended beside
            # the open one (and, under load, more of it per delta): compared as one text.
            assert e2e.squeezed(seen) in e2e.squeezed("".join(stored["texts"]))
        finally:
            browser.close()
            manager.stop()
            server.stop()
