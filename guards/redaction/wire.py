"""Redaction of wire bytes: as they arrive (a line at a time) and as recorded (a credential split
across stream events is found in the events' strings read joined)."""

from __future__ import annotations

import contextlib
import hashlib
from typing import Any, overload

import orjson

from guards.redaction.rules import MARK, TEXT_RULES, may_hold_secret, redact_bytes


class WireLines:
    """Wire bytes as they arrive, redacted a whole line at a time (a credential never spans
    lines, so this redacts what a redaction of the whole body would): ``feed`` returns the
    complete lines so far, redacted; ``close`` the rest."""

    def __init__(self) -> None:
        # The start of a line not yet ended, in pieces: only a new piece is searched for a line
        # end, and the pieces are joined once, when it comes (a 100 MB line arriving in 16 kB
        # reads was otherwise copied and searched whole at each read).
        self._pending: list[bytes] = []
        self.pending = 0  # bytes held

    def feed(self, chunk: bytes) -> bytes:
        cut = max(chunk.rfind(b"\n"), chunk.rfind(b"\r")) + 1
        if not cut:
            if chunk:
                self._pending.append(chunk)
                self.pending += len(chunk)
            return b""
        data = b"".join([*self._pending, chunk[:cut]])
        rest = chunk[cut:]
        self._pending, self.pending = ([rest], len(rest)) if rest else ([], 0)
        return redact_bytes(data)

    def close(self) -> bytes:
        rest = b"".join(self._pending)
        self._pending, self.pending = [], 0
        return redact_bytes(rest) if rest else b""



# -- wire recordings (kept for exact replay) ---------------------------------------------------


def _secret_spans(text: str) -> list[tuple[int, int]]:
    """Where ``text`` holds secrets, in its own coordinates (every rule run on the original
    text, spans merged), for texts that are pieces of one another (stream deltas)."""
    if not may_hold_secret(text):
        return []
    spans = sorted(
        (rule.start(m), m.end())
        for rule in TEXT_RULES for m in rule.regex.finditer(text) if rule.is_secret(m)
    )
    merged: list[tuple[int, int]] = []
    for start, end in spans:
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        elif end > start:
            merged.append((start, end))
    return merged


def _leaves(value: Any, path: tuple[Any, ...], out: list[tuple[tuple[Any, ...], Any, Any]],
            parent: Any = None, key: Any = None) -> None:
    if isinstance(value, str):
        out.append((path, parent, key))
    elif isinstance(value, dict):
        for k, v in value.items():
            _leaves(v, (*path, k), out, value, k)
    elif isinstance(value, list):
        for i, v in enumerate(value):
            _leaves(v, (*path, i), out, value, i)


def _frame_json(line: bytes) -> tuple[bytes, bytes, bytes] | None:
    """``(prefix, json, line end)`` of a wire line that carries one JSON event (an SSE
    ``data:`` line or a JSON line), else None."""
    body = line.rstrip(b"\r\n")
    end = line[len(body):]
    if body.startswith(b"data:"):
        prefix = b"data: " if body.startswith(b"data: ") else b"data:"
    elif body.lstrip()[:1] in (b"{", b"["):
        prefix = body[:len(body) - len(body.lstrip())]
    else:
        return None
    return prefix, body[len(prefix):], end


# What names the block an event continues (Anthropic's index, OpenAI's item and part): strings
# at the same place in events of one block are pieces of one text.
_BLOCK_KEYS = ("index", "output_index", "content_index", "item_id")


# Digests of wire bytes found to hold no credential: a recording replayed again (the live demo's
# samples, a re-run) is not parsed and scanned again. Bounded; emptied when full.
_CLEAN_WIRE: dict[bytes, None] = {}
_CLEAN_WIRE_MAX = 4096


@overload
def redact_wire(raw: bytes) -> bytes: ...
@overload
def redact_wire(raw: str) -> str: ...
def redact_wire(raw: bytes | str) -> bytes | str:
    """Recorded wire bytes (SSE, JSON lines, a JSON document) with every credential redacted,
    including one split across stream events: the strings at the same place in successive
    events (a block's text deltas, a tool's input deltas) are read joined, and each piece of a
    secret is cut out of the event that carries it (the first piece becomes ``[REDACTED]``).
    Only the events that change are re-encoded; the result stays valid SSE / JSON. (A text given
    instead is redacted as its UTF-8 bytes.)"""
    if isinstance(raw, str):
        return redact_wire(raw.encode()).decode()
    digest = hashlib.blake2b(raw, digest_size=16).digest()
    if digest in _CLEAN_WIRE:
        return raw
    redacted = _redact_wire(raw)
    if redacted == raw:
        if len(_CLEAN_WIRE) >= _CLEAN_WIRE_MAX:
            _CLEAN_WIRE.clear()
        _CLEAN_WIRE[digest] = None
    return redacted


def _redact_wire(raw: bytes) -> bytes:
    lines = raw.splitlines(keepends=True)
    frames: list[tuple[int, bytes, bytes, Any]] = []  # (line index, prefix, end, data)
    whole = None
    stripped = raw.strip()
    if stripped[:1] == b"[":
        with contextlib.suppress(orjson.JSONDecodeError):
            whole = orjson.loads(stripped)  # a saved stream as one JSON array
    if isinstance(whole, list):
        frames = [(-1, b"", b"", item) for item in whole]
    else:
        for n, line in enumerate(lines):
            parsed = _frame_json(line)
            if parsed is None:
                continue
            with contextlib.suppress(orjson.JSONDecodeError):
                frames.append((n, parsed[0], parsed[2], orjson.loads(parsed[1])))
    groups: dict[tuple[Any, ...], list[tuple[int, Any, Any]]] = {}
    for i, (_n, _p, _e, data) in enumerate(frames):
        found: list[tuple[tuple[Any, ...], Any, Any]] = []
        _leaves(data, (), found)
        block = tuple(data.get(k) for k in _BLOCK_KEYS) if isinstance(data, dict) else ()
        for path, parent, key in found:
            groups.setdefault((block, path), []).append((i, parent, key))
    changed: set[int] = set()
    for pieces in groups.values():
        if len(pieces) < 2:
            continue  # a secret within one string is redacted with the bytes below
        texts = [parent[key] for _i, parent, key in pieces]
        spans = _secret_spans("".join(texts))
        if not spans:
            continue
        offset = 0
        for (i, parent, key), text in zip(pieces, texts, strict=True):
            start, end = offset, offset + len(text)
            offset = end
            out, last = [], 0
            for s, e in spans:
                if e <= start or s >= end:
                    continue
                a, b = max(s, start) - start, min(e, end) - start
                out += [text[last:a], MARK if s >= start else ""]
                last = b
            if out:
                parent[key] = "".join(out) + text[last:]
                changed.add(i)
    if not changed:
        return redact_bytes(raw)
    if whole is not None:
        return redact_bytes(orjson.dumps(whole))
    for i in changed:
        n, prefix, line_end, data = frames[i]
        lines[n] = prefix + orjson.dumps(data) + line_end
    return redact_bytes(b"".join(lines))
