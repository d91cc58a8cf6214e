from __future__ import annotations

import pytest

from tests.proxy.conftest import owner, token, upstream  # noqa: F401  (the same fixtures)
from tests.servers import served


@pytest.fixture
def otlp_url():
    """The whole ASGI app (as ``serve`` runs it) on a real socket: /otlp/ is routed ahead of
    Django there."""
    from turnscope.asgi import application

    with served(application) as server:
        yield server.url
