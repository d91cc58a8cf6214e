"""``manage.py serve``: what it does before serving, and the real thing — daphne with DEBUG off
serving pages and their static files, and stopping on SIGTERM."""

from __future__ import annotations

import contextlib
import io
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from datetime import timedelta
from pathlib import Path

import pytest
from django.core.management import call_command
from django.utils import timezone

from conversations import store
from conversations.models import Conversation
from live import serve
from tests.live.e2e import REPO, free_port
from tests.support import add_turn


@pytest.mark.django_db(transaction=True)
def test_serve_finishes_what_a_stopped_server_left_and_serves_static_by_default(
        owner, monkeypatch):
    calls = []
    monkeypatch.setattr(serve, "serve", lambda host, port, **kw: calls.append((host, port, kw)))
    conversation = store.create_conversation(owner=owner)
    left = add_turn(conversation, "agent", status="streaming")
    fresh = store.create_conversation(owner=owner)
    running = add_turn(fresh, "agent", status="streaming")  # another process may run it
    Conversation.objects.filter(pk=conversation.pk).update(
        updated_at=timezone.now() - timedelta(minutes=5))

    out = io.StringIO()
    call_command("serve", "--port", "8123", stdout=out)
    [(host, port, options)] = calls
    assert (host, port, options["static"]) == ("127.0.0.1", 8123, True)
    left.refresh_from_db()
    running.refresh_from_db()
    assert (left.status, running.status) == ("interrupted", "streaming")
    assert "finished 1 turn(s)" in out.getvalue()
    assert "http://127.0.0.1:8123/" in out.getvalue()

    call_command("serve", "--no-static", stdout=(out := io.StringIO()))
    assert calls[-1][2]["static"] is False
    assert "collectstatic" in out.getvalue()


def _get(url: str) -> tuple[int, str, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, response.headers.get("Content-Type", ""), response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.headers.get("Content-Type", ""), error.read()


def _started(tmp_path: Path, *extra: str) -> tuple[subprocess.Popen[bytes], str, Path]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("DATABASE_URL", "REDIS_URL", "DEBUG", "DJANGO_SETTINGS_MODULE")}
    env.update({"SQLITE_PATH": str(tmp_path / "db.sqlite3"), "TURNSCOPE_VAR_DIR": str(tmp_path),
                "ALLOWED_HOSTS": "127.0.0.1", "LOG_LEVEL": "WARNING"})
    manage = [sys.executable, str(REPO / "manage.py")]
    migrated = subprocess.run([*manage, "migrate", "--verbosity", "0"], cwd=REPO, env=env,
                              capture_output=True, text=True, timeout=180)
    assert migrated.returncode == 0, migrated.stderr[-2000:]
    port = free_port()
    log = tmp_path / f"serve-{port}.log"
    proc = subprocess.Popen([*manage, "serve", "--port", str(port), *extra], cwd=REPO, env=env,
                            stdout=log.open("w"), stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        assert proc.poll() is None, log.read_text()[-3000:]
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.5):
            return proc, f"http://127.0.0.1:{port}", log
        time.sleep(0.1)
    proc.kill()
    raise AssertionError("manage.py serve did not start listening:\n" + log.read_text()[-3000:])


def _stopped(proc: subprocess.Popen[bytes]) -> int:
    proc.send_signal(signal.SIGTERM)
    try:
        return proc.wait(15)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise


def test_served_with_debug_off_pages_come_with_their_styles(tmp_path):
    """What a deployment sees: DEBUG off, the login page and the stylesheet it links, then a
    clean stop on SIGTERM (what a process manager sends)."""
    proc, base, log = _started(tmp_path)
    try:
        status, _, page = _get(base + "/accounts/login/")
        assert status == 200 and b'href="/static/app.css"' in page
        status, kind, css = _get(base + "/static/app.css")
        assert status == 200 and kind.startswith("text/css") and css.strip()
        assert _get(base + "/static/no-such-file.css")[0] == 404
    finally:
        code = _stopped(proc)
    assert code == 0, log.read_text()[-3000:]


def test_with_no_static_the_files_are_left_to_the_proxy(tmp_path):
    proc, base, _ = _started(tmp_path, "--no-static")
    try:
        assert _get(base + "/accounts/login/")[0] == 200
        assert _get(base + "/static/app.css")[0] == 404
    finally:
        _stopped(proc)
