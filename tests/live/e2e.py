"""Running real daphne processes and a real browser for the end-to-end tests."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
CHROMIUM = "/usr/bin/chromium"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ``manage.py shell -c`` code: the user ``ana`` and a logged-in ``session`` of hers.
ANA_SESSION = """
from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY
from django.contrib.auth.models import User
from django.contrib.sessions.backends.db import SessionStore
user = User.objects.create_user('ana', password='a-long-password-1')
session = SessionStore()
session[SESSION_KEY] = str(user.pk)
session[BACKEND_SESSION_KEY] = 'django.contrib.auth.backends.ModelBackend'
session[HASH_SESSION_KEY] = user.get_session_auth_hash()
session.create()
"""


def base_env(tmp: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    env.update({
        "DJANGO_SETTINGS_MODULE": "tests.live.e2e_settings",
        "SQLITE_PATH": str(tmp / "e2e.sqlite3"),
        "TURNSCOPE_VAR_DIR": str(tmp),
        "PYTHONPATH": str(REPO),
        "LOG_LEVEL": "WARNING",
    })
    env.update(extra)
    return env


def prepare(env: dict[str, str]) -> dict[str, Any]:
    out = subprocess.run([sys.executable, "-m", "tests.live.e2e_setup"], cwd=REPO, env=env,
                         capture_output=True, text=True, timeout=120)
    if out.returncode != 0:
        raise RuntimeError(f"e2e setup failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


class Daphne:
    def __init__(self, env: dict[str, str], log: Path) -> None:
        self.port = free_port()
        self.log = log
        self._log_file = log.open("w")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(self.port),
             "tests.live.e2e_asgi:application"],
            cwd=REPO, env=env, stdout=self._log_file, stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"daphne exited:\n{log.read_text()[-3000:]}")
            with contextlib.suppress(OSError), socket.create_connection(
                    ("127.0.0.1", self.port), timeout=0.5):
                return
            time.sleep(0.1)
        raise RuntimeError("daphne did not start listening")

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def post(self, path: str) -> None:
        request = urllib.request.Request(self.url + path, data=b"", method="POST")
        with urllib.request.urlopen(request, timeout=10) as response:
            assert response.status == 202

    def get_json(self, path: str) -> Any:
        with urllib.request.urlopen(self.url + path, timeout=10) as response:
            return json.loads(response.read())

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)
        self._log_file.close()


def chromium():
    """A Playwright browser on Debian's chromium, or skip with the reason."""
    if not os.access(CHROMIUM, os.X_OK):
        pytest.skip(f"{CHROMIUM} is not installed (apt-get install chromium)")
    sync_api = pytest.importorskip("playwright.sync_api")
    manager = sync_api.sync_playwright().start()
    browser = manager.chromium.launch(
        executable_path=CHROMIUM,
        args=["--no-sandbox", "--disable-gpu", "--disable-background-networking"],
    )
    return manager, browser


def logged_in_page(browser: Any, server: Daphne, session: str) -> Any:
    context = browser.new_context()
    context.add_cookies([{"name": "sessionid", "value": session, "domain": "127.0.0.1",
                          "path": "/"}])
    page = context.new_page()
    page.set_default_timeout(20000)
    return page


# -- reading the page ------------------------------------------------------------------------

TURN_STATE_JS = """(turnId) => {
  const el = document.getElementById('turn-' + turnId);
  if (!el) return null;
  const tail = el.querySelector('.streaming-tail');
  // The tail's streamed text alone: without the titles of the citations listed under it.
  const streamed = tail ? Array.from(tail.childNodes)
    .filter((n) => !(n.classList && n.classList.contains('tail-cites')))
    .map((n) => n.textContent).join('') : null;
  return {status: el.dataset.status, text: el.textContent,
          tail: tail ? tail.textContent : null, streamed: streamed,
          tails: el.querySelectorAll('.streaming-tail, .streaming-tail-ended').length};
}"""

FRAGMENT_TEXT_JS = """async ([url]) => {
  const r = await fetch(url, {credentials: 'same-origin', cache: 'no-store'});
  const doc = new DOMParser().parseFromString(await r.text(), 'text/html');
  return doc.querySelector('section.turn').textContent;
}"""


def norm(text: str) -> str:
    return " ".join(text.split())


def squeezed(text: str) -> str:
    """``text`` without its whitespace: a streaming tail that spans a block boundary reads as
    the blocks' textContent, which joins "# Heading" and the next paragraph without the blank
    line between them."""
    return "".join(text.split())


def agent_turn_id(server: Daphne, conversation: str) -> str | None:
    turns = server.get_json(f"/_e2e/text/{conversation}/")["turns"]
    return turns[-1]["id"] if turns else None


def wait_for_turn(server: Daphne, conversation: str, *, timeout: float = 20) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        turns = server.get_json(f"/_e2e/text/{conversation}/")["turns"]
        if turns and turns[-1]["status"] == "streaming":
            return turns[-1]
        time.sleep(0.05)
    raise AssertionError("no streaming turn appeared")


def wait_until_settled(page: Any, server: Daphne, conversation: str, turn_id: str,
                       timeout: float = 40) -> dict[str, Any]:
    """Wait for the stored turn to finish and the page to show it with no fetch in flight."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        stored = {t["id"]: t for t in server.get_json(f"/_e2e/text/{conversation}/")["turns"]}
        shown = page.evaluate(TURN_STATE_JS, turn_id)
        busy = page.evaluate("() => window.turnscopeLive && window.turnscopeLive.busy()")
        if (stored[turn_id]["status"] != "streaming" and shown
                and shown["status"] == stored[turn_id]["status"] and not busy):
            return stored[turn_id]
        time.sleep(0.1)
    raise AssertionError(f"page did not settle: {page.evaluate(TURN_STATE_JS, turn_id)}")


def assert_converged(page: Any, server: Daphne, conversation: str, index_of: dict[str, int]):
    """Every turn on the page reads exactly as the server renders it from the store now."""
    for turn_id, index in index_of.items():
        shown = page.evaluate(TURN_STATE_JS, turn_id)
        fresh = page.evaluate(FRAGMENT_TEXT_JS, [f"/c/{conversation}/turns/{index}/"])
        assert shown is not None, f"turn {turn_id} missing from the page"
        assert shown["tails"] == 0, "a finished turn still shows streaming text"
        assert norm(shown["text"]) == norm(fresh)


class RedisServer:
    """A redis-server of the test's own, on a free port, that the test stops and starts again
    (an outage, then a restart that has forgotten everything: no persistence)."""

    def __init__(self, log: Path) -> None:
        import shutil

        self.binary = shutil.which("redis-server")
        if self.binary is None:
            pytest.skip("redis-server is not installed (apt-get install redis-server)")
        self.port = free_port()
        self.log = log
        self.proc: subprocess.Popen[bytes] | None = None
        self.start()

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        with self.log.open("a") as out:
            self.proc = subprocess.Popen(
                [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
                 "--appendonly", "no"], stdout=out, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError), socket.create_connection(
                    ("127.0.0.1", self.port), timeout=0.5) as s:
                s.sendall(b"PING\r\n")
                if s.recv(16).startswith(b"+PONG"):
                    return
            time.sleep(0.05)
        raise RuntimeError("redis-server did not start")

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.kill()  # as a crash would: no goodbye to the clients
            self.proc.wait(10)
            self.proc = None
