"""A share's token never reaches the server's log: daphne (``daphne turnscope.asgi:application``,
whose access log names every request's path) serves a shared page, its window, its exports, a
CSP report from it, the API's list and revoke, and the 404 after; its whole output (the access
log and Turnscope's own log lines) is then read."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
import urllib.request

import orjson
import pytest

from tests.live.e2e import REPO, free_port
from tests.live.test_serve_command import _get, _listening

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

MAKE_SHARE = """
import json, os, django
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "turnscope.settings")
django.setup()
from django.contrib.auth import get_user_model
from rest_framework.authtoken.models import Token
from conversations import sharing
from live import bundled
ana = get_user_model().objects.get(username="ana")
[(_, conversation, _)] = bundled.load(ana, only=["anthropic-tides"])
share, token = sharing.create(conversation, ana)
print(json.dumps({"token": token, "api": Token.objects.get_or_create(user=ana)[0].key}))
"""


def _env(tmp_path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("DATABASE_URL", "REDIS_URL", "DEBUG", "DJANGO_SETTINGS_MODULE")}
    env.update({"SQLITE_PATH": str(tmp_path / "db.sqlite3"), "TURNSCOPE_VAR_DIR": str(tmp_path),
                "ALLOWED_HOSTS": "127.0.0.1", "LOG_LEVEL": "INFO",
                "DJANGO_SUPERUSER_PASSWORD": "a-long-password-1"})
    return env


@contextlib.contextmanager
def _daphne(tmp_path, env):
    port = free_port()
    log = tmp_path / "daphne.log"
    with log.open("w") as out:
        proc = subprocess.Popen([sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p",
                                 str(port), "turnscope.asgi:application"], cwd=REPO, env=env,
                                stdout=out, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + 30
            while not _listening(port):
                assert proc.poll() is None, log.read_text()[-3000:]
                assert time.monotonic() < deadline, "not listening:\n" + log.read_text()[-3000:]
                time.sleep(0.1)
            yield f"http://127.0.0.1:{port}"
        finally:
            proc.terminate()
            proc.wait(15)


def test_a_token_never_appears_in_the_server_log(tmp_path):
    env = _env(tmp_path)
    manage = [sys.executable, str(REPO / "manage.py")]
    for command in (["migrate"], ["createsuperuser", "--noinput", "--username", "ana",
                                  "--email", "ana@example.com"]):
        done = subprocess.run([*manage, *command, "--verbosity", "0"], cwd=REPO, env=env,
                              capture_output=True, text=True, timeout=180)
        assert done.returncode == 0, done.stderr[-2000:]
    made = subprocess.run([sys.executable, "-c", MAKE_SHARE], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=120)
    assert made.returncode == 0, made.stderr[-2000:]
    keys = json.loads(made.stdout.strip().splitlines()[-1])
    token, api = keys["token"], {"Authorization": f"Token {keys['api']}"}
    with _daphne(tmp_path, env) as base:
        page = f"{base}/s/{token}/"
        status, _, body = _get(page)
        assert status == 200 and b"two high tides" in body
        assert _get(f"{page}turns/?from=0&to=1")[0] == 200
        assert _get(f"{page}export/?format=json")[0] == 200
        assert _get(f"{page}export/?format=nonsense")[0] == 400
        report = orjson.dumps({"csp-report": {"document-uri": page, "referrer": page,
                                              "violated-directive": "script-src",
                                              "blocked-uri": "inline"}})
        _get(f"{base}/csp-report/", data=report,
             headers={"Content-Type": "application/csp-report"})
        status, _, listed = _get(f"{base}/api/v1/shares", headers=api)
        assert status == 200 and token.encode() in listed
        revoke = urllib.request.Request(f"{base}/api/v1/shares/{token}", method="DELETE",
                                        headers=api)
        with urllib.request.urlopen(revoke, timeout=10) as done:
            assert done.status == 204
        assert _get(page)[0] == 404
        assert _get(f"{base}/s/{token[:-2]}xy/")[0] == 404
    log = (tmp_path / "daphne.log").read_text()
    assert token not in log and token[:16] not in log
    # The log did record those requests, with the token masked.
    assert log.count("/s/[REDACTED]/") >= 7, log[-3000:]
    assert "/api/v1/shares/[REDACTED]" in log, log[-3000:]
