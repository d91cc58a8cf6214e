"""Sending a built request to the recorded upstream, for the replay tests."""

from __future__ import annotations

import asyncio

import httpx

from providers.requests import UpstreamRequest
from upstream.recorded import RecordedUpstream


def send(app: RecordedUpstream, request: UpstreamRequest) -> httpx.Response:
    """``request`` sent to the recorded upstream (in process, over its ASGI interface)."""
    async def go() -> httpx.Response:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://upstream") as client:
            url = request.path + (f"?{request.query}" if request.query else "")
            response = await client.request(request.method, url, content=request.content(),
                                            headers=list(request.headers))
            await response.aread()
            return response

    return asyncio.run(go())
