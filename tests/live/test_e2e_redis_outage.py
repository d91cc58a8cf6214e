"""A Redis outage in the middle of a live turn: two daphne processes share the database and a
Redis of the test's own; the turn runs on B, a browser watches on A. Redis is killed for about
six seconds, then started again empty. The turn ends complete with all its text, the page
converges to the store, and the state view, the token API and websocket handshakes never answer
500 meanwhile (the tail comes from the database while the cache is down)."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request

import pytest

from tests.live import e2e

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

OUTAGE_SECONDS = 6.0
SAMPLE = "anthropic-tides"  # about 13 s at speed 1


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("redis-outage")
    redis = e2e.RedisServer(tmp / "redis.log")
    env = e2e.base_env(tmp, REDIS_URL=redis.url)
    servers = []
    try:
        setup = e2e.prepare(env)
        servers = [e2e.Daphne(env, tmp / "a.log"), e2e.Daphne(env, tmp / "b.log")]
        manager, browser = e2e.chromium()
        try:
            yield {"setup": setup, "a": servers[0], "b": servers[1], "browser": browser,
                   "redis": redis, "tmp": tmp}
        finally:
            browser.close()
            manager.stop()
    finally:
        for server in servers:
            server.stop()
        redis.stop()


def get(server, path: str, headers: dict[str, str]) -> tuple[int, bytes]:
    request = urllib.request.Request(server.url + path, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def hello(server, conversation: str, session: str) -> str:
    from websockets.sync.client import connect

    url = f"ws://127.0.0.1:{server.port}/ws/conversations/{conversation}/"
    with connect(url, origin=server.url, open_timeout=10,
                 additional_headers={"Cookie": f"sessionid={session}"}) as ws:
        return json.loads(ws.recv(timeout=10))["type"]


def wait_complete(server, conversation: str, timeout: float = 60) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        turns = server.get_json(f"/_e2e/text/{conversation}/")["turns"]
        if turns and turns[-1]["status"] != "streaming":
            return turns[-1]
        time.sleep(0.1)
    raise AssertionError("the turn never finished")


def test_a_turn_streams_across_a_redis_outage(world):
    pytest.importorskip("websockets")
    a, b, redis = world["a"], world["b"], world["redis"]
    setup = world["setup"]
    session = setup["session"]
    cookie = {"Cookie": f"sessionid={session}"}
    token = {"Authorization": f"Token {setup['token']}"}

    # What the turn holds when nothing goes wrong: the same sample, fast, Redis up.
    baseline = setup["watch"][0]
    b.post(f"/_e2e/run/{baseline}/{SAMPLE}/?speed=50")
    expected = wait_complete(b, baseline)
    assert expected["status"] == "complete"

    conversation = setup["watch"][1]
    page = e2e.logged_in_page(world["browser"], a, session)
    page.goto(f"{a.url}/c/{conversation}/")
    page.wait_for_function("() => document.getElementById('conversation').dataset.live "
                           "=== 'open'")
    b.post(f"/_e2e/run/{conversation}/{SAMPLE}/?speed=1")
    turn = e2e.wait_for_turn(b, conversation)
    page.wait_for_selector(f"#turn-{turn['id']}")
    deadline = time.monotonic() + 20
    while not (page.evaluate(e2e.TURN_STATE_JS, turn["id"]) or {}).get("tail"):
        assert time.monotonic() < deadline, "no streaming text reached the page"
        time.sleep(0.05)

    redis.stop()
    down_at = time.monotonic()
    statuses: dict[str, set[int]] = {"state": set(), "api": set()}
    handshakes, tails = [], []
    while time.monotonic() - down_at < OUTAGE_SECONDS:
        status, body = get(a, f"/c/{conversation}/state/", cookie)
        statuses["state"].add(status)
        if status == 200:
            tails.append(json.loads(body)["tails"].get(turn["id"], {}).get("text", ""))
        statuses["api"].add(get(a, "/api/v1/conversations", token)[0])
        handshakes.append(hello(a, conversation, session))
        time.sleep(0.3)
    deltas_at_restart = page.evaluate("() => window.turnscopeLive.stats.deltas")
    redis.start()

    assert statuses == {"state": {200}, "api": {200}}, statuses
    assert set(handshakes) == {"hello"}, handshakes
    # Process A read the tail that B kept in the database while neither could reach Redis.
    assert len({t for t in tails if t}) >= 2, f"the tail did not advance: {tails}"

    stored = e2e.wait_until_settled(page, a, conversation, turn["id"], timeout=60)
    assert stored["status"] == "complete", stored
    assert stored["texts"] == expected["texts"]  # all of it: nothing lost, nothing doubled
    for text in tails:
        assert any(t.startswith(text) for t in stored["texts"]), text
    e2e.assert_converged(page, a, conversation, {turn["id"]: 0})
    stats = page.evaluate("() => window.turnscopeLive.stats")
    assert stats["resyncs"] >= 1 or stats["gaps"] >= 1, stats
    # A joined the group again on the new Redis: deltas from B reached the page after it.
    assert stats["deltas"] > deltas_at_restart, stats
