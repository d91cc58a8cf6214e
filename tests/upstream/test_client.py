"""The one upstream client keeps no state between requests."""

from __future__ import annotations

import asyncio

from tests.servers import served
from upstream import client
from upstream.recorded import RecordedUpstream, Reply


def test_a_cookie_one_response_sets_is_not_sent_on_the_next_request(settings):
    """One client serves every user and the server's own keys: a provider's cookie (Cloudflare
    sets ``__cf_bm`` on real responses) set on one user's call must not go out on another's."""
    upstream = RecordedUpstream()
    cookie = ("set-cookie", "__cf_bm=USERONE; Path=/; HttpOnly")
    upstream.add(Reply(chunks=(b"{}",), content_type="application/json", headers=(cookie,)),
                 Reply(chunks=(b"{}",), content_type="application/json", headers=(cookie,)))
    with served(upstream) as server:
        settings.TURNSCOPE_UPSTREAM = {"anthropic": server.url}

        async def two_calls() -> None:
            try:
                for _ in range(2):
                    response = await client.send("GET", client.url("anthropic", "/v1/models"))
                    await response.aread()
                    await response.aclose()
                    assert response.headers["set-cookie"].startswith("__cf_bm=")
            finally:
                await client.aclose()

        asyncio.run(two_calls())
    first, second = upstream.requests
    assert first.header("cookie") is None
    assert second.header("cookie") is None
