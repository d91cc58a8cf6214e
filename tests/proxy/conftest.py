from __future__ import annotations

import time

import pytest
from rest_framework.authtoken.models import Token

from live import tasks
from tests.servers import served
from upstream.recorded import RecordedUpstream

# Planted provider credentials: forwarded to the upstream, never kept anywhere.
ANTHROPIC_KEY = "sk-ant-api03-PLANTEDanthropicKEY0123456789abcdefghij"
OPENAI_KEY = "sk-proj-PLANTEDopenaiKEY0123456789abcdefghijklmn"
GOOGLE_KEY = "AIzaPLANTEDgoogleKEY0123456789abcdefghi"  # AIza + 35


@pytest.fixture
def owner(django_user_model):
    return django_user_model.objects.create_user("owner", password="pw-owner-123")


@pytest.fixture
def token(owner):
    return Token.objects.create(user=owner).key


@pytest.fixture
def upstream(settings):
    app = RecordedUpstream()
    with served(app) as server:
        settings.TURNSCOPE_UPSTREAM = {p: server.url for p in ("anthropic", "openai", "google")}
        app.url = server.url
        yield app


@pytest.fixture
def proxy_url():
    from proxy.app import application

    with served(application) as server:
        yield server.url


def wait_recorded(timeout: float = 20.0) -> None:
    """Until no recorder task is left running (they run on the proxy server's loop)."""
    deadline = time.monotonic() + timeout
    time.sleep(0.02)
    while any(t.get_name().startswith("proxy-") and not t.done()
              for t in list(tasks.active_tasks)):
        if time.monotonic() > deadline:
            raise AssertionError("a recorder is still running")
        time.sleep(0.02)
