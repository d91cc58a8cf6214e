"""Recorded provider responses (raw SSE, one JSON event per line, or a JSON body).

Several files of one provider in one upload are grouped by what their wire says
(``GROUPINGS``, "auto"): a file continues the one before it only when its content says so, as
a continuation answering the server tool use a ``pause_turn`` response left open, or the round
after a response that ended asking for client tool results (``tool_use``); any other file is a
conversation of its own. The uploader may choose instead, as the command line does: one turn
with its continuations in the order given (``manage.py ingest FILE...``), or one conversation
each (``manage.py ingest --each``). Which provider wrote a file is read from its content when
not given.
"""

from __future__ import annotations

from collections.abc import Sequence

import providers
from importers.base import ImportedConversation, ImportedTurn, Problem, WireResponse
from providers import registry
from streams import parts
from streams.errors import MalformedInput

FORMAT = "recording"
GROUPINGS = {
    "auto": "Decided by their content (a continuation joins the response it continues)",
    "continuations": "One turn: a response and its continuations, in the order given "
                     "(as ingest FILE…)",
    "each": "One conversation each (as ingest --each)",
}

# Frame shapes only one provider writes (``Provider.signature``); the one found first in the
# file wins.
_SIGNATURES = tuple((p.name, p.signature) for p in registry.providers())
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


def conversations(
    files: Sequence[tuple[str, bytes]], provider: str | None = None, grouping: str = "auto"
) -> list[ImportedConversation | Problem]:
    """``files`` of one provider as conversations, grouped as ``grouping`` says
    (``GROUPINGS``)."""
    if grouping not in GROUPINGS:
        raise ValueError(f"unknown grouping {grouping!r} (one of {', '.join(GROUPINGS)})")
    if grouping == "continuations" or len(files) < 2:
        return [conversation(files, provider)]
    if grouping == "each" or provider is None:
        return [conversation([f], provider) for f in files]
    groups: list[list[tuple[str, bytes]]] = []
    for file in files:
        if groups and continues(provider, groups[-1][-1][1], file[1]):
            groups[-1].append(file)
        else:
            groups.append([file])
    return [conversation(group, provider) for group in groups]


def continues(provider: str, previous: bytes, raw: bytes) -> bool:
    """Whether the response ``raw`` continues ``previous``, as their wire says: ``previous``
    paused (``pause_turn``) and ``raw`` first answers the hosted call it left open, or
    ``previous`` ended asking for client tool results (``tool_use``: ``raw`` is the round
    after them). A file that cannot be read continues nothing (its own import says why)."""
    try:
        reason, left_open = _ending(provider, previous)
        if reason == "tool_use":
            return True
        return reason == "pause_turn" and _answers(provider, raw, left_open)
    except (MalformedInput, ValueError):
        return False


def _ending(provider: str, raw: bytes) -> tuple[str, set[str]]:
    """How a response ended, and the hosted calls it left open."""
    reason = ""
    started: set[str] = set()
    ended: set[str] = set()
    for part in providers.parse(provider, raw):
        if isinstance(part, parts.ResponseEnd):
            reason = part.end_reason
        elif isinstance(part, parts.Activity):
            (started if part.state == "started" else ended).add(part.activity_id)
    return reason, started - ended


def _answers(provider: str, raw: bytes, left_open: set[str]) -> bool:
    """Whether the response's first content is the result of one of ``left_open``."""
    for part in providers.parse(provider, raw):
        if isinstance(part, parts.Activity):
            return part.activity_id in left_open and part.state != "started"
        if isinstance(part, parts.TextDelta | parts.ToolCall) or (
                isinstance(part, parts.BlockStart) and part.kind == "message"):
            return False
    return False
