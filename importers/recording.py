"""Recorded provider responses (raw SSE, one JSON event per line, or a JSON body).

Several files of one provider in one upload are one agent turn: the first response and its
continuations, in the order given (as ``manage.py ingest FILE...``). Which provider wrote a file
is read from its content when not given.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import providers
from importers.base import ImportedConversation, ImportedTurn, Problem, WireResponse

FORMAT = "recording"

# Frame shapes only one provider writes; the one found first in the file wins.
_SIGNATURES: tuple[tuple[str, re.Pattern[bytes]], ...] = (
    ("anthropic", re.compile(
        rb'"type"\s*:\s*"(?:message_start|content_block_start|content_block_delta)"'
        rb'|event:\s*message_start|"stop_reason"\s*:|"model"\s*:\s*"claude')),
    ("openai", re.compile(
        rb'"type"\s*:\s*"response\.|"object"\s*:\s*"(?:response|chat\.completion)'
        rb'|event:\s*response\.|"choices"\s*:')),
    ("google", re.compile(rb'"candidates"\s*:|"modelVersion"\s*:|"usageMetadata"\s*:'
                          rb'|"event_type"\s*:\s*"interaction\.|"object"\s*:\s*"interaction"')),
)
HEAD = 64 * 1024


def provider_of(raw: bytes, *, whole: bool = False) -> str | None:
    """The provider whose wire format ``raw`` is, from its first frames (the whole of it with
    ``whole``: a JSON body may name its model only after its content); None if unsure."""
    head = raw if whole else raw[:HEAD]
    found = [(m.start(), provider) for provider, signature in _SIGNATURES
             if (m := signature.search(head))]
    return min(found)[1] if found else None


def looks_like(head: bytes) -> bool:
    return provider_of(head) is not None


def conversation(
    files: Sequence[tuple[str, bytes]], provider: str | None = None
) -> ImportedConversation | Problem:
    """One agent turn from ``files`` (a response and its continuations)."""
    names = " + ".join(name for name, _ in files)
    if not files:
        return Problem(names, "no recording given")
    if provider is None:
        found = {name: provider_of(raw, whole=True) for name, raw in files}
        unknown = [name for name, p in found.items() if p is None]
        if unknown:
            return Problem(unknown[0], "not a recognisable provider recording: choose the "
                           "provider (or the format) explicitly", 1)
        kinds = set(found.values())
        if len(kinds) > 1:
            return Problem(names, "these recordings come from different providers "
                           f"({', '.join(sorted(k for k in kinds if k))}): upload them apart")
        provider = kinds.pop()
    if provider not in providers.ADAPTERS:
        return Problem(names, f"unknown provider {provider!r}")
    responses = [WireResponse(name, provider, raw) for name, raw in files]
    return ImportedConversation(
        source=files[0][0], format=FORMAT, key="", title="",
        turns=[ImportedTurn("agent", responses)],
        notes=[f"{len(files)} responses as one turn (continuations)"] if len(files) > 1 else [],
        files=tuple(name for name, _ in files),
    )
