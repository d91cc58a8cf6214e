"""A live replay's turn is recovered like a live call's: ``manage.py serve`` killed (kill -9, or
SIGTERM) while a live replay streams a recorded agent turn into a new conversation, then
restarted — the turn is finished within 10 s of the restart, interrupted, holding every
character a viewer was sent (the open block's text too, which was only in the server's
in-memory cache) and, after kill -9, exactly the events its runner had been given: the replay's
exchange in the capture log, no event twice."""

from __future__ import annotations

import json
import signal
import sqlite3
import time
from pathlib import Path

import httpx
import orjson
import pytest

import providers
from streams.run import assemble
from tests.live.e2e import ANA_SESSION
from tests.proxy.test_capture_e2e import Server, _env, _manage

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

CSRF = "c" * 32  # the cookie and the header a form's post carries
SETUP = ANA_SESSION + """
import json
from live import bundled
[(_, source, _)] = bundled.load(user, only=['anthropic-tides'])
print(json.dumps({'session': session.session_key, 'source': str(source.pk)}))
"""


def _logged(log: Path, turn: str) -> tuple[list[tuple[str, str]], int]:
    """The events the replay's exchanges still in the log make (its runner's input), and how
    many of its exchanges are not recorded."""
    con = sqlite3.connect(f"file:{log}?mode=ro", uri=True, timeout=5)
    try:
        found = []
        for xid, meta in con.execute("SELECT id, meta FROM exchanges WHERE kind = 'replay' "
                                     "AND recorded IS NULL ORDER BY opened"):
            if orjson.loads(meta).get("turn") != turn:
                continue
            found.append(b"".join(bytes(d) for (d,) in con.execute(
                "SELECT data FROM chunks WHERE exchange = ? ORDER BY n", (xid,))))
    finally:
        con.close()
    read = []
    for raw in found:
        parser = providers.stream_parser("anthropic")
        read.append(("logged", [*parser.feed(raw), *parser.close()]))
    _, records = assemble(read, on_unreadable="cut") if read else (None, [])
    return [(r.kind, r.text) for r in records], len(found)


def _turn(db: Path, turn: str) -> tuple[str, list[tuple[str, str]]]:
    con = sqlite3.connect(db)
    try:
        [status] = con.execute("SELECT status FROM conversations_turn WHERE id = ?",
                               (turn.replace("-", ""),)).fetchone()
        events = list(con.execute("SELECT kind, text FROM conversations_event WHERE turn_id = ? "
                                  "ORDER BY seq", (turn.replace("-", ""),)))
    finally:
        con.close()
    return status, events


def _messages(events: list[tuple[str, str]]) -> str:
    return "".join(text for kind, text in events if kind == "message")


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM], ids=["kill-9", "sigterm"])
def test_a_live_replay_of_a_stopped_server_keeps_what_its_runner_read(tmp_path, sig):
    env = _env(tmp_path, "http://127.0.0.1:9")  # a replay asks no provider
    _manage(env, "migrate", "--verbosity", "0")
    setup = json.loads(_manage(env, "shell", "-c", SETUP).strip().splitlines()[-1])
    db, capture_log = tmp_path / "db.sqlite3", tmp_path / "capture.sqlite3"
    log = tmp_path / "serve.log"
    server = Server(env, log)
    try:
        with httpx.Client(base_url=server.url, timeout=30, headers={"X-CSRFToken": CSRF},
                          cookies={"sessionid": setup["session"], "csrftoken": CSRF}) as web:
            started = web.post(f"/c/{setup['source']}/replay/", data={"speed": "1"})
            assert started.status_code == 302, started.text[-2000:]
            target = started.headers["location"].strip("/").split("/")[-1]
            deadline = time.monotonic() + 60
            while True:  # as a viewer sees it: a block streaming after events were stored
                state = web.get(f"/c/{target}/state/").json()
                agents = [t for t in state["turns"] if t["role"] == "agent"]
                tail = state["tails"].get(agents[0]["id"]) if agents else None
                if tail and len(tail.get("text") or "") > 30 and agents[0]["last_seq"]:
                    break
                assert agents[0]["status"] == "streaming" if agents else True, state
                assert time.monotonic() < deadline, "the replay never streamed"
                time.sleep(0.05)
            turn, seen = agents[0]["id"], tail["text"]
    finally:
        server.stop(sig)
    given, pending = _logged(capture_log, turn)
    if sig == signal.SIGKILL:
        assert pending == 1 and seen in _messages(given)  # what the runner read is in the log

    restarted = Server(env, log)
    try:
        status, events = restarted.poll(lambda: _turn(db, turn),
                                        lambda found: found[0] != "streaming",
                                        lambda found: "the replayed turn still streams")
        # nothing of it left unrecorded: the log's row is marked a moment after the turn's commit
        restarted.poll(lambda: _logged(capture_log, turn)[1], lambda left: left == 0,
                       lambda left: f"{left} of the replay's exchanges still unrecorded")
    finally:
        restarted.stop(signal.SIGTERM)
    assert status == "interrupted"
    assert seen in _messages(events)  # every character the viewer was sent
    messages = [text for kind, text in events if kind == "message"]
    assert len(set(messages)) == len(messages)  # no event twice
    if sig == signal.SIGKILL:
        assert events == given  # exactly what the runner had been given
