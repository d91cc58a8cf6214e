"""Which importer reads a file: detected from its content (never its name), or chosen.

One entry point for every way files come in (the browser upload, ``manage.py import``, the
API): ``read(files, format)`` yields every conversation the files hold, and a ``Problem`` for
each file (or part of one) that cannot be read, without stopping at it.

Formats (``FORMATS``): ``auto``; a provider recording (``anthropic``, ``openai``, ``google``:
raw SSE, JSON lines or a JSON body; the recordings of one provider among the files are grouped
by what their wire says, or as the uploader chooses: ``recording.GROUPINGS``); ``vcr`` (a
cassette); ``turnscope`` (an export document); ``chatgpt`` and ``claude_ai`` (a data export:
its ``.zip``, or the ``conversations.json`` / ``conversations-NNN.json`` in it).
"""

from __future__ import annotations

import re
import zipfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import BinaryIO

import orjson

import providers
from importers import chatgpt, claude_ai, recording, vcr
from importers.base import ExportDocument, Item, Problem
from importers.jsonstream import Readable, array_elements
from providers import registry
from streams.errors import MalformedInput

FORMATS = {
    "auto": "Detect from the content",
    **{p.name: f"{p.label} recording (SSE, JSON lines or JSON body)"
       for p in registry.providers()},
    "vcr": "VCR cassette (vcrpy, pytest-recording)",
    "turnscope": "Turnscope export document",
    "chatgpt": "ChatGPT data export (.zip or conversations.json)",
    "claude_ai": "Claude.ai data export (.zip or conversations.json)",
}
HEAD = 64 * 1024
MAX_WHOLE = 256 * 1024 * 1024  # bytes read into memory at once (a recording, a cassette)
MAX_UNZIPPED = 4 * 1024 * 1024 * 1024  # bytes of conversations read out of one zip
_EXPORT_MEMBER = re.compile(r"(?:^|/)conversations(?:-\d+)?\.json$")
_SSE = re.compile(rb"^(?:event|data|id|retry)\s*:|^:", re.MULTILINE)
_ZIP = b"PK\x03\x04"


@dataclass(frozen=True)
class Upload:
    """A file to read: its name (for messages only), how to open it (binary, seekable) and its
    size in bytes when known."""

    name: str
    open: Callable[[], BinaryIO]
    size: int | None = None


def detect(head: bytes) -> str | None:
    """The format of a file from its first bytes; None when it is none this app reads."""
    if head.startswith(_ZIP):
        return "zip"
    body = head.removeprefix(b"\xef\xbb\xbf").lstrip()
    if body[:1] == b"{":
        if re.search(rb'"format"\s*:\s*"turnscope\.conversation"', head):
            return "turnscope"
        if vcr.looks_like(body):
            return "vcr"
        return recording.provider_of(body) or "recording"
    if body[:1] == b"[":
        if re.search(rb'"(?:mapping|current_node)"\s*:', head):
            return "chatgpt"
        if re.search(rb'"chat_messages"\s*:', head):
            return "claude_ai"
        return recording.provider_of(body) or ("array" if body[1:].lstrip()[:1] == b"{"
                                               else "recording")
    if vcr.looks_like(body):
        return "vcr"
    if _SSE.search(body[:4096]):
        return recording.provider_of(body) or "recording"
    return None


def read(files: Sequence[Upload], format: str = "auto", recordings_as: str = "auto"
         ) -> Iterator[Item]:
    """Every conversation in ``files`` (read as ``format``), and every problem, in file order;
    the recordings come last, each provider's grouped as ``recordings_as`` says
    (``recording.GROUPINGS``: by their content, one turn with its continuations, or each on
    its own)."""
    if format not in FORMATS:
        raise ValueError(f"unknown format {format!r} (one of {', '.join(FORMATS)})")
    if recordings_as not in recording.GROUPINGS:
        raise ValueError(f"unknown grouping {recordings_as!r} "
                         f"(one of {', '.join(recording.GROUPINGS)})")
    recordings: dict[str | None, list[tuple[str, bytes]]] = {}
    for upload in files:
        try:
            stream = upload.open()
        except OSError as exc:
            yield Problem(upload.name, f"cannot be read ({exc.strerror or exc})")
            continue
        with stream:
            yield from _one(upload.name, stream, format, recordings)
    for provider, group in recordings.items():
        yield from recording.conversations(group, provider, recordings_as)


def _one(name: str, stream: BinaryIO, format: str,
         recordings: dict[str | None, list[tuple[str, bytes]]]) -> Iterator[Item]:
    head = stream.read(HEAD)
    stream.seek(0)
    if not head.strip():
        yield Problem(name, "the file is empty", 1)
        return
    found: str | None
    if format in providers.ADAPTERS:
        found = format
    elif format == "auto":
        found = detect(head)
    elif head.startswith(_ZIP):
        found = "zip"
    else:
        found = format
    if found == "array":  # a JSON array of objects the head does not tell apart: ask the first
        found = _array_kind(stream, name)
        stream.seek(0)
    if found == "recording":  # JSON or SSE the head does not tell: read it all
        raw = _whole(stream, name)
        if isinstance(raw, Problem):
            yield raw
            return
        found = recording.provider_of(raw, whole=True)
        if found is not None:
            recordings.setdefault(found, []).append((name, raw))
            return
        if raw.lstrip()[:1] in (b"{", b"["):
            try:
                orjson.loads(raw)
            except orjson.JSONDecodeError as exc:
                yield Problem(name, f"not JSON ({exc.msg})", exc.lineno)
                return
    if found is None:
        yield Problem(name, "not a format this app reads (a provider recording, a VCR cassette, "
                      "a Turnscope export, or a ChatGPT or Claude.ai data export); choose the "
                      "format if it is one of them", 1)
        return
    if found in providers.ADAPTERS:
        raw = _whole(stream, name)
        if isinstance(raw, Problem):
            yield raw
        else:
            recordings.setdefault(found, []).append((name, raw))
        return
    if found == "zip":
        yield from _zip(name, stream, format)
    elif found == "vcr":
        raw = _whole(stream, name)
        yield from (raw,) if isinstance(raw, Problem) else vcr.read(raw, name)
    elif found == "turnscope":
        raw = _whole(stream, name)
        if isinstance(raw, Problem):
            yield raw
            return
        try:
            yield ExportDocument(name, orjson.loads(raw))
        except orjson.JSONDecodeError as exc:
            yield Problem(name, f"not JSON ({exc.msg})", exc.lineno)
    else:
        yield from _export(name, stream, found)


def _export(name: str, stream: Readable, format: str) -> Iterator[Item]:
    reader = chatgpt.read if format == "chatgpt" else claude_ai.read
    try:
        yield from reader(stream, name)
    except MalformedInput as exc:  # the file's structure breaks here: the rest is unreadable
        yield Problem.of(exc, name)


def _array_kind(stream: Readable, name: str) -> str | None:
    try:
        for raw, _ in array_elements(stream, source=name):
            first = orjson.loads(raw)
            if chatgpt.looks_like(first):
                return "chatgpt"
            if claude_ai.looks_like(first):
                return "claude_ai"
            return None
    except (MalformedInput, orjson.JSONDecodeError):
        return None
    return None


def _whole(stream: BinaryIO, name: str) -> bytes | Problem:
    raw = stream.read(MAX_WHOLE + 1)
    if len(raw) > MAX_WHOLE:
        return Problem(name, f"larger than {MAX_WHOLE} bytes, the most read at once for this "
                       "format")
    return raw


def _zip(name: str, stream: BinaryIO, format: str) -> Iterator[Item]:
    try:
        archive = zipfile.ZipFile(stream)
    except (zipfile.BadZipFile, OSError, ValueError) as exc:
        yield Problem(name, f"not a readable zip file ({exc})")
        return
    with archive:
        members = sorted((i for i in archive.infolist()
                          if not i.is_dir() and _EXPORT_MEMBER.search(i.filename)),
                         key=lambda i: i.filename)
        if not members:
            yield Problem(name, "the zip holds no conversations.json (is it a ChatGPT or "
                          "Claude.ai data export?)")
            return
        budget = MAX_UNZIPPED
        for info in members:
            source = f"{name}/{info.filename}"
            if info.file_size > budget:
                yield Problem(source, "too large once unzipped")
                return
            budget -= info.file_size
            kind = format if format in ("chatgpt", "claude_ai") else None
            try:
                if kind is None:
                    with archive.open(info) as probe:
                        kind = detect(probe.read(HEAD))
                    if kind == "array":
                        with archive.open(info) as probe:
                            kind = _array_kind(probe, source)
                if kind not in ("chatgpt", "claude_ai"):
                    yield Problem(source, "not a ChatGPT or Claude.ai conversations file", 1)
                    continue
                with archive.open(info) as member:
                    yield from _export(source, _Limited(member, info.file_size), kind)
            except (zipfile.BadZipFile, RuntimeError, NotImplementedError, EOFError,
                    OSError) as exc:
                yield Problem(source, f"cannot be unzipped ({exc})")


class _Limited:
    """A zip member stream that refuses to yield more than its declared size (a zip whose
    directory understates a member is a bomb, not an export)."""

    def __init__(self, stream: Readable, limit: int) -> None:
        self.stream = stream
        self.left = limit

    def read(self, size: int = -1) -> bytes:
        block = self.stream.read(size if size >= 0 else self.left + 1)
        self.left -= len(block)
        if self.left < 0:
            raise OSError("a member is larger than the zip says")
        return block
