"""Helpers for the tests of the second recording set (``../shared/fixtures/providers-more``):
the recordings as the adapters read them, and as plain JSON to state the facts from."""

from __future__ import annotations

from typing import Any

import orjson

import providers
from streams.builder import EventRecord
from streams.parts import Activity, Part, TextDelta
from streams.run import assemble
from tests.support import recorded

SET = "providers-more"
_CACHE: dict[tuple[str, str], list[list[Part]]] = {}


def responses(provider: str, name: str) -> list[list[Part]]:
    """The parts of every response the file holds (parsed once per test session)."""
    key = (provider, name)
    if key not in _CACHE:
        _CACHE[key] = [
            list(providers.parse(provider, rec.raw, rec.context))
            for rec in recorded(provider, name, SET)
        ]
    return _CACHE[key]


def parts_of(provider: str, name: str) -> list[Part]:
    (only,) = responses(provider, name)
    return only


def events_of(provider: str, name: str) -> list[EventRecord]:
    """The events the one stream runner makes of the file's responses (one turn)."""
    recs = recorded(provider, name, SET)
    _, records = assemble(
        [(name, providers.parse(provider, rec.raw, rec.context)) for rec in recs]
    )
    return records


def wire(provider: str, name: str) -> list[dict[str, Any]]:
    """The file's JSON objects as the provider sent them: every SSE ``data:`` or JSON line, or
    the one body. Independent of the adapters: the facts are stated from these."""
    (rec,) = recorded(provider, name, SET)
    text = rec.raw.decode()
    try:
        return [orjson.loads(text)]
    except orjson.JSONDecodeError:
        pass
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("data:"):
            line = line[5:].strip()
        if line.startswith("{"):
            out.append(orjson.loads(line))
    return out


def of(parts: list[Any], kind: type) -> list[Any]:
    return [p for p in parts if isinstance(p, kind)]


def text_of(parts: list[Part], key: str) -> str:
    return "".join(p.text for p in parts if isinstance(p, TextDelta) and p.key == key)


def transitions(parts: list[Part]) -> list[tuple[str, str, str]]:
    """Every hosted activity transition: (provider id, name, state), in order."""
    return [(a.activity_id, a.name, a.state) for a in of(parts, Activity)]


def blocks_of_type(objects: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    """Anthropic content blocks of ``kind``: from content_block_start events or a body."""
    found = []
    for obj in objects:
        if obj.get("type") == "content_block_start":
            block = obj["content_block"]
            if block["type"] == kind:
                found.append(block)
        elif obj.get("type") == "message":
            found += [b for b in obj["content"] if b["type"] == kind]
    return found
