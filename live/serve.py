"""Serving with daphne in this process (the demo), with the live tasks on daphne's loop."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from typing import Any

log = logging.getLogger("turnscope.live")


def asgi_application(*, static: bool = True) -> Any:
    """The project's ASGI app (``settings.ASGI_APPLICATION``, a protocol router); with
    ``static`` its HTTP side also serves the static files (from the app and STATICFILES_DIRS, no
    collectstatic), as runserver would."""
    from channels.routing import ProtocolTypeRouter, get_default_application
    from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler

    application = get_default_application()
    if not static:
        return application
    return ProtocolTypeRouter({
        "http": ASGIStaticFilesHandler(application.application_mapping["http"]),
        "websocket": application.application_mapping["websocket"],
    })


async def stop_live_tasks(timeout: float = 5.0) -> None:
    """Cancel running turns so each records its interruption (partial text kept)."""
    from live.runner import active_tasks

    tasks = list(active_tasks)
    for task in tasks:
        task.cancel()
    if tasks:
        await asyncio.wait(tasks, timeout=timeout)


def serve(
    host: str,
    port: int,
    *,
    on_ready: Callable[[], Coroutine[Any, Any, Any]] | None = None,
    static: bool = True,
    verbosity: int = 1,
) -> None:
    """Run daphne until interrupted; ``on_ready()`` is started as a task on its loop."""
    from daphne.endpoints import build_endpoint_description_strings
    from daphne.server import Server  # installs the asyncio reactor: import it first
    from twisted.internet import defer, reactor

    from live import runner

    def ready() -> None:
        loop = asyncio.get_event_loop()
        if on_ready is not None:
            loop.call_soon(lambda: runner.spawn(on_ready(), name="demo"))
        reactor.addSystemEventTrigger(
            "before", "shutdown",
            lambda: defer.Deferred.fromFuture(loop.create_task(stop_live_tasks())),
        )

    server = Server(
        application=asgi_application(static=static),
        endpoints=build_endpoint_description_strings(host=host, port=port),
        ready_callable=ready,
        verbosity=verbosity,
    )
    server.run()
