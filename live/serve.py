"""Serving with daphne in this process (the demo), with the live tasks on daphne's loop."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

log = logging.getLogger("turnscope.live")

# What runs beside a server, registered by the apps (``proxy.recorders``): ``start()`` before it
# serves, ``await stop()`` as it stops, while its requests end.
Companion = tuple[Callable[[], None], Callable[[], Awaitable[None]]]
companions: list[Companion] = []


def add_companion(start: Callable[[], None], stop: Callable[[], Awaitable[None]]) -> None:
    if (start, stop) not in companions:
        companions.append((start, stop))


def asgi_application(*, static: bool = True, mounts: dict[str, Any] | None = None) -> Any:
    """The project's ASGI app (``settings.ASGI_APPLICATION``, a protocol router); with
    ``static`` its HTTP side also serves the static files (from the app and STATICFILES_DIRS, no
    collectstatic), as runserver would. ``mounts``: path prefix -> an ASGI app answering the
    HTTP requests under it (the demo's recorded provider)."""
    from channels.routing import ProtocolTypeRouter, get_default_application
    from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler

    application = get_default_application()
    if not static and not mounts:
        return application
    http = application.application_mapping["http"]
    if static:
        http = ASGIStaticFilesHandler(http)
    if mounts:
        http = _mounted(http, mounts)
    return ProtocolTypeRouter({"http": http,
                               "websocket": application.application_mapping["websocket"]})


def _mounted(fallback: Any, mounts: dict[str, Any]) -> Any:
    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        path = scope.get("path", "")
        for prefix, mounted in mounts.items():
            if path == prefix or path.startswith(prefix.rstrip("/") + "/"):
                await mounted(scope, receive, send)
                return
        await fallback(scope, receive, send)

    return app


async def stop_live_tasks(timeout: float = 5.0) -> None:
    """Cancel running turns so each records its interruption (partial text kept; a proxied
    turn is left to its exchange in the capture log, which the next start records whole), then
    give up this server's lease: whoever starts next takes what it left at once."""
    from asgiref.sync import sync_to_async

    from live import instances
    from live import tasks as live_tasks

    tasks = live_tasks.stop()
    if tasks:
        await asyncio.wait(tasks, timeout=timeout)
    try:
        await sync_to_async(instances.deregister)()
    except Exception:  # the lease runs out by itself
        log.warning("could not give up this server's lease", exc_info=True)


async def _stop(server: Any, timeout: float = 5.0) -> None:
    """A stopping server's last steps: its turns interrupted (``stop_live_tasks``), its
    requests' applications over (daphne cancels them: a proxied response ends at the last chunk
    it forwarded), what they told the capture log committed, and then what was written to each
    connection flushed before it closes. Otherwise the reactor's shutdown drops the writes still
    buffered in the process: an app would miss the end of what the log holds as forwarded."""
    companions_stopped = asyncio.gather(*(stop() for _, stop in companions))  # meanwhile
    await stop_live_tasks(timeout)
    running = [details["application_instance"] for details in list(server.connections.values())
               if details.get("application_instance") is not None
               and not details["application_instance"].done()]
    if running:
        await asyncio.wait(running, timeout=timeout)
    from live import capture

    try:
        await asyncio.wait_for(capture.get_log().settled(), timeout)
    except Exception:  # the log's own failure is logged by its writer; the next start reads it
        log.warning("the capture log did not settle before the server stopped", exc_info=True)
    transports = [t for t in (getattr(p, "transport", None) for p in list(server.connections))
                  if t is not None]
    await companions_stopped
    for transport in transports:
        transport.loseConnection()  # after what is buffered is written (abort would drop it)
    deadline = asyncio.get_running_loop().time() + timeout
    while (any(getattr(t, "connected", False) for t in transports)
           and asyncio.get_running_loop().time() < deadline):
        await asyncio.sleep(0.02)


def serve(
    host: str,
    port: int,
    *,
    on_ready: Callable[[], Coroutine[Any, Any, Any]] | None = None,
    static: bool = True,
    mounts: dict[str, Any] | None = None,
    verbosity: int = 1,
    proxy_headers: bool = False,
) -> None:
    """Run daphne until interrupted; ``on_ready()`` is started as a task on its loop. With
    ``proxy_headers`` the client's address, port and scheme are read from the
    ``X-Forwarded-For``, ``-Port`` and ``-Proto`` headers the proxy in front sets (per-client
    limits, such as the login's, would otherwise count every client as the proxy), trusting
    only ``TURNSCOPE_TRUSTED_PROXIES`` hops (``live.forwarded``)."""
    from daphne.endpoints import build_endpoint_description_strings
    from daphne.server import Server  # installs the asyncio reactor: import it first
    from django.db import connections
    from twisted.internet import defer, reactor

    from live import instances, tasks

    def ready() -> None:
        loop = asyncio.get_event_loop()
        # the lease, and what gone servers (this one's last run included) left: at once
        loop.call_soon(lambda: tasks.spawn(instances.keep_up(), name="instance"))
        if on_ready is not None:
            loop.call_soon(lambda: tasks.spawn(on_ready(), name="demo"))
        reactor.addSystemEventTrigger(
            "before", "shutdown",
            lambda: defer.Deferred.fromFuture(loop.create_task(_stop(server))),
        )

    if proxy_headers:
        from live import forwarded

        forwarded.trust_configured_hops()  # X-Forwarded-For from the right, trusted hops only
    instances.register()  # this process owns what it runs and captures from now on
    for start, _ in companions:
        start()
    # What this thread opened while preparing: the reactor's loop never hands it back, so it
    # would stay open, idle, for the life of the process.
    connections.close_all()
    server = Server(
        application=asgi_application(static=static, mounts=mounts),
        endpoints=build_endpoint_description_strings(host=host, port=port),
        ready_callable=ready,
        verbosity=verbosity,
        **({"proxy_forwarded_address_header": "X-Forwarded-For",
            "proxy_forwarded_port_header": "X-Forwarded-Port",
            "proxy_forwarded_proto_header": "X-Forwarded-Proto"} if proxy_headers else {}),
    )
    server.run()
