"""``manage.py serve``: what it does before serving, and the real thing — daphne with DEBUG off
serving pages and their static files, reading the client from a proxy's headers, and stopping
on SIGTERM."""

from __future__ import annotations

import contextlib
import http.cookiejar
import io
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
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
    assert (host, port, options["static"], options["proxy_headers"]) == (
        "127.0.0.1", 8123, True, False)
    left.refresh_from_db()
    running.refresh_from_db()
    assert (left.status, running.status) == ("interrupted", "streaming")
    assert "finished 1 turn(s)" in out.getvalue()
    assert "http://127.0.0.1:8123/" in out.getvalue()

    call_command("serve", "--no-static", "--proxy-headers", stdout=(out := io.StringIO()))
    assert (calls[-1][2]["static"], calls[-1][2]["proxy_headers"]) == (False, True)
    assert "collectstatic" in out.getvalue()


# -- the real thing ------------------------------------------------------------------------------


def _get(url: str, opener: urllib.request.OpenerDirector | None = None,
         data: bytes | None = None, headers: dict[str, str] | None = None
         ) -> tuple[int, str, bytes]:
    request = urllib.request.Request(url, data=data, headers=headers or {})
    try:
        with (opener or urllib.request.build_opener()).open(request, timeout=10) as response:
            return response.status, response.headers.get("Content-Type", ""), response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.headers.get("Content-Type", ""), error.read()


@contextlib.contextmanager
def _serving(tmp_path: Path, *extra: str, **env_extra: str) -> Iterator[str]:
    """``manage.py serve`` on a migrated SQLite database with DEBUG off, as deployed; stopped
    by SIGTERM, which it must answer by exiting cleanly."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("DATABASE_URL", "REDIS_URL", "DEBUG", "DJANGO_SETTINGS_MODULE")}
    env.update({"SQLITE_PATH": str(tmp_path / "db.sqlite3"), "TURNSCOPE_VAR_DIR": str(tmp_path),
                "ALLOWED_HOSTS": "127.0.0.1", "LOG_LEVEL": "WARNING",
                "DJANGO_SUPERUSER_PASSWORD": "a-long-password-1"}, **env_extra)
    manage = [sys.executable, str(REPO / "manage.py")]
    for command in (["migrate"], ["createsuperuser", "--noinput", "--username", "ana",
                                  "--email", "ana@example.com"]):
        done = subprocess.run([*manage, *command, "--verbosity", "0"], cwd=REPO, env=env,
                              capture_output=True, text=True, timeout=180)
        assert done.returncode == 0, done.stderr[-2000:]
    port = free_port()
    log = tmp_path / f"serve-{port}.log"
    with log.open("w") as out:
        proc = subprocess.Popen([*manage, "serve", "--port", str(port), *extra], cwd=REPO,
                                env=env, stdout=out, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + 30
            while not _listening(port):
                assert proc.poll() is None, log.read_text()[-3000:]
                assert time.monotonic() < deadline, "not listening:\n" + log.read_text()[-3000:]
                time.sleep(0.1)
            yield f"http://127.0.0.1:{port}"
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                code = proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                raise
    assert code == 0, log.read_text()[-3000:]


def _listening(port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.5):
        return True
    return False


@pytest.mark.e2e
@pytest.mark.slow
def test_served_with_debug_off_pages_come_with_their_styles(tmp_path):
    """What a deployment sees: DEBUG off, the login page and the stylesheet it links."""
    with _serving(tmp_path) as base:
        status, _, page = _get(base + "/accounts/login/")
        assert status == 200 and b'href="/static/app.css"' in page
        status, kind, css = _get(base + "/static/app.css")
        assert status == 200 and kind.startswith("text/css") and css.strip()
        assert _get(base + "/static/no-such-file.css")[0] == 404


@pytest.mark.e2e
@pytest.mark.slow
def test_with_no_static_the_files_are_left_to_the_proxy(tmp_path):
    with _serving(tmp_path, "--no-static") as base:
        assert _get(base + "/accounts/login/")[0] == 200
        assert _get(base + "/static/app.css")[0] == 404


def _login(base: str, client: str, password: str) -> int:
    """A login from ``client`` (the address a proxy names in X-Forwarded-For): its status."""
    opener = urllib.request.build_opener(
        urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()),
        type("NoRedirect", (urllib.request.HTTPRedirectHandler,),
             {"redirect_request": lambda *a, **k: None})())
    headers = {"X-Forwarded-For": client}
    _, _, page = _get(base + "/accounts/login/", opener, headers=headers)
    token = re.search(rb'name="csrfmiddlewaretoken" value="([^"]+)"', page).group(1).decode()
    form = urllib.parse.urlencode({"csrfmiddlewaretoken": token, "username": "ana",
                                   "password": password}).encode()
    return _get(base + "/accounts/login/", opener, form, headers)[0]


@pytest.mark.e2e
@pytest.mark.slow
def test_behind_a_proxy_the_login_limit_counts_each_client_not_the_proxy(tmp_path):
    """With --proxy-headers, a client who used up the failed-login limit is refused, and
    another client behind the same proxy still logs in; without it, both are the proxy."""
    for extra, other_client in ((["--proxy-headers"], 302), ([], 429)):
        with _serving(tmp_path / "-".join(extra or ["plain"]), *extra,
                      TURNSCOPE_LOGIN_FAILURES="2/15min") as base:
            # The second failure uses up the limit: the page says so (429).
            assert [_login(base, "203.0.113.7", "wrong") for _ in range(2)] == [200, 429]
            assert _login(base, "203.0.113.7", "a-long-password-1") == 429
            # a client that writes its own X-Forwarded-For ahead of what the proxy appends
            # (nginx's $proxy_add_x_forwarded_for) is still the same client
            assert _login(base, "198.51.100.99, 203.0.113.7", "wrong") == 429
            assert _login(base, "198.51.100.4", "a-long-password-1") == other_client
