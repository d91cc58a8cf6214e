"""Streamed HTTP responses fed by blocking iterators (database reads, rendering)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

from asgiref.sync import sync_to_async
from django.core.handlers.asgi import ASGIRequest
from django.http import HttpRequest, StreamingHttpResponse


async def in_thread(chunks: Iterator[bytes]) -> AsyncIterator[bytes]:
    """A blocking iterator served from an ASGI response: each step in the database thread,
    so the event loop is never blocked and each chunk goes out as soon as it is made (Django
    would otherwise read a synchronous iterator whole into memory before sending any of it)."""
    step = sync_to_async(lambda: next(chunks, None), thread_sensitive=True)
    try:
        while (chunk := await step()) is not None:
            yield chunk
    finally:
        # Closed in the thread that ran it: an export holds a read transaction open on that
        # thread's connection until it ends (``conversations.snapshot``), and a client gone
        # mid-stream ends it here, not whenever the collector finds the generator.
        close = getattr(chunks, "close", None)
        if close is not None:
            await sync_to_async(close, thread_sensitive=True)()


def streaming_response(request: HttpRequest, chunks: Iterator[bytes],
                       content_type: str) -> StreamingHttpResponse:
    """``chunks`` as a response body, streamed under ASGI and WSGI alike."""
    if isinstance(request, ASGIRequest):
        return StreamingHttpResponse(in_thread(chunks), content_type=content_type)
    return StreamingHttpResponse(chunks, content_type=content_type)
