"""live.middleware.WebsocketSession: the websocket's session and user, with sends unwrapped."""

from __future__ import annotations

import pytest
from asgiref.sync import async_to_sync
from channels.auth import AuthMiddlewareStack
from django.contrib.auth.models import AnonymousUser

from live.middleware import WebsocketSession

pytestmark = pytest.mark.django_db(transaction=True)


def connect(cookie: str | None) -> dict:
    seen: dict = {"sent": []}

    async def app(scope, receive, send):
        seen["user"] = scope["user"]
        seen["session"] = scope["session"]
        seen["send"] = send

    async def send(message):  # what daphne hands the application
        seen["sent"].append(message)

    async def receive():
        return {"type": "websocket.connect"}

    headers = [(b"cookie", cookie.encode())] if cookie is not None else []
    stack = WebsocketSession(AuthMiddlewareStack(app))
    async_to_sync(stack)({"type": "websocket", "headers": headers}, receive, send)
    return seen


def frame_touches_session(seen: dict, monkeypatch) -> bool:
    """Whether sending a frame reads the session (as channels' wrapper does when it owns it)."""
    touched = []
    cls = type(seen["session"])
    monkeypatch.setattr(cls, "is_empty", lambda self: touched.append(1) or False)
    async_to_sync(seen["send"])({"type": "websocket.send", "text": "x"})
    assert seen["sent"] == [{"type": "websocket.send", "text": "x"}]
    return bool(touched)


def test_a_logged_in_browser_gets_its_user_and_frames_skip_the_session(
    client, owner, monkeypatch
):
    client.force_login(owner)
    seen = connect(f"sessionid={client.cookies['sessionid'].value}; other=1")
    assert seen["user"].pk == owner.pk
    assert not frame_touches_session(seen, monkeypatch)


def test_without_it_channels_reads_the_session_on_every_frame(client, owner, monkeypatch):
    """The cost this middleware removes (if channels stops paying it, drop the middleware)."""
    seen: dict = {"sent": []}

    async def app(scope, receive, send):
        seen["session"], seen["send"] = scope["session"], send

    async def send(message):
        seen["sent"].append(message)

    client.force_login(owner)
    cookie = f"sessionid={client.cookies['sessionid'].value}".encode()
    async_to_sync(AuthMiddlewareStack(app))(
        {"type": "websocket", "headers": [(b"cookie", cookie)]}, None, send)
    seen["session"] = seen["session"]._wrapped  # the store behind channels' lazy proxy
    assert frame_touches_session(seen, monkeypatch)


@pytest.mark.parametrize("cookie", [None, "", "sessionid=not-a-session", "sessionid"])
def test_no_or_a_bad_cookie_is_anonymous(cookie, monkeypatch):
    seen = connect(cookie)
    assert isinstance(seen["user"], AnonymousUser)
    assert not frame_touches_session(seen, monkeypatch)
