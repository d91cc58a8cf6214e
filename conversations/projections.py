"""The two projections of a conversation, and reading an export document back.

Portable: what survives a switch of provider (text, attributions, activity, provenance).
Native: portable plus every ProviderPayload, for exact replay to the originating provider.
Export -> import -> export is byte-identical: imported rows keep the document's ids unless an id
is already taken in this database, in which case the conversation and all its turns and events
get fresh ids (everything else, seqs included, is kept).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

import orjson
from django.db import DatabaseError, IntegrityError, router, transaction
from django.db.models import Max, Prefetch, QuerySet
from django.db.models.functions import Length

from conversations import cache_rows, provenance, render_cache, store
from conversations.limits import check_turn
from conversations.models import Attribution, Conversation, Event, Turn, TurnExport
from conversations.rendering import (
    RENDERER_VERSION,
    DocumentFormat,
    export_head,
    export_turn,
    join_export,
    render_turn,
)
from conversations.rendering.ledger import build_ledger
from conversations.schema import InvalidDocument, validate_export
from conversations.snapshot import Side
from conversations.snapshot import read as one_snapshot
from guards.redaction import redact_document
from streams.bodies import MessageBody, ReasoningBody, body_class
from streams.builder import AttributionRecord, EventRecord, storable
from streams.parts import Payload
from streams.registries import END_REASONS, EVENT_KINDS

FORMAT = "turnscope.conversation"
VERSION = 1
Projection = Literal["portable", "native"]
PROJECTIONS = ("portable", "native")
ExportFormat = Literal["json"] | DocumentFormat
EXPORT_FORMATS = ("json", "markdown", "html")
# The attribute events_queryset puts an event's attributions in (in ordinal order).
ATTRIBUTION_LIST = "attribution_list"


# -- export ---------------------------------------------------------------------------------


def _timestamp(value: datetime | None) -> str | None:
    return value.isoformat().replace("+00:00", "Z") if value else None


def event_dict(event: Event, projection: Projection = "portable") -> dict[str, Any]:
    out: dict[str, Any] = {"id": str(event.id), "seq": event.seq, "kind": event.kind}
    body = event.typed_body
    if isinstance(body, MessageBody):
        out["text"] = event.text
        out["incomplete"] = event.incomplete
        out["attributions"] = [attribution_dict(a, projection) for a in _attributions(event)]
    elif isinstance(body, ReasoningBody):
        out["text"] = event.text
        out["redacted"] = body.redacted
        out["incomplete"] = event.incomplete
    else:
        out.update(body.to_body())  # the export event carries its body's fields
    if projection == "native" and event.payload_id:
        out["payload"] = event.payload.as_dict()
    return out


def _attributions(event: Event) -> Iterable[Attribution]:
    # events_queryset's prefetch, as a plain list: a related manager's queryset per event
    # was a third of a long export's reading. An event read otherwise asks its manager (in
    # the model's order, by ordinal).
    prefetched = event.__dict__.get(ATTRIBUTION_LIST)
    return prefetched if prefetched is not None else event.attributions.all()


def attribution_dict(a: Attribution, projection: Projection = "portable") -> dict[str, Any]:
    out: dict[str, Any] = {"source": {"url": a.url, "title": a.title}, "excerpt": a.excerpt}
    if a.page_first is not None:
        out["pages"] = {"first": a.page_first, "last": a.page_last}
    if a.range_start is not None:
        out["range"] = {"start": a.range_start, "end": a.range_end}
    out["incomplete"] = a.incomplete
    if a.integrity:
        out["integrity"] = a.integrity
    if projection == "native" and a.replay_id:
        out["replay"] = a.replay.as_dict()
    return out


def turn_dict(
    turn: Turn, events: Iterable[Event], projection: Projection = "portable", *,
    ledger: bool = True,
) -> dict[str, Any]:
    """One turn of the export contract. An agent turn carries its research ledger (derived from
    its events, so export -> import -> export keeps it byte-identical; import ignores it);
    ``ledger=False`` leaves it out for a caller that renders the turn (``render_turn`` builds
    its own)."""
    out: dict[str, Any] = {
        "id": str(turn.id),
        "index": turn.index,
        "role": turn.role,
        "status": turn.status,
        "end_reason": turn.end_reason or None,
        "created_at": _timestamp(turn.created_at),
    }
    if turn.role == Turn.Role.AGENT:
        agent: dict[str, Any] = {"agentId": turn.agent_id or "agent"}
        if turn.model_provenance:
            agent["model"] = turn.model_provenance
        out["agent"] = agent
    if projection == "native":
        out["responses"] = orjson.loads(turn.responses)
    out["events"] = [event_dict(e, projection) for e in events]
    if ledger and turn.role == Turn.Role.AGENT:
        out["ledger"] = build_ledger(out).as_dict()
    return out


def events_queryset(projection: Projection = "portable") -> QuerySet[Event]:
    attributions = Attribution.objects.order_by("ordinal")
    if projection == "native":
        attributions = attributions.select_related("replay")
    qs = Event.objects.order_by("seq").prefetch_related(
        Prefetch("attributions", queryset=attributions, to_attr=ATTRIBUTION_LIST)
    )
    return qs.select_related("payload") if projection == "native" else qs


def turns_with_events(
    conversation: Conversation, projection: Projection = "portable",
    turns: list[Turn] | None = None, upto: int | None = None,
) -> list[tuple[Turn, list[Event]]]:
    """Every turn of ``conversation`` in index order (or the given ones, in their order), each
    with its events in seq order (up to seq ``upto``, when given), read for ``projection`` in
    one query."""
    if turns is None:
        turns = list(conversation.turns.order_by("index"))
        events = events_queryset(projection).filter(conversation=conversation)
    else:
        events = events_queryset(projection).filter(conversation=conversation, turn__in=turns)
    if upto is not None:
        events = events.filter(seq__lte=upto)
    by_turn: dict[Any, list[Event]] = {t.id: [] for t in turns}
    for event in events:
        by_turn[event.turn_id].append(event)
    return [(turn, by_turn[turn.id]) for turn in turns]


def _document_head(conversation: Conversation, projection: Projection) -> dict[str, Any]:
    if projection not in PROJECTIONS:
        raise ValueError(f"unknown projection {projection!r}")
    return {
        "format": FORMAT,
        "version": VERSION,
        "projection": projection,
        "conversation": {
            "id": str(conversation.id),
            "title": conversation.title,
            "created_at": _timestamp(conversation.created_at),
            "forked_from": str(conversation.forked_from_id) if conversation.forked_from_id
            else None,
        },
    }


def conversation_dict(
    conversation: Conversation, projection: Projection = "portable"
) -> dict[str, Any]:
    return {
        **_document_head(conversation, projection),
        "turns": [turn_dict(t, events, projection)
                  for t, events in turns_with_events(conversation, projection)],
    }


def export_json(conversation: Conversation, projection: Projection = "portable") -> bytes:
    return export_document(conversation, "json", projection)


def export_document(
    conversation: Conversation, fmt: ExportFormat = "json", projection: Projection = "portable"
) -> bytes:
    """The bytes of the file ``export_stream`` streams, whole (for small conversations and
    for callers that need them at once)."""
    return b"".join(export_stream(conversation, fmt, projection))


# A long conversation is exported a batch of turns at a time: what one request holds is a
# batch, never the conversation. Chunks are handed on in pieces of about CHUNK_BYTES.
EXPORT_BATCH = 250
CHUNK_BYTES = 256 * 1024


@dataclass(frozen=True)
class Snapshot:
    """The part of a conversation a share shows: the turns before ``turn_count``, their events
    up to seq ``last_seq``, reasoning or not; exported without the conversation it was forked
    from (a share links to no other conversation of its owner's)."""

    turn_count: int
    last_seq: int
    reasoning: bool = True

    def keeps(self, event: Event) -> bool:
        return self.reasoning or event.kind != "reasoning"


def export_stream(
    conversation: Conversation, fmt: ExportFormat = "json", projection: Projection = "portable",
    *, snapshot: Snapshot | None = None,
) -> Iterator[bytes]:
    """The one export entry point: the file as a stream of byte chunks, the JSON contract in
    ``projection``, or Markdown / HTML rendered from the portable projection (``projection``
    does not apply to them: the renderer reads only the portable one).

    Turns are read ``EXPORT_BATCH`` at a time; each finished turn's chunk is cached
    (``TurnExport``, keyed by renderer version and the turn's last seq), so exporting a
    finished conversation again renders nothing. The export is of the conversation as it was
    when it began, every batch read from one snapshot of the database
    (``conversations.snapshot``): turns and events added meanwhile are left for the next one,
    and a delete meanwhile leaves it whole. A conversation gone before it began is
    ``Conversation.DoesNotExist``.
    """
    if fmt not in EXPORT_FORMATS:
        raise ValueError(f"unknown export format {fmt!r}")
    _document_head(conversation, projection)  # checks the projection before anything streams
    if snapshot is not None and projection != "portable":
        raise ValueError("a snapshot is exported in the portable projection only")
    return _coalesced(_pieces(conversation, fmt, projection, snapshot))


def _pieces(conversation: Conversation, fmt: ExportFormat, projection: Projection,
            snapshot: Snapshot | None) -> Iterator[bytes]:
    with one_snapshot(router.db_for_read(Turn)) as side:
        conversation = Conversation.objects.get(pk=conversation.pk)  # as the snapshot has it
        head = _document_head(conversation, projection)
        if snapshot is not None:
            head["conversation"]["forked_from"] = None
        else:
            snapshot = Snapshot(conversation.turns.count(), conversation.next_seq - 1)
        chunks = _turn_chunks(conversation, fmt, projection, snapshot, side)
        if fmt == "json":
            yield from _json_pieces(orjson.dumps(head | {"turns": []},
                                                 option=orjson.OPT_INDENT_2), chunks)
        else:
            yield from (piece.encode() for piece in join_export(
                export_head(head["conversation"], fmt), chunks, fmt))


def _json_pieces(empty: bytes, turns: Iterator[str]) -> Iterator[bytes]:
    """The document ``orjson.dumps(..., OPT_INDENT_2)`` makes, a turn at a time: ``empty`` is
    the document with no turns (ending ``"turns": []`` and the closing brace), each turn
    the turn's own dump indented to its place in the list."""
    opening = empty.removesuffix(b"[]\n}")
    assert opening != empty, "the turns list comes last in the document"
    first = True
    for turn in turns:
        yield (opening + b"[\n" if first else b",\n") + turn.encode()
        first = False
    yield empty if first else b"\n  ]\n}"


def _coalesced(pieces: Iterator[bytes]) -> Iterator[bytes]:
    buffered: list[bytes] = []
    size = 0
    for piece in pieces:
        buffered.append(piece)
        size += len(piece)
        if size >= CHUNK_BYTES:
            yield b"".join(buffered)
            buffered, size = [], 0
    if buffered:
        yield b"".join(buffered)


def _export_key(status: str, end_reason: str, last_seq: int | None, responses: int) -> str:
    return f"{RENDERER_VERSION}:{VERSION}:{status}:{end_reason}:{last_seq or 0}:{responses}"


def _turn_chunks(conversation: Conversation, fmt: ExportFormat, projection: Projection,
                 snapshot: Snapshot, side: Side | None = None) -> Iterator[str]:
    """Each turn's chunk of the export, in index order: a finished turn's from the cache
    when its key matches, else made (and cached, once the turn is finished). The cached path
    reads plain rows, no model instances: a finished conversation streams at the database's
    pace. A turn with events past the snapshot's last seq (continued since) is made, never
    cached; a snapshot without reasoning has chunks of its own."""
    count = snapshot.turn_count
    for start in range(0, count, EXPORT_BATCH):
        # A window of turn indexes, not "the next EXPORT_BATCH from start": with only a lower
        # bound, PostgreSQL joined and grouped every later turn's events for each batch, then
        # kept 250 (15 ms a batch in the middle of a 5,000-turn conversation).
        rows = _chunk_rows(Turn.objects.filter(conversation_id=conversation.pk,
                                               index__gte=start,
                                               index__lt=min(start + EXPORT_BATCH, count)))
        texts = _batch_chunks(conversation, fmt, projection, snapshot, rows, side)
        for row in rows:
            # Taken out as it goes: a batch's chunks are not held while the next is made.
            yield texts.pop(row[0])


def _chunk_rows(turns: QuerySet[Turn]) -> list[tuple[Any, ...]]:
    """(id, index, status, end_reason, newest seq, responses size) of ``turns``, by index."""
    return list(turns.annotate(newest=Max("events__seq"), responses_size=Length("responses"))
                .order_by("index")
                .values_list("id", "index", "status", "end_reason", "newest", "responses_size"))


def _batch_chunks(conversation: Conversation, fmt: ExportFormat, projection: Projection,
                  snapshot: Snapshot, rows: list[tuple[Any, ...]], side: Side | None
                  ) -> dict[Any, str]:
    """The chunk of each turn of ``rows`` (``_chunk_rows``), by turn id: cached, or made and
    cached. The HTML export reads each message run's HTML from the page's cache
    (``render_cache``) and adds to it what it rendered: a message is rendered once, whichever
    of the page, the shared page or an export asks first."""
    last_seq = snapshot.last_seq
    cache_format = f"json-{projection}" if fmt == "json" else fmt
    if not snapshot.reasoning:
        cache_format += "-noreasoning"
    read_as: Projection = projection if fmt == "json" else "portable"
    if not rows:
        return {}
    finished = {pk: _export_key(status, reason, newest, size)
                for pk, _, status, reason, newest, size in rows
                if status != Turn.Status.STREAMING and (newest or 0) <= last_seq}
    texts = {}
    for pk, key, text in (TurnExport.objects.filter(turn_id__in=list(finished),
                                                    format=cache_format)
                          .values_list("turn_id", "key", "text")):
        if finished[pk] == key:
            texts[pk] = text  # else stale: made again, and replaced
    todo_ids = [row[0] for row in rows if row[0] not in texts]
    todo = list(Turn.objects.filter(pk__in=todo_ids).order_by("index")) if todo_ids else []
    read = turns_with_events(conversation, read_as, todo, upto=last_seq)
    # The derived ledger is part of the JSON document only.
    datas = (turn_dict(turn, [e for e in events if snapshot.keeps(e)], read_as,
                       ledger=fmt == "json") for turn, events in read)
    known = render_cache.cached_runs([event.pk for _, events in read for event in events
                                      if event.kind == "message"]) if fmt == "html" else {}
    html_rows: list[render_cache.Row] = []
    made: dict[Any, str] = {}
    for (turn, events), data in zip(read, datas, strict=True):
        if fmt == "json":
            dumped = orjson.dumps(data, option=orjson.OPT_INDENT_2)
            made[turn.pk] = ("    " + dumped.decode().replace("\n", "\n    "))
        elif fmt == "html":
            rendered = render_turn(data, known, ledger=False)
            # As the page does: a finished turn's own events only (a share without reasoning
            # reads the owner's HTML but leaves its own runs uncached).
            if turn.pk in finished and snapshot.reasoning:
                html_rows += render_cache.fresh_rows(rendered, known)
            made[turn.pk] = export_turn(data, turn.index, fmt, rendered=rendered)
        else:
            made[turn.pk] = export_turn(data, turn.index, fmt)
        for event in events:
            # Prefetched attributions point back at their event: a cycle only the
            # collector would free, so a long export would hold every batch until then.
            event.__dict__.pop(ATTRIBUTION_LIST, None)
    _cache_exports(cache_format, {pk: made[pk] for pk in made if pk in finished}, finished,
                   side, html_rows)
    return texts | made


def warm_exports(conversation: Conversation, turn_ids: Iterable[Any],
                 formats: Iterable[DocumentFormat] = ("markdown", "html")) -> None:
    """Make and cache the export chunks of these turns of ``conversation`` (the finished ones
    whose chunks are missing or stale) in ``formats``: what the background renderer does
    after a turn is recorded, so a first export is read from the cache."""
    with one_snapshot(router.db_for_read(Turn)) as side:
        conversation = Conversation.objects.get(pk=conversation.pk)
        snapshot = Snapshot(conversation.turns.count(), conversation.next_seq - 1)
        rows = _chunk_rows(Turn.objects.filter(conversation_id=conversation.pk,
                                               pk__in=list(turn_ids)))
        rows = [row for row in rows if row[2] != Turn.Status.STREAMING]
        for fmt in formats:
            _batch_chunks(conversation, fmt, "portable", snapshot, rows, side)


def _cache_exports(cache_format: str, made: dict[Any, str], keys: dict[Any, str],
                   side: Side | None = None, html: list[render_cache.Row] | None = None) -> None:
    """Cache the finished turns' chunks ``made``, under their ``keys`` (a chunk cached under
    an older key is replaced), and the message ``html`` rendered for them. Through ``side``
    when the export reads a snapshot of its own."""
    if not made and not html:
        return
    rows = [(pk, cache_format, keys[pk], text) for pk, text in made.items()]
    fields, options = ("turn", "format", "key", "text"), {
        "unique": ("turn", "format"), "replace": ("key", "text")}
    if side is None:
        try:
            with transaction.atomic():
                cache_rows.put(TurnExport, fields, rows, **options)  # type: ignore[arg-type]
                render_cache.put(html or [])
        except IntegrityError:
            pass  # a turn deleted meanwhile: nothing to cache for it
        return
    connection = side.connection
    connection.set_autocommit(False)
    try:
        cache_rows.put(TurnExport, fields, rows, connection=connection,
                       **options)  # type: ignore[arg-type]
        render_cache.put(html or [], connection=connection)
        connection.commit()
    except DatabaseError:
        # A turn deleted meanwhile, or the database busy: a cache, so nothing lost.
        connection.rollback()
    finally:
        connection.set_autocommit(True)


# -- import ---------------------------------------------------------------------------------


def _require(condition: bool, where: str, message: str) -> None:
    if not condition:
        raise InvalidDocument(f"{where}: {message}")


def _uuid(value: Any, where: str) -> uuid.UUID:
    try:
        return uuid.UUID(str(value))
    except ValueError:
        raise InvalidDocument(f"{where}: {value!r} is not a UUID") from None


def _datetime(value: Any, where: str) -> datetime | None:
    if value is None:
        return None
    try:
        return datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        raise InvalidDocument(f"{where}: {value!r} is not an ISO 8601 timestamp") from None


def _pages(value: Any, where: str) -> tuple[int, int] | None:
    """An attribution's ``pages`` as (first, last); the schema checked their types."""
    if value is None:
        return None
    first, last = value["first"], value["last"]
    _require(1 <= first <= last, where, "pages must run from a first page to a last one, from 1")
    return first, last


def _payload(value: Any, where: str) -> Payload | None:
    if value is None:
        return None
    _require(isinstance(value, dict), where, "a payload must be an object")
    keys = ("provider", "format", "version", "value")
    for key in keys:
        _require(key in value, where, f"payload is missing {key!r}")
    for key in keys[:3]:
        _require(isinstance(value[key], str) and value[key], where, f"payload {key} must be a "
                 "non-empty string")
    _check_decodes(value, where)
    return Payload(value["provider"], value["format"], value["version"], value["value"])


def _check_decodes(payload: dict[str, Any], where: str) -> None:
    """A present payload must decode with its provider's adapter; unknown providers and formats
    are kept as they are (only the originating provider interprets them)."""
    import providers

    if payload["provider"] not in providers.ADAPTERS:
        return
    adapter = providers.adapter(payload["provider"])
    try:
        adapter.decode(payload["value"], payload["format"])
    except ValueError as exc:
        raise InvalidDocument(f"{where}: payload does not decode ({exc})") from None


def _ids_taken(doc: dict[str, Any]) -> bool:
    conversation_id = doc["conversation"]["id"]
    turn_ids = [t["id"] for t in doc["turns"]]
    event_ids = [e["id"] for t in doc["turns"] for e in t["events"]]
    return (
        Conversation.objects.filter(pk=conversation_id).exists()
        or Turn.objects.filter(pk__in=turn_ids).exists()
        or Event.objects.filter(pk__in=event_ids).exists()
    )


def _check_provenance(doc: dict[str, Any]) -> None:
    for t_index, t in enumerate(doc["turns"]):
        model = (t.get("agent") or {}).get("model") or {}
        try:
            provenance.validate(t["role"], model.get("provider", ""), model.get("model", ""))
        except provenance.ProvenanceError as exc:
            raise InvalidDocument(f"turns[{t_index}].agent.model: {exc}") from None


def import_document(doc: Any, *, owner: Any = None, source: str | None = None) -> Conversation:
    """Create a conversation from an export document (either projection), through the store.
    All or nothing. Credentials found anywhere in it are redacted on the way in. ``source``:
    its source identity (``conversations.sources``), None for a copy.

    ``forked_from`` is kept only when ``owner`` may read that conversation: a link to anyone
    else's would tell the importer that it exists. Without an owner (the management commands,
    run by whoever runs the server) every conversation may be linked."""
    validate_export(doc)
    _check_provenance(doc)  # before redaction: a credential posing as a model is refused
    doc = redact_document(doc)
    with transaction.atomic():
        fresh = _ids_taken(doc)

        def given_id(value: str, where: str) -> uuid.UUID | None:
            return None if fresh else _uuid(value, where)  # None: the store makes one

        meta = doc["conversation"]
        forked_from = None
        if meta.get("forked_from"):
            readable = Conversation.objects.all() if owner is None else \
                Conversation.objects.visible_to(owner)
            forked_from = readable.filter(pk=_uuid(meta["forked_from"],
                                                   "conversation.forked_from")).first()
        turns = [_new_turn(t, f"turns[{t_index}]", t_index, given_id)
                 for t_index, t in enumerate(doc["turns"])]
        seqs = [seq for turn in turns for seq in turn.seqs or ()]
        _require(len(seqs) == len(set(seqs)), "turns", "event seqs must be unique")
        conversation, _ = store.record_turns(turns, store.NewConversation(
            id=given_id(meta["id"], "conversation.id"), owner=owner,
            title=storable(meta.get("title", "")), forked_from=forked_from,
            created_at=_datetime(meta.get("created_at"), "conversation.created_at"),
            source=source,
        ))
    return conversation


def _new_turn(
    t: dict[str, Any], where: str, t_index: int, given_id: Any
) -> store.NewTurn:
    _require(t["index"] == t_index, where, "turn indexes must be 0, 1, 2, … in order")
    agent = t.get("agent") or {}
    model = agent.get("model") or {}
    if t.get("end_reason"):
        _require(t["end_reason"] in END_REASONS, where,
                 f"unknown end_reason {t['end_reason']!r}")
    check_turn(len(t["events"]), sum(len(e.get("attributions") or ()) for e in t["events"]),
               where)
    records = []
    for e_index, e in enumerate(t["events"]):
        e_where = f"{where}.events[{e_index}]"
        _require(e["kind"] in EVENT_KINDS, e_where, f"unknown event kind {e['kind']!r}")
        records.append(_record(e, e_where))
    event_ids = [given_id(e["id"], f"{where}.events[{n}].id") for n, e in enumerate(t["events"])]
    return store.NewTurn(
        t["role"], records, status=t["status"], end_reason=t.get("end_reason") or "",
        responses=t.get("responses", []), provider=model.get("provider", ""),
        model=model.get("model", ""), agent_id=agent.get("agentId", ""),
        id=given_id(t["id"], f"{where}.id"),
        created_at=_datetime(t.get("created_at"), f"{where}.created_at"),
        event_ids=None if None in event_ids else event_ids,
        seqs=[e["seq"] for e in t["events"]],
    )


def _record(e: dict[str, Any], where: str) -> EventRecord:
    """The event ``e`` of a document as the store takes it: the kind's typed body read from
    the event's own fields (an export event carries its body's), the text, the attributions."""
    kind = e["kind"]
    payload = _payload(e.get("payload"), f"{where}.payload")
    body = body_class(kind).from_body(e)
    text, incomplete = "", False
    if kind in ("message", "reasoning"):
        text, incomplete = storable(e.get("text", "")), bool(e.get("incomplete"))
    attributions = []
    for ordinal, a in enumerate(e.get("attributions", []) if kind == "message" else []):
        a_where = f"{where}.attributions[{ordinal}]"
        span = a.get("range")
        if span is not None:
            _require(0 <= span["start"] < span["end"] <= len(text), a_where,
                     "range does not address the event text")
        attributions.append(AttributionRecord(
            storable(a["source"].get("url", "")), storable(a["source"].get("title", "")),
            storable(a.get("excerpt", "")), span["start"] if span else None,
            span["end"] if span else None, bool(a.get("incomplete")),
            _payload(a.get("replay"), f"{a_where}.replay"), a.get("integrity", ""),
            _pages(a.get("pages"), f"{a_where}.pages"),
        ))
    return EventRecord(kind, text, incomplete, body, attributions, payload)
