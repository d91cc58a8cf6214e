"""A recorder process killed with exchanges taken loses none of them: ``manage.py serve`` on
PostgreSQL (a private cluster) with a recorder beside it, 30 apps streaming through its proxy,
the recorder killed (kill -9) while it records — the server starts another, which records every
exchange the first had taken, once; the owner's open conversation list hears of every
conversation the recorders started (through the server: theirs is another process's layer);
and a recorder whose server is killed stops by itself."""

from __future__ import annotations

import contextlib
import os
import signal
import sqlite3
import threading
import time
from pathlib import Path

import orjson
import pytest

from bench.capture import children as _recorders
from tests import pgcluster
from tests.live.e2e import ANA_SESSION
from tests.proxy.test_capture_e2e import (
    TIDES,
    Server,
    _env,
    _manage,
    _streams,
    _text,
    _upstream,
)
from tests.proxy.test_capture_outage import _recorded
from upstream.recorded import reply

pytestmark = [pytest.mark.e2e, pytest.mark.slow,
              pytest.mark.skipif(pgcluster.unavailable() is not None,
                                 reason=pgcluster.unavailable() or "")]

STREAMS = 30
SESSION = ANA_SESSION + "print(session.session_key)\n"


def _stored(database: str) -> tuple[set[str], int]:
    """The conversations stored, and how many agent turns."""
    import psycopg

    with psycopg.connect(database, connect_timeout=5) as con:
        [(agents,)] = con.execute(
            "SELECT count(*) FROM conversations_turn WHERE role = 'agent'").fetchall()
        return {str(c) for (c,) in con.execute(
            "SELECT id FROM conversations_conversation").fetchall()}, agents


def _waiting(log: Path) -> list[str | None]:
    """Who has taken each exchange the capture log holds not recorded yet (None: nobody)."""
    con = sqlite3.connect(f"file:{log}?mode=ro", uri=True, timeout=5)
    try:
        return [t for (t,) in con.execute("SELECT taker FROM exchanges WHERE recorded IS NULL")]
    except sqlite3.OperationalError:  # the table is not there yet
        return []
    finally:
        con.close()


def _instance(database: str, pid: int) -> str:
    """The instance id the process ``pid`` registered (waiting for it to start)."""
    import psycopg

    deadline = time.monotonic() + 60
    while True:
        with psycopg.connect(database, connect_timeout=5) as con:
            found = con.execute("SELECT id FROM live_instance WHERE pid = %s", (pid,)).fetchone()
        if found:
            return str(found[0])
        assert time.monotonic() < deadline, f"process {pid} never registered"
        time.sleep(0.1)


def _listen(url: str, session: str, heard: list[dict], stop: threading.Event) -> None:
    """What the owner's conversation list hears, as a browser's socket would."""
    from websockets.sync.client import connect

    with connect(url.replace("http", "ws", 1) + "/ws/conversations/", origin=url,
                 additional_headers={"Cookie": f"sessionid={session}"}) as socket:
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                heard.append(orjson.loads(socket.recv(timeout=0.2)))


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_a_recorder_killed_while_it_records_loses_nothing(tmp_path):
    with pgcluster.cluster() as pg, _upstream() as (upstream, upstream_url):
        upstream.add(*[reply("anthropic", TIDES, pace=0.002)] * STREAMS)
        env = _env(tmp_path, upstream_url)
        env["DATABASE_URL"] = database = pg.create("turnscope")  # and the in-memory layer
        # One live slot: the server records one exchange live, the recorder the rest.
        env.update({"TURNSCOPE_RECORDERS": "1", "TURNSCOPE_RECORDING_SLOTS": "2"})
        _manage(env, "migrate", "--verbosity", "0")
        session = _manage(env, "shell", "-c", SESSION).strip().splitlines()[-1]
        token = _manage(env, "create_token", "ana").strip().splitlines()[-1]
        log = tmp_path / "serve.log"
        capture_log = tmp_path / "capture.sqlite3"
        server = Server(env, log)
        try:
            [first] = _recorders(server.proc.pid)
            recorder = _instance(database, first)
            heard: list[dict] = []
            done = threading.Event()
            listener = threading.Thread(target=_listen, args=(server.url, session, heard, done))
            listener.start()
            while not heard:  # its hello: it listens
                assert listener.is_alive(), "the list's socket closed"
                time.sleep(0.05)
            clients, got, errors = _streams(server.url, token, STREAMS)
            # Caught with exchanges taken and not recorded yet (stopped, looked at, killed).
            deadline = time.monotonic() + 60
            while True:
                os.kill(first, signal.SIGSTOP)
                if recorder in _waiting(capture_log):
                    break
                os.kill(first, signal.SIGCONT)
                assert time.monotonic() < deadline, "the recorder never took an exchange\n" + (
                    log.read_text()[-3000:])
                time.sleep(0.005)
            held = _waiting(capture_log).count(recorder)
            os.kill(first, signal.SIGKILL)
            for client in clients:
                client.join(60)
            assert not errors and all(got[n] == TIDES for n in range(STREAMS)), errors

            killed = time.monotonic()
            while True:
                turns, unrecorded = _recorded(database)
                waiting = _waiting(capture_log)  # recorded in the database and in the log
                if (len(turns) == STREAMS and not unrecorded and not waiting
                        and all(t[0] != "streaming" for t in turns.values())):
                    break
                assert time.monotonic() - killed < 20, (
                    f"{len(turns)} turns, {unrecorded} exchanges not recorded, {len(waiting)} "
                    f"waiting in the log 20 s after the recorder was killed holding {held}\n"
                    + log.read_text()[-3000:])
                time.sleep(0.2)
            [second] = _recorders(server.proc.pid)
            assert second != first and not _alive(first)
            started, agents = _stored(database)
            assert (len(started), agents) == (STREAMS, STREAMS)  # each recorded once
            # Announcing may drop what the killed recorder committed and had not yet told
            # (the pages read it when they load): every other conversation is heard of.
            deadline = time.monotonic() + 10
            while len(started - {m["conversation"] for m in heard if m.get("type") ==
                                 "conversation" and m["op"] == "add"}) > held:
                assert time.monotonic() < deadline, (
                    f"the list heard of {len(heard) - 1} of {len(started)} conversations")
                time.sleep(0.1)
            done.set()
            listener.join(5)
        finally:
            server.stop(signal.SIGKILL)
        deadline = time.monotonic() + 10
        while _alive(second):  # its server is gone: it stops by itself
            assert time.monotonic() < deadline, "the recorder outlived its server"
            time.sleep(0.1)
    whole = _text(TIDES)
    for n in range(STREAMS):
        status, text, recording = turns[f"Tides {n}?"]
        assert (status, text) == ("complete", whole), n
        assert [r["raw"] for r in recording] == [TIDES.decode()], n
