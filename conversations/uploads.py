"""Bring your own conversations: files in, conversations out.

The one business action behind the browser upload, ``manage.py import FILE...`` and
``POST /api/v1/conversations/import``: detect each file's format (``importers.detect``), run
every turn through the one stream runner (``streams.run.assemble``; recorded wire responses
through their provider's adapter, as ``conversations.ingest`` does), redact credentials, and
write through ``conversations.store`` only.

Each conversation is all or nothing (with the forks its branches became, in one transaction);
a file, or a conversation inside one, that cannot be read is reported and the rest go on.
Results come in order, as they are committed (``IMPORT_BATCH`` conversations a commit), so a
caller can show progress.

Where a chat export's conversation object (the payload kept whole, ``chatgpt.export`` /
``claude_ai.export``) hangs: on the first event of the conversation, once. Every turn came from
it, but storing it per turn (or per event) would repeat the whole conversation in every native
export row. Its forks hold the shared turns from the same records, and ``store.record_fork``
points their first event at the same payload row (payloads are immutable; a delete keeps a row
while anything uses it); a fork that shares no turn at all holds no copy and names the
conversation it is forked from instead.
"""

from __future__ import annotations

import logging
import traceback
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, BinaryIO

import orjson
from django.db import DatabaseError, DataError, IntegrityError, transaction

from conversations import ingest, sources, store
from conversations.limits import turn_limits
from conversations.models import Conversation, Turn
from conversations.projections import import_document
from conversations.provenance import ProvenanceError
from conversations.schema import InvalidDocument
from guards import redaction
from importers import detect, recording
from importers.base import (
    ExportDocument,
    ImportedConversation,
    ImportedTurn,
    PartsResponse,
    Problem,
    WireResponse,
)
from streams import run
from streams.builder import EventBuilder, EventRecord, storable
from streams.errors import MalformedInput
from streams.parts import Payload
from streams.registries import UnregisteredValue

log = logging.getLogger("turnscope.uploads")

FORMATS = detect.FORMATS
RECORDINGS = recording.GROUPINGS
Upload = detect.Upload


@dataclass
class Imported:
    """A conversation stored from ``files`` (indexes into the files given)."""

    files: tuple[int, ...]
    source: str
    format: str
    conversation: Conversation
    turns: int
    forks: list[Conversation] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


@dataclass
class Already:
    """A conversation of ``files`` the owner had imported already (``conversations.sources``):
    nothing was stored for it."""

    files: tuple[int, ...]
    source: str
    format: str
    conversation: Conversation
    # The file's version has another number of turns than the one imported (a conversation
    # that went on since the export it came from): import a copy to keep this one too.
    turns: int | None = None

    @property
    def changed(self) -> bool:
        return self.turns is not None and self.turns != self.conversation.turn_count


@dataclass
class Failed:
    """Something in ``files`` that was not imported: ``source`` (a file, a zip member, a
    cassette interaction) and ``line`` say where."""

    files: tuple[int, ...]
    source: str
    message: str
    line: int | None = None

    def __str__(self) -> str:
        return str(MalformedInput(self.message, line=self.line, source=self.source))


@dataclass
class Progress:
    """Bytes of the given files read so far (of ``total``, when their sizes are known)."""

    done: int
    total: int | None


Result = Imported | Already | Failed | Progress


# Conversations stored a commit, and at most this many turns: a commit per conversation made
# SQLite's FTS5 write a segment of the search index per conversation and merge them again, and
# SQLite write each page a conversation touched to the WAL at each commit (most of a 100 MB
# import's kernel time). The turns bound a batch held in memory before it is written.
IMPORT_BATCH = 50
IMPORT_BATCH_TURNS = 2000


def import_files(
    files: Sequence[Upload], *, owner: Any, format: str = "auto", recordings: str = "auto",
    copy: bool = False,
) -> Iterator[Result]:
    """Import every conversation ``files`` hold, as ``owner``'s; yields each result, in the
    order of the files, once it is stored (and a ``Progress`` after each). ``recordings``: how
    recordings of one provider are grouped (``RECORDINGS``). A conversation the owner imported
    already is ``Already`` (so a re-run after a crash imports only what is missing), unless
    ``copy``: then it is imported again, as a copy that remembers no source.

    Conversations are committed ``IMPORT_BATCH`` at a time (``_stored_batch``); each is still
    all or nothing, and one that cannot be stored is reported and costs only itself."""
    reading = _Reading(files)
    total = sum(f.size for f in files) if all(f.size is not None for f in files) else None
    batch: list[Failed | tuple[ImportedConversation | ExportDocument, tuple[int, ...]]] = []
    turns = 0
    for item in detect.read(reading.uploads, format, recordings):
        indexes = reading.indexes(item)
        if isinstance(item, Problem):
            batch.append(Failed(indexes, item.source, item.message, item.line))
            continue
        batch.append((item, indexes))
        turns += _turns(item) or 1
        if sum(not isinstance(e, Failed) for e in batch) >= IMPORT_BATCH \
                or turns >= IMPORT_BATCH_TURNS:
            for result in _stored_batch(batch, owner, copy):
                yield result
                yield Progress(reading.done, total)
            batch, turns = [], 0
    for result in _stored_batch(batch, owner, copy):
        yield result
        yield Progress(reading.done, total)


def _stored_batch(
    batch: Sequence[Failed | tuple[ImportedConversation | ExportDocument, tuple[int, ...]]],
    owner: Any, copy: bool,
) -> list[Imported | Already | Failed]:
    """The conversations of ``batch`` stored in one transaction (``store.all_or_nothing``),
    its problems passed on in their place. If any conversation cannot be stored, all of it is
    rolled back and written again, each conversation in its own transaction (``_stored``), so
    that one is reported by itself and the others are kept."""
    if all(isinstance(entry, Failed) for entry in batch):
        return [entry for entry in batch if isinstance(entry, Failed)]
    try:
        with store.all_or_nothing():
            return [entry if isinstance(entry, Failed) else _store(*entry, owner, copy)
                    for entry in batch]
    except (*_REFUSED, DatabaseError):
        return [entry if isinstance(entry, Failed) else _stored(*entry, owner, copy)
                for entry in batch]


class _Reading:
    """The files as the importers open them, counting the bytes read and which one is open."""

    def __init__(self, files: Sequence[Upload]) -> None:
        self.files = files
        self.names = [f.name for f in files]
        self.current: int | None = None
        self.counters: list[_Counting] = []
        self.uploads = [Upload(f.name, self._opener(i, f.open), f.size)
                        for i, f in enumerate(files)]

    def _opener(self, index: int, open_: Callable[[], BinaryIO]) -> Callable[[], BinaryIO]:
        def opened() -> BinaryIO:
            self.current = index
            stream = _Counting(open_(), self.files[index].size)
            self.counters.append(stream)
            return stream  # type: ignore[return-value]

        return opened

    @property
    def done(self) -> int:
        return sum(c.done for c in self.counters)

    def indexes(self, item: Any) -> tuple[int, ...]:
        named = getattr(item, "files", ()) or ()
        if named:
            return tuple(i for i, name in enumerate(self.names) if name in named)
        return (self.current,) if self.current is not None else ()


class _Counting:
    """A binary stream that counts the bytes read from it, for progress: a zip's compressed
    bytes are read about in order even though its directory is read first, and the head read
    twice (detection, then the importer) is a small overcount, capped at the file's size."""

    def __init__(self, stream: BinaryIO, size: int | None) -> None:
        self.stream = stream
        self.size = size
        self.read_bytes = 0

    @property
    def done(self) -> int:
        return min(self.read_bytes, self.size) if self.size is not None else self.read_bytes

    def read(self, size: int = -1) -> bytes:
        block = self.stream.read(size)
        self.read_bytes += len(block)
        return block

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stream, name)

    def __enter__(self) -> _Counting:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stream.close()


# What ``_stored`` reports as the conversation's failure (any other error stops the import).
_REFUSED = (MalformedInput, InvalidDocument, ProvenanceError, UnregisteredValue, ValueError,
            IntegrityError, DataError, KeyError, TypeError, AttributeError, IndexError,
            RecursionError)


def _store(item: ImportedConversation | ExportDocument, indexes: tuple[int, ...], owner: Any,
           copy: bool) -> Imported | Already:
    """Store ``item``, or find it imported already; its errors are raised."""
    key = None if copy else sources.conversation_key(item)
    there = _there(item, owner, key, copy)
    if there is not None:
        return Already(indexes, item.source, item.format, there, _turns(item))
    return _written(item, indexes, owner, key)


def _there(item: ImportedConversation | ExportDocument, owner: Any, key: str | None,
           copy: bool) -> Conversation | None:
    """The conversation the owner imported ``item`` as already, if any (never for a copy)."""
    if copy:
        return None
    return sources.already_imported(owner, key) or sources.own_document(owner, item)


def _written(item: ImportedConversation | ExportDocument, indexes: tuple[int, ...], owner: Any,
             key: str | None) -> Imported:
    if isinstance(item, ExportDocument):
        conversation = import_document(item.document, owner=owner, source=key)
        return Imported(indexes, item.source, item.format, conversation,
                        conversation.turns.count())
    return _store_conversation(item, indexes, owner, key)


def _stored(item: ImportedConversation | ExportDocument, indexes: tuple[int, ...], owner: Any,
            copy: bool) -> Imported | Already | Failed:
    """What ``_store`` does, a refusal reported as ``Failed`` instead of raised (the write is
    a transaction of its own: ``_store_conversation``, ``import_document``)."""
    source = item.source
    key = None if copy else sources.conversation_key(item)
    there = _there(item, owner, key, copy)
    if there is not None:
        return Already(indexes, source, item.format, there, _turns(item))
    try:
        try:
            return _written(item, indexes, owner, key)
        except IntegrityError as exc:
            if key is None:
                raise
            # Another import of the same source committed first (a race, a second process).
            return Already(indexes, source, item.format, sources.taken(owner, key, exc),
                           _turns(item))
    except MalformedInput as exc:
        return Failed(indexes, exc.source or source, exc.message, exc.line)
    except InvalidDocument as exc:
        return Failed(indexes, source, f"not a valid export document: {exc}")
    except (ProvenanceError, UnregisteredValue, ValueError) as exc:
        return Failed(indexes, source, f"cannot be imported: {exc}",
                      getattr(item, "line", None))
    except (IntegrityError, DataError) as exc:
        reason = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
        return Failed(indexes, source, f"cannot be stored: {reason}", getattr(item, "line", None))
    except (KeyError, TypeError, AttributeError, IndexError, RecursionError) as exc:
        # Untrusted input broke an importer or adapter in a way nobody foresaw: say where in
        # the code, never the input (the exception text may quote it).
        frame = traceback.extract_tb(exc.__traceback__)[-1] if exc.__traceback__ else None
        log.warning("import of %s: unexpected %s at %s", source, type(exc).__name__,
                    f"{frame.filename}:{frame.lineno}" if frame else "?")
        return Failed(indexes, source, f"cannot be read ({type(exc).__name__})",
                      getattr(item, "line", None))


def _turns(item: ImportedConversation | ExportDocument) -> int | None:
    if isinstance(item, ImportedConversation):
        return len(item.turns)
    turns = item.document.get("turns") if isinstance(item.document, dict) else None
    return len(turns) if isinstance(turns, list) else None


def _store_conversation(item: ImportedConversation, indexes: tuple[int, ...], owner: Any,
                        key: str | None) -> Imported:
    # Everything is read and assembled before anything is written.
    specs, first_builder = _turn_specs(item.turns, item.payload)
    title = storable(redaction.redact_text(item.title)) or _title(specs, first_builder)
    fork_specs = [(fork, _turn_specs(fork.turns, None)[0]) for fork in item.forks]
    with transaction.atomic():
        # The conversation is as old as the export says (and sorts by it), its turns too.
        conversation, written = store.record_turns(specs, store.NewConversation(
            title=title, owner=owner, created_at=item.created_at, source=key))
        forks = []
        for number, (fork, turns) in enumerate(fork_specs, start=1):
            # The turns it shares with the conversation come first, from the same records
            # (so the same payload row): a fork holds turns 0..at_turn, then its own.
            at_turn = fork.at_turn
            if at_turn is not None and at_turn >= len(specs):
                at_turn = len(specs) - 1 if specs else None
            shared = specs[:at_turn + 1] if at_turn is not None else []
            forks.append(store.record_fork(
                conversation, at_turn, [*shared, *turns], store.NewConversation(
                    title=f"{title} (branch {number})"[:300], owner=owner,
                    created_at=item.created_at),
            ))
    return Imported(indexes, item.source, item.format, conversation, len(written), forks,
                    list(item.notes))


def _turn_specs(turns: Sequence[ImportedTurn], payload: Payload | None
                ) -> tuple[list[store.NewTurn], EventBuilder | None]:
    """Each turn through the one stream runner; ``payload`` hangs on the first event."""
    assembled = [(turn, *_assemble(turn)) for turn in turns]
    every = [record for _, _, records in assembled for record in records]
    if payload is not None and every and every[0].payload is None:
        every[0].payload = payload
    # One credential scan over the whole conversation (it redacts in place).
    redaction.redact_records(every)
    specs = []
    first_builder = None
    for turn, builder, records in assembled:
        if turn.role == "user":
            specs.append(store.NewTurn(Turn.Role.USER, records, created_at=turn.created_at))
            continue
        first_builder = first_builder or builder
        specs.append(store.NewTurn(
            Turn.Role.AGENT, records, status=builder.outcome.status,
            end_reason=builder.outcome.end_reason, responses=builder.responses,
            provider=builder.provider, model=builder.model, finished=True,
            created_at=turn.created_at,
        ))
    return specs, first_builder


def _assemble(turn: ImportedTurn) -> tuple[EventBuilder, list[EventRecord]]:
    wire = [r for r in turn.responses if isinstance(r, WireResponse)]
    if wire:
        if len(wire) != len(turn.responses) or len({r.provider for r in wire}) != 1:
            raise ValueError("a turn's responses come from one provider's wire format")
        # Exactly as ingest reads recorded responses (credentials redacted before parsing).
        return ingest.assemble(wire[0].provider, [
            ingest.ResponseFile(r.name, r.raw, r.context) for r in wire])
    responses = [(r.name, r.parts) for r in turn.responses if isinstance(r, PartsResponse)]
    return run.assemble(responses, limits=turn_limits())


def _title(specs: list[store.NewTurn], builder: EventBuilder | None) -> str:
    prompt = next((r.text for s in specs if s.role == Turn.Role.USER for r in s.records
                   if r.kind == "message" and r.text), "")
    records = [r for s in specs if s.role == Turn.Role.AGENT for r in s.records]
    return ingest.title_for(prompt, records, builder or EventBuilder())


# -- what callers show ---------------------------------------------------------------------------


def result_lines(results: Iterator[Result], files: Sequence[Upload],
                 url: Callable[[Conversation], str]) -> Iterator[bytes]:
    """The results as JSON lines, each as soon as it is stored (the upload panel's stream and
    the API's ``Accept: application/x-ndjson``): ``start``, then each ``report`` and
    ``progress``, then ``done`` with the counts; a server error under way ends the stream with
    an ``error`` line (what came before it was stored), never silently."""
    total = sum(f.size or 0 for f in files)
    yield orjson.dumps({"type": "start", "files": [f.name for f in files], "bytes": total}
                       ) + b"\n"
    counts = {"conversation": 0, "already_imported": 0, "problem": 0}
    last_done = -1
    try:
        for result in results:
            if isinstance(result, Progress):
                if result.done != last_done:
                    last_done = result.done
                    yield orjson.dumps({"type": "progress", "done": result.done,
                                        "total": result.total,
                                        "imported": counts["conversation"],
                                        "already_imported": counts["already_imported"]}) + b"\n"
                continue
            line = report(result, url)
            counts[line["type"]] += 1
            yield orjson.dumps(line) + b"\n"
    except Exception:  # the stream is already under way: say so in it, log the rest
        log.exception("import stopped")
        yield orjson.dumps({"type": "error", "detail": "The import stopped on a server "
                            "error; what is listed above was imported."}) + b"\n"
        return
    yield orjson.dumps({"type": "done", "imported": counts["conversation"],
                        "already_imported": counts["already_imported"],
                        "problems": counts["problem"]}) + b"\n"


def report(result: Imported | Already | Failed, url: Callable[[Conversation], str]
           ) -> dict[str, Any]:
    """A result as plain data (the API's and the upload page's per-conversation report)."""
    if isinstance(result, Failed):
        return {"type": "problem", "files": list(result.files), "source": result.source,
                "line": result.line, "detail": redaction.redact_text(str(result))}
    conversation = result.conversation
    if isinstance(result, Already):
        notes = [f"this file has {result.turns} turns of it, {conversation.turn_count} were "
                 "imported: import a copy to keep this version too"] if result.changed else []
        return {"type": "already_imported", "files": list(result.files),
                "source": result.source, "format": result.format, "id": str(conversation.pk),
                "title": conversation.title, "url": url(conversation),
                "turns": conversation.turn_count, "changed": result.changed, "notes": notes}
    return {
        "type": "conversation",
        "files": list(result.files),
        "source": result.source,
        "format": result.format,
        "id": str(conversation.pk),
        "title": conversation.title,
        "url": url(conversation),
        "turns": result.turns,
        "forks": [{"id": str(f.pk), "title": f.title, "forked_at_turn": f.forked_at_turn,
                   "url": url(f)} for f in result.forks],
        "notes": result.notes,
    }
