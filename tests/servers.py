"""ASGI apps on a real socket (port 0) for the tests: uvicorn in a thread of the test process,
so a test reads the database its server writes."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Iterator
from typing import Any


class Served:
    def __init__(self, app: Any) -> None:
        import uvicorn

        config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning",
                                lifespan="off", loop="asyncio", http="h11", ws="none",
                                server_header=False, date_header=False,
                                timeout_graceful_shutdown=1)
        self.server = uvicorn.Server(config)
        self.server.install_signal_handlers = lambda: None  # not the main thread
        self.thread = threading.Thread(target=asyncio.run, args=(self._serve(),), daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("the test server did not start")
            time.sleep(0.01)
        self.port = self.server.servers[0].sockets[0].getsockname()[1]

    async def _serve(self) -> None:
        try:
            await self.server.serve()
        finally:
            # the proxy's pool of connections to the providers lives on this loop: closed with it
            from upstream import forward

            await forward.aclose()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(10)


@contextlib.contextmanager
def served(app: Any) -> Iterator[Served]:
    server = Served(app)
    try:
        yield server
    finally:
        server.stop()
