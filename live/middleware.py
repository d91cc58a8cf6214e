"""The websocket route's session: read once from the cookie, never wrapped around sends.

Channels' ``SessionMiddleware`` wraps every message a consumer sends, to save a modified session
when an HTTP response starts. A websocket never sends one, so on this route the wrapper only
costs: a few proxied attribute reads per frame, per viewer, on the live fan-out. With a session
already in the scope, ``SessionMiddleware`` passes it through unwrapped, and ``AuthMiddleware``
reads the user from it as usual; this middleware, outside ``AuthMiddlewareStack``, puts it there.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

from channels.middleware import BaseMiddleware
from channels.sessions import CookieMiddleware
from django.conf import settings


class _SessionFromCookie(BaseMiddleware):
    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> Any:
        store = import_module(settings.SESSION_ENGINE).SessionStore
        # Loaded on first use, by AuthMiddleware, in a database thread.
        session = store(scope["cookies"].get(settings.SESSION_COOKIE_NAME))
        return await self.inner(dict(scope, session=session), receive, send)


def WebsocketSession(inner: Any) -> Any:  # named like channels' AuthMiddlewareStack
    """Wrap ``inner`` (an ``AuthMiddlewareStack``) with the session read from the cookie."""
    return CookieMiddleware(_SessionFromCookie(inner))
