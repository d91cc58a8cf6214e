"""Scale-out: two daphne processes sharing PostgreSQL and Redis. A browser on process A watches
a turn that process B runs; the deltas cross processes through channels_redis, the streaming
tail through the Redis cache, and the page converges to the store."""

from __future__ import annotations

import os
import time
import uuid
from urllib.parse import urlsplit, urlunsplit

import pytest

from tests.live import e2e

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

DATABASE_URL = os.environ.get("DATABASE_URL", "")
REDIS_URL = os.environ.get("REDIS_URL", "")


def _admin_connection(url: str):
    import psycopg

    parts = urlsplit(url)
    return psycopg.connect(urlunsplit(parts._replace(path="/postgres")), autocommit=True)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    if not (DATABASE_URL.startswith("postgres") and REDIS_URL):
        pytest.skip("scale-out needs DATABASE_URL (PostgreSQL) and REDIS_URL")
    name = f"turnscope_e2e_{uuid.uuid4().hex[:10]}"
    with _admin_connection(DATABASE_URL) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    database = urlunsplit(urlsplit(DATABASE_URL)._replace(path=f"/{name}"))
    tmp = tmp_path_factory.mktemp("live-scaleout")
    env = e2e.base_env(tmp, DATABASE_URL=database, REDIS_URL=REDIS_URL)
    servers = []
    try:
        setup = e2e.prepare(env)
        servers = [e2e.Daphne(env, tmp / "a.log"), e2e.Daphne(env, tmp / "b.log")]
        manager, browser = e2e.chromium()
        try:
            yield {"setup": setup, "a": servers[0], "b": servers[1], "browser": browser}
        finally:
            browser.close()
            manager.stop()
    finally:
        for server in servers:
            server.stop()
        with _admin_connection(DATABASE_URL) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def test_browser_on_a_watches_a_turn_that_b_runs(cluster):
    a, b = cluster["a"], cluster["b"]
    conversation = cluster["setup"]["watch"][3]
    page = e2e.logged_in_page(cluster["browser"], a, cluster["setup"]["session"])
    page.goto(f"{a.url}/c/{conversation}/")
    page.wait_for_function("() => document.getElementById('conversation').dataset.live "
                           "=== 'open'")
    b.post(f"/_e2e/run/{conversation}/openai-sourdough/?speed=3")
    turn = e2e.wait_for_turn(b, conversation)
    page.wait_for_selector(f"#turn-{turn['id']}")

    # A reads the tail that B writes (the shared cache) while the turn streams
    deadline = time.monotonic() + 20
    tail_seen = False
    while time.monotonic() < deadline and not tail_seen:
        state = page.evaluate("""async (url) => (await (await fetch(url)).json())""",
                              f"/c/{conversation}/state/")
        tail_seen = bool(state["tails"].get(turn["id"], {}).get("text"))
        time.sleep(0.05)
    assert tail_seen, "process A never saw the streaming text process B wrote"

    stored = e2e.wait_until_settled(page, a, conversation, turn["id"])
    assert stored["status"] == "complete"
    stats = page.evaluate("() => window.turnscopeLive.stats")
    assert stats["deltas"] > 0, f"no delta crossed from B to A: {stats}"
    e2e.assert_converged(page, a, conversation, {turn["id"]: 0})
