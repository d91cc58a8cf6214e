"""A live call's turn is recovered like a proxied one: ``manage.py serve`` killed (kill -9, or
SIGTERM) while a live call streams the provider's answer into a turn, then restarted — the turn
is finished within 10 s of the restart, interrupted, holding every character the server had
received from the provider (the text since the runner's last commit included: it is in the
capture log)."""

from __future__ import annotations

import signal
import sqlite3
import time
from pathlib import Path

import httpx
import pytest

from tests.proxy.test_capture_e2e import TIDES, Server, _env, _manage, _text, _upstream
from upstream.recorded import reply

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

HOLD = 70  # the provider sends this many of the sample's 131 events, then stalls


def _captured_bytes(log: Path, *, pending: bool = False) -> int:
    """Bytes of live responses the log took (``pending``: of those not recorded yet)."""
    if not log.exists():
        return 0
    con = sqlite3.connect(f"file:{log}?mode=ro", uri=True, timeout=5)
    try:
        row = con.execute("SELECT COALESCE(SUM(bytes), 0) FROM exchanges WHERE kind = 'live'"
                          + (" AND recorded IS NULL" if pending else "")).fetchone()
    except sqlite3.OperationalError:
        return 0
    finally:
        con.close()
    return int(row[0])


def _turn(db: Path, turn_id: str) -> tuple[str, str]:
    con = sqlite3.connect(db)
    try:
        [status] = con.execute("SELECT status FROM conversations_turn WHERE id = ?",
                               (turn_id.replace("-", ""),)).fetchone()
        text = "".join(t for (t,) in con.execute(
            "SELECT text FROM conversations_event WHERE turn_id = ? AND kind = 'message' "
            "ORDER BY seq", (turn_id.replace("-", ""),)))
    finally:
        con.close()
    return status, text


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM], ids=["kill-9", "sigterm"])
def test_a_live_turn_of_a_stopped_server_keeps_every_character_received(tmp_path, sig):
    with _upstream() as (upstream, upstream_url):
        served = reply("anthropic", TIDES, pace=0.002, hold_after=HOLD)
        received = b"".join(served.chunks[:HOLD])
        upstream.add(served)
        env = _env(tmp_path, upstream_url)
        env["ANTHROPIC_API_KEY"] = "sk-ant-api03-" + "k" * 40
        _manage(env, "migrate", "--verbosity", "0")
        key = _manage(env, "shell", "-c", "from django.contrib.auth.models import User; "
                      "from rest_framework.authtoken.models import Token; "
                      "u = User.objects.create_user('ana', password='a-long-password-1'); "
                      "print(Token.objects.create(user=u).key)").strip().splitlines()[-1]
        log = tmp_path / "serve.log"
        server = Server(env, log)
        try:
            with httpx.Client(base_url=f"{server.url}/api/v1", timeout=30,
                              headers={"Authorization": f"Token {key}"}) as api:
                conversation = api.post("/conversations", json={"title": "Tides"}).json()["id"]
                sent = api.post(f"/conversations/{conversation}/turns", json={
                    "prompt": "Why are there two high tides a day?", "provider": "anthropic",
                    "model": "claude-sonnet-4-5", "web_search": False})
            assert sent.status_code == 202, sent.text
            turn = sent.json()["turn"]["id"]
            deadline = time.monotonic() + 30
            while _captured_bytes(tmp_path / "capture.sqlite3") < len(received):
                assert time.monotonic() < deadline, "the provider's events never reached the log"
                time.sleep(0.05)
            time.sleep(0.3)  # the runner has read them (for SIGTERM's abort; the log has them)
        finally:
            server.stop(sig)

        restarted = Server(env, log)
        try:
            status, text = restarted.poll(lambda: _turn(tmp_path / "db.sqlite3", turn),
                                          lambda found: found[0] != "streaming",
                                          lambda found: "the live turn still streams")
            # recorded: the log's row is marked a moment after the turn's commit
            restarted.poll(lambda: _captured_bytes(tmp_path / "capture.sqlite3", pending=True),
                           lambda left: left == 0,
                           lambda left: f"{left} bytes of the call still unrecorded in the log")
        finally:
            restarted.stop(signal.SIGTERM)
    assert status == "interrupted"
    assert text == _text(received) and text  # not a character less than the server received
