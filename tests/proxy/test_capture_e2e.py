"""Nothing an app received is lost when ``manage.py serve`` dies mid-stream: kill -9 (or SIGTERM)
of the server while 20 apps stream through its proxy, then a restart — every turn is finished
within 10 s of it, holding the text each app received, with its wire recording; and a stream the
provider cuts is cut for the app too, which its SDK sees as it would talking to the provider."""

from __future__ import annotations

import contextlib
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import httpx
import orjson
import pytest

import providers
from live import bundled
from streams.run import assemble
from tests.live.e2e import REPO, free_port
from tests.servers import served
from upstream.recorded import RecordedUpstream, reply

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

TIDES = bundled.sample("anthropic-tides").responses[0].raw.encode()
STREAMS = 20
IN_FLIGHT = 4096  # bytes: the most one forwarded read of the sample's paced events holds


def _env(tmp_path: Path, upstream: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("DATABASE_URL", "REDIS_URL", "DEBUG", "DJANGO_SETTINGS_MODULE")}
    env.update({"SQLITE_PATH": str(tmp_path / "db.sqlite3"), "TURNSCOPE_VAR_DIR": str(tmp_path),
                "ALLOWED_HOSTS": "127.0.0.1", "LOG_LEVEL": "WARNING",
                "TURNSCOPE_UPSTREAM_ANTHROPIC": upstream})
    return env


def _manage(env: dict[str, str], *command: str) -> str:
    done = subprocess.run([sys.executable, str(REPO / "manage.py"), *command], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


T = TypeVar("T")


class Server:
    def __init__(self, env: dict[str, str], log: Path) -> None:
        self.port = free_port()
        self.out = log.open("a")
        self.proc = subprocess.Popen(
            [sys.executable, str(REPO / "manage.py"), "serve", "--port", str(self.port)],
            cwd=REPO, env=env, stdout=self.out, stderr=subprocess.STDOUT)
        self.log = log
        # A start on a machine shared with the rest of the suite can take a while: this waits
        # for it, nothing here is timed.
        deadline = time.monotonic() + 120
        try:
            while True:
                with contextlib.suppress(httpx.HTTPError):
                    httpx.get(f"{self.url}/accounts/login/", timeout=1)
                    break
                assert self.proc.poll() is None, log.read_text()[-3000:]
                assert time.monotonic() < deadline, "not serving:\n" + log.read_text()[-3000:]
                time.sleep(0.1)
        except BaseException:  # a server that never served is not left running
            self.stop(signal.SIGKILL)
            raise

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def poll(self, read: Callable[[], T], done: Callable[[T], bool], what: Callable[[T], str],
             within: float = 10.0) -> T:
        """``read()`` until ``done`` holds of it, failing (with ``what`` of it and the log's
        end) when it does not within ``within`` seconds of now (a restart that served)."""
        started = time.monotonic()
        while True:
            found = read()
            if done(found):
                return found
            assert time.monotonic() - started < within, (
                f"{what(found)} {within:g} s after the restart\n" + self.log.read_text()[-3000:])
            time.sleep(0.1)

    def stop(self, sig: int) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self.out.close()


@contextlib.contextmanager
def _upstream() -> Iterator[tuple[RecordedUpstream, str]]:
    app = RecordedUpstream()
    with served(app) as server:
        yield app, server.url


def _stream(base: str, token: str, n: int, got: dict[int, bytes], errors: dict[int, str]
            ) -> None:
    body = orjson.dumps({"model": "claude-sonnet-4-6", "max_tokens": 100, "stream": True,
                         "messages": [{"role": "user", "content": f"Tides {n}?"}]})
    received = b""
    try:
        with httpx.Client(timeout=30) as http, http.stream(
                "POST", f"{base}/proxy/anthropic/v1/messages", content=body,
                headers={"x-api-key": "sk-ant-api03-" + "x" * 40, "x-turnscope-token": token,
                         "anthropic-version": "2023-06-01",
                         "content-type": "application/json"}) as response:
            for chunk in response.iter_raw():
                received += chunk
                got[n] = received
    except httpx.HTTPError as exc:
        errors[n] = type(exc).__name__
    got[n] = received


def _streams(base: str, token: str, count: int
             ) -> tuple[list[threading.Thread], dict[int, bytes], dict[int, str]]:
    """``count`` apps streaming through the proxy at once (``_stream``'s prompts 0..count-1):
    their threads, started, and what each received or the error it saw."""
    got: dict[int, bytes] = {}
    errors: dict[int, str] = {}
    clients = [threading.Thread(target=_stream, args=(base, token, n, got, errors))
               for n in range(count)]
    for client in clients:
        client.start()
    return clients, got, errors


def _text(raw: bytes) -> str:
    parser = providers.stream_parser("anthropic", providers.WireContext())
    found = [*parser.feed(raw[: raw.rfind(b"\n") + 1]), *parser.close()]
    _, records = assemble([("received", found)], on_unreadable="cut")
    return "".join(r.text for r in records if r.kind == "message")


def _turns(db: Path) -> dict[str, tuple[str, str, str, list[dict]]]:
    """prompt -> (agent turn status, its text, its recordings' responses)"""
    con = sqlite3.connect(db)
    out = {}
    for turn_id, conversation, status in con.execute(
            "SELECT id, conversation_id, status FROM conversations_turn WHERE role = 'agent'"):
        prompt = "".join(t for (t,) in con.execute(
            "SELECT e.text FROM conversations_event e JOIN conversations_turn t "
            "ON e.turn_id = t.id WHERE t.conversation_id = ? AND t.role = 'user'",
            (conversation,)))
        text = "".join(t for (t,) in con.execute(
            "SELECT text FROM conversations_event WHERE turn_id = ? AND kind = 'message' "
            "ORDER BY seq", (turn_id,)))
        recording = con.execute("SELECT responses FROM live_recording WHERE turn_id = ?",
                                (turn_id,)).fetchone()
        if status not in ("interrupted", "streaming"):  # why, for the assertion's message
            status += ": " + " ".join(b for (b,) in con.execute(
                "SELECT body FROM conversations_event WHERE turn_id = ? AND kind = 'error'",
                (turn_id,)))
        out[prompt] = (status, text, orjson.loads(recording[0]) if recording else [])
    con.close()
    return out


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM], ids=["kill-9", "sigterm"])
def test_a_server_stopped_mid_stream_loses_nothing_the_apps_received(tmp_path, sig):
    with _upstream() as (upstream, upstream_url):
        upstream.add(*[reply("anthropic", TIDES, pace=0.04)] * STREAMS)
        env = _env(tmp_path, upstream_url)
        _manage(env, "migrate", "--verbosity", "0")
        _manage(env, "shell", "-c", "from django.contrib.auth.models import User; "
                "User.objects.create_user('ana', password='a-long-password-1')")
        token = _manage(env, "create_token", "ana").strip().splitlines()[-1]
        log = tmp_path / "serve.log"
        server = Server(env, log)
        clients, got, errors = _streams(server.url, token, STREAMS)
        deadline = time.monotonic() + 30
        try:
            while not (len(got) == STREAMS
                       and all(b"Two bulges" in raw for raw in got.values())):
                assert time.monotonic() < deadline, f"only {len(got)} streams under way"
                time.sleep(0.02)
        finally:
            server.stop(sig)
        for client in clients:
            client.join(30)
        assert len(errors) == STREAMS  # every app saw its stream break off
        assert all(len(raw) < len(TIDES) for raw in got.values())

        restarted = Server(env, log)
        try:
            turns = restarted.poll(
                lambda: _turns(tmp_path / "db.sqlite3"),
                lambda found: len(found) == STREAMS
                and all(t[0] != "streaming" for t in found.values()),
                lambda found: f"{sum(t[0] == 'streaming' for t in found.values())} of "
                f"{len(found)} turns still streaming")
        finally:
            restarted.stop(signal.SIGTERM)
    for n in range(STREAMS):
        status, text, recording = turns[f"Tides {n}?"]
        assert status == "interrupted", f"{n}: {status}\n" + log.read_text()[-6000:]
        # Every byte the app received, not a character less. A chunk is committed to the log
        # before it is forwarded, so the one in flight when the process died may be recorded
        # though the app never got it (a loaded machine widens that moment): the turn may hold
        # that one chunk more, never less.
        [raw] = [r["raw"] for r in recording]  # the wire recording
        assert raw.startswith(got[n].decode()) and len(raw) - len(got[n]) <= IN_FLIGHT, n
        assert text.startswith(_text(got[n])) and text == _text(raw.encode()) and text, n


def test_a_stream_the_provider_cuts_is_cut_for_the_app_too(tmp_path):
    """Direct, the SDK raises on a cut stream; through Turnscope it raises the same, after the
    same bytes, and the turn is interrupted."""
    import anthropic

    with _upstream() as (upstream, upstream_url):
        cut = reply("anthropic", TIDES, pace=0.01, cut_after=40)
        upstream.add(cut, cut)

        def call(base: str, headers: dict[str, str]) -> tuple[str, str]:
            client = anthropic.Anthropic(api_key="sk-ant-api03-" + "x" * 40, base_url=base,
                                         default_headers=headers, max_retries=0)
            text = ""
            try:
                with client.messages.stream(model="claude-sonnet-4-6", max_tokens=100,
                                            messages=[{"role": "user",
                                                       "content": "Tides?"}]) as stream:
                    for piece in stream.text_stream:
                        text += piece
            except Exception as exc:
                return type(exc).__name__, text
            return "ok", text

        direct = call(upstream_url, {})
        env = _env(tmp_path, upstream_url)
        _manage(env, "migrate", "--verbosity", "0")
        _manage(env, "shell", "-c", "from django.contrib.auth.models import User; "
                "User.objects.create_user('ana', password='a-long-password-1')")
        token = _manage(env, "create_token", "ana").strip().splitlines()[-1]
        server = Server(env, tmp_path / "serve.log")
        try:
            proxied = call(f"{server.url}/proxy/anthropic", {"X-Turnscope-Token": token})
            deadline = time.monotonic() + 10
            while True:
                turns = _turns(tmp_path / "db.sqlite3")
                if turns and all(t[0] != "streaming" for t in turns.values()):
                    break
                assert time.monotonic() < deadline
                time.sleep(0.05)
        finally:
            server.stop(signal.SIGTERM)
    assert direct[0] != "ok" and proxied == direct
    [(status, text, _)] = turns.values()
    assert status == "interrupted" and text == direct[1]
