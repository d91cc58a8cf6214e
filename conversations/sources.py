"""Where an imported conversation came from, so that importing it again is "already imported".

Every import (``manage.py import`` and ``ingest``, the upload panel, the API) stores the source
identity of each conversation it makes in ``Conversation.source``, unique per owner (a database
constraint: a race, or a re-run after a crash, cannot make two). The identity is

* for a conversation of a chat app's data export (ChatGPT, Claude.ai) and a Turnscope export
  document: the conversation id the export gives it, with the format (``chatgpt:<id>``,
  ``claude_ai:<uuid>``, ``turnscope:<uuid>``). It is what the user means by "the same
  conversation": an export taken later holds the same ids, and a conversation that went on since
  is still that conversation (import a copy to keep the newer version too);
* for what has no id of its own (provider recordings, a cassette's interactions, ``ingest``): a
  SHA-256 over what makes the conversation, in order: each response's provider, wire context
  and bytes as given, and each message the importer made (``sha256:<hex>``). The same file,
  uploaded, imported or ingested, is the same source; one byte different is another.

A Turnscope document whose conversation id is one of the owner's own conversations (exported
here, imported back) is already there too, whatever its source.

"Import a copy" (``copy=True``) stores a conversation with no source: never "already imported",
and never in the way of the original.

A recording ingested into a conversation that is there already (the API's turn ingest) is a turn,
not a conversation: the turn keeps the source (``IngestedTurn``, one per conversation), so the
same ingest into the same conversation again is "already ingested", naming the turn.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import asdict
from typing import Any

import orjson
from django.db import IntegrityError

from conversations.ingested import IngestedTurn
from conversations.models import Conversation, Turn
from importers.base import ExportDocument, ImportedConversation, PartsResponse, WireResponse
from streams.parts import TextDelta

# Ids longer than this (no export writes one) are hashed, to fit the column.
_MAX_ID = 150


def export_id(format: str, value: Any) -> str | None:
    """The source identity of a conversation an export names ``value``; None without an id."""
    if not isinstance(value, str) or not value.strip():
        return None
    value = value.strip()
    if len(value) > _MAX_ID:
        value = "sha256:" + hashlib.sha256(value.encode()).hexdigest()
    return f"{format}:{value}"


class _Digest:
    """A SHA-256 over a sequence of tagged, length-prefixed fields (no two sequences of fields
    hash alike however their bytes fall)."""

    def __init__(self) -> None:
        self.hash = hashlib.sha256(b"turnscope.source.v1")

    def add(self, tag: str, value: bytes) -> None:
        self.hash.update(f"\n{tag}:{len(value)}:".encode())
        self.hash.update(value)

    def key(self) -> str:
        return "sha256:" + self.hash.hexdigest()


def recording_key(provider: str, responses: Iterable[tuple[bytes, Any]], prompt: str = "") -> str:
    """The source identity of one agent turn of recorded ``responses`` (raw bytes and their
    ``providers.WireContext``, in order), asked by ``prompt`` (``manage.py ingest``)."""
    digest = _Digest()
    if prompt:
        digest.add("user", prompt.encode())
    digest.add("turn", b"agent")
    for raw, context in responses:
        _wire(digest, provider, raw, context)
    return digest.key()


def _wire(digest: _Digest, provider: str, raw: bytes, context: Any) -> None:
    digest.add("provider", provider.encode())
    digest.add("context", orjson.dumps(asdict(context), option=orjson.OPT_SORT_KEYS))
    digest.add("wire", raw)


def conversation_key(item: ImportedConversation | ExportDocument) -> str | None:
    """The source identity of what an importer read (None: it has none, e.g. a malformed
    document: it is refused anyway)."""
    if isinstance(item, ExportDocument):
        meta = item.document.get("conversation") if isinstance(item.document, dict) else None
        return export_id(item.format, meta.get("id")) if isinstance(meta, dict) else None
    if item.format in ("chatgpt", "claude_ai"):
        key = export_id(item.format, item.key)
        if key is not None:
            return key
    digest = _Digest()
    if item.payload is not None:  # an exported conversation with no id: its object is it
        digest.add("payload", orjson.dumps(item.payload.value, option=orjson.OPT_SORT_KEYS))
    for turn in item.turns:
        if turn.role == "user" and _user_only(turn.responses):
            digest.add("user", _text(turn.responses).encode())
            continue
        digest.add("turn", turn.role.encode())
        for response in turn.responses:
            if isinstance(response, WireResponse):
                _wire(digest, response.provider, response.raw, response.context)
            else:
                digest.add("parts", orjson.dumps(response.parts, default=repr))
    return digest.key()


def _user_only(responses: Sequence[Any]) -> bool:
    return all(isinstance(r, PartsResponse) for r in responses)


def _text(responses: Sequence[Any]) -> str:
    """A user turn's text, as ``recording_key`` hashes a prompt (so a cassette's request and an
    ``ingest --prompt`` of the same words hash alike)."""
    return "".join(p.text for r in responses for p in r.parts if isinstance(p, TextDelta))


def already_imported(owner: Any, key: str | None) -> Conversation | None:
    """The owner's conversation imported from ``key``, if there is one."""
    if key is None:
        return None
    # ``source <> ''`` as the unique indexes of sources say it, so SQLite reads one of them;
    # else it walked every conversation of the owner in the list's order, for each one imported.
    found = Conversation.objects.filter(source=key).exclude(source="")
    found = found.filter(owner__isnull=True) if owner is None else found.filter(owner=owner)
    return found.first()


def own_document(owner: Any, item: ImportedConversation | ExportDocument) -> Conversation | None:
    """The owner's own conversation a Turnscope document was exported from, when it is here."""
    if not isinstance(item, ExportDocument) or not isinstance(item.document, dict):
        return None
    meta = item.document.get("conversation")
    try:
        pk = uuid.UUID(str(meta.get("id"))) if isinstance(meta, dict) else None
    except ValueError:
        return None
    if pk is None:
        return None
    found = Conversation.objects.filter(pk=pk)
    found = found.filter(owner__isnull=True) if owner is None else found.filter(owner=owner)
    return found.first()


def taken(owner: Any, key: str | None, error: IntegrityError) -> Conversation:
    """The conversation that took ``key`` first, when ``error`` is the constraint refusing a
    second; otherwise ``error`` is raised again (it is about something else)."""
    found = already_imported(owner, key)
    if found is None:
        raise error
    return found


def already_ingested(conversation: Conversation, key: str) -> Turn | None:
    """The turn of ``conversation`` an ingest of ``key`` made, if there is one."""
    found = (IngestedTurn.objects.filter(conversation=conversation, source=key)
             .select_related("turn").first())
    return None if found is None else found.turn


def remember_turn(turn: Turn, key: str) -> None:
    """``turn`` was ingested into its conversation from ``key`` (in the transaction that
    stores it: ``IntegrityError`` when an ingest of ``key`` stored one there first)."""
    IngestedTurn.objects.create(conversation_id=turn.conversation_id, turn=turn, source=key)


def taken_turn(conversation: Conversation, key: str, error: IntegrityError) -> Turn:
    """``taken``, for a turn ingested into ``conversation``."""
    found = already_ingested(conversation, key)
    if found is None:
        raise error
    return found
