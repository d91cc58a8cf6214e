"""ASGI entry point: HTTP through Django, websockets through the live app's router, and the
recording proxy (``/proxy/``) and the OTLP trace receiver (``/otlp/``) as plain ASGI apps ahead of
Django (see ``proxy.app``: exact
headers and next to no added latency)."""

import gc
import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "turnscope.settings")
django_asgi_app = get_asgi_application()

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402

from live import bodies, transport  # noqa: E402
from live.middleware import WebsocketSession  # noqa: E402
from live.origins import ExactOriginValidator  # noqa: E402
from live.routing import websocket_urlpatterns  # noqa: E402
from otlp.app import routed as otlp_routed  # noqa: E402
from proxy.app import redact_access_log, routed  # noqa: E402

transport.send_immediately()  # daphne's sockets: a frame leaves when it is written
bodies.limit_request_bodies()  # a body over its endpoint's cap is refused before it is read
redact_access_log()  # the proxy's path tokens and ?key= never reach daphne's access log

application = ProtocolTypeRouter(
    {
        "http": otlp_routed(routed(django_asgi_app)),
        "websocket": ExactOriginValidator(
            WebsocketSession(AuthMiddlewareStack(URLRouter(websocket_urlpatterns)))
        ),
    }
)

# Everything loaded so far (Django, the apps, their modules) lives as long as the process: out of
# the collector's sight, a full collection no longer walks it, which would otherwise stop every
# live stream for tens of milliseconds now and then.
gc.collect()
gc.freeze()
