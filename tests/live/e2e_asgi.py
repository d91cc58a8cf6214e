"""ASGI app for the end-to-end tests: the project's app plus static files, and (for the flood
test) a consumer that is slow to forward what the layer delivers."""

import asyncio
import os

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.live.e2e_settings")
django.setup()

from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from django.urls import path  # noqa: E402

from live.consumers import LiveConsumer  # noqa: E402
from live.origins import ExactOriginValidator  # noqa: E402
from live.serve import asgi_application  # noqa: E402

SLOW_MS = float(os.environ.get("LIVE_E2E_SLOW_MS", "0") or 0)


class SlowConsumer(LiveConsumer):
    async def live_message(self, event):
        await asyncio.sleep(SLOW_MS / 1000)
        await super().live_message(event)


application = asgi_application(static=True)
if SLOW_MS:
    from channels.auth import AuthMiddlewareStack

    from live.middleware import WebsocketSession

    application = ProtocolTypeRouter({
        "http": application.application_mapping["http"],
        "websocket": ExactOriginValidator(WebsocketSession(AuthMiddlewareStack(URLRouter([
            path("ws/conversations/<uuid:conversation_id>/", SlowConsumer.as_asgi()),
        ])))),
    })
