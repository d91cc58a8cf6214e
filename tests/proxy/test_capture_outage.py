"""Nothing an app received is lost when PostgreSQL goes away mid-stream: ``manage.py serve`` on a
private cluster (``tests.pgcluster``), apps streaming through its proxy, the cluster stopped for
about 10 s and started again — every app gets its whole response, every turn is recorded
complete after the database is back, holding every character, with its wire recording; and the
first request after the restart is served (no stale connection's 503). A live call streaming
through the same outage is recorded whole too (its runner's writes wait for the database)."""

from __future__ import annotations

import signal
import time

import httpx
import orjson
import pytest

from tests import pgcluster
from tests.proxy.test_capture_e2e import (
    TIDES,
    Server,
    _env,
    _manage,
    _stream,
    _streams,
    _text,
    _upstream,
)
from upstream.recorded import reply

pytestmark = [pytest.mark.e2e, pytest.mark.slow,
              pytest.mark.skipif(pgcluster.unavailable() is not None,
                                 reason=pgcluster.unavailable() or "")]

STREAMS = 10
PACE = 0.15  # seconds between the sample's 131 events: each stream lasts about 20 s
OUTAGE = 10.0


def _recorded(url: str) -> tuple[dict[str, tuple[str, str, list[dict]]], int]:
    """prompt -> (agent turn status, its text, its recording's responses), and how many
    captured exchanges are not recorded yet: one snapshot of the database (a live recording
    finishes its turn a moment before it keeps the turn's wire recording, in a transaction of
    its own that also marks the exchange recorded: reads at different moments could see the
    exchange recorded and the turn without its recording)."""
    import psycopg

    out = {}
    with psycopg.connect(url, connect_timeout=5) as con:
        con.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
        for turn_id, conversation, status in con.execute(
                "SELECT id, conversation_id, status FROM conversations_turn "
                "WHERE role = 'agent'").fetchall():
            prompt = "".join(t for (t,) in con.execute(
                "SELECT e.text FROM conversations_event e JOIN conversations_turn t "
                "ON e.turn_id = t.id WHERE t.conversation_id = %s AND t.role = 'user' "
                "ORDER BY e.seq", (conversation,)).fetchall())
            text = "".join(t for (t,) in con.execute(
                "SELECT text FROM conversations_event WHERE turn_id = %s AND kind = 'message' "
                "ORDER BY seq", (turn_id,)).fetchall())
            recording = con.execute("SELECT responses FROM live_recording WHERE turn_id = %s",
                                    (turn_id,)).fetchone()
            responses = recording[0] if recording else []
            if isinstance(responses, (str, bytes)):
                responses = orjson.loads(responses)
            out[prompt] = (status, text, responses)
        [(unrecorded,)] = con.execute(
            "SELECT count(*) FROM live_recordedexchange WHERE NOT done").fetchall()
    return out, unrecorded


def test_a_database_outage_mid_stream_loses_nothing(tmp_path):
    with pgcluster.cluster() as pg, _upstream() as (upstream, upstream_url):
        upstream.add(*[reply("anthropic", TIDES, pace=PACE)] * (STREAMS + 1))
        upstream.add(reply("anthropic", TIDES, pace=0.001))
        env = _env(tmp_path, upstream_url)
        env["DATABASE_URL"] = database = pg.create("turnscope")
        env["ANTHROPIC_API_KEY"] = "sk-ant-api03-" + "k" * 40
        _manage(env, "migrate", "--verbosity", "0")
        key = _manage(env, "shell", "-c", "from django.contrib.auth.models import User; "
                      "from rest_framework.authtoken.models import Token; "
                      "u = User.objects.create_user('ana', password='a-long-password-1'); "
                      "print(Token.objects.create(user=u).key)").strip().splitlines()[-1]
        token = _manage(env, "create_token", "ana").strip().splitlines()[-1]
        log = tmp_path / "serve.log"
        server = Server(env, log)
        try:
            with httpx.Client(base_url=f"{server.url}/api/v1", timeout=30,
                              headers={"Authorization": f"Token {key}"}) as api:
                live = api.post("/conversations", json={"title": "Live"}).json()["id"]
                sent = api.post(f"/conversations/{live}/turns", json={
                    "prompt": "Tides live?", "provider": "anthropic",
                    "model": "claude-sonnet-4-5", "web_search": False})
                assert sent.status_code == 202, sent.text
            clients, got, errors = _streams(server.url, token, STREAMS)
            deadline = time.monotonic() + 30
            while not (len(got) == STREAMS
                       and all(b"content_block_delta" in raw for raw in got.values())):
                assert time.monotonic() < deadline, f"only {len(got)} streams under way"
                time.sleep(0.02)
            pg.stop("fast")  # every connection ends; the database is gone
            time.sleep(OUTAGE)
            pg.start()
            for client in clients:
                client.join(60)
            assert not errors, errors
            assert all(got[n] == TIDES for n in range(STREAMS))  # the apps got every byte

            _stream(server.url, token, STREAMS, got, errors)  # the first one after the restart
            assert not errors and got[STREAMS] == TIDES, (errors, log.read_text()[-3000:])

            back = time.monotonic()
            while True:
                # recorded = the exchange is done (``_recorded``)
                turns, unrecorded = _recorded(database)
                if (len(turns) == STREAMS + 2 and all(t[0] != "streaming"
                                                      for t in turns.values())
                        and not unrecorded):
                    break
                assert time.monotonic() - back < 60, (
                    f"{sum(t[0] == 'streaming' for t in turns.values())} of {len(turns)} "
                    f"turns still streaming, {unrecorded} exchanges not recorded, a "
                    "minute after the database came back\n"
                    + log.read_text()[-3000:])
                time.sleep(0.2)
        finally:
            server.stop(signal.SIGTERM)
    whole = _text(TIDES)
    for n in range(STREAMS + 1):
        status, text, recording = turns[f"Tides {n}?"]
        assert status == "complete", (n, status)
        assert text == whole, n  # 0 characters lost
        assert [r["raw"] for r in recording] == [TIDES.decode()], n
    status, text, _ = turns["Tides live?"]
    assert (status, text) == ("complete", whole)
