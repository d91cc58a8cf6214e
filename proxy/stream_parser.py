"""TEMPORARY SHIM — remove when ``providers.stream_parser`` lands on main.

The push-style parser API (``providers.stream_parser(provider, context) -> StreamParser`` with
``feed(chunk: bytes) -> list[Part]`` and ``close() -> list[Part]``, the parts equal to
``providers.parse`` of the whole bytes for any chunking) is being built in ``providers/``. Until
it lands this stand-in has the same signature: it buffers and parses everything on ``close()``,
so a proxied turn is recorded whole but shows nothing live until its response ends.
``stream_parser`` below prefers the real one as soon as ``providers`` has it.
"""

from __future__ import annotations

from typing import Protocol

import providers
from streams.parts import Part


class StreamParser(Protocol):
    def feed(self, chunk: bytes) -> list[Part]: ...

    def close(self) -> list[Part]: ...


class _Buffered:
    def __init__(self, provider: str, context: providers.WireContext | None) -> None:
        providers.adapter(provider)
        self.provider = provider
        self.context = context
        self.chunks: list[bytes] = []

    def feed(self, chunk: bytes) -> list[Part]:
        self.chunks.append(chunk)
        return []

    def close(self) -> list[Part]:
        raw = b"".join(self.chunks)
        if not raw.strip():
            return []
        return list(providers.parse(self.provider, raw, self.context))


def stream_parser(provider: str, context: providers.WireContext | None = None) -> StreamParser:
    real = getattr(providers, "stream_parser", None)
    if real is not None:
        return real(provider, context)
    return _Buffered(provider, context)
