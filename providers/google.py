"""Google Gemini adapter: ``generateContent`` bodies, ``streamGenerateContent`` streams (SSE or a
JSON array), and the Gemini Interactions API (``event_type`` events, or an Interaction body).

generateContent / streamGenerateContent (candidate ``index`` 0; other candidates -> ``Artifact``):

* Consecutive ``text`` parts form ONE block, across stream chunks: ``thought: true`` parts a
  ``reasoning`` block, the others a ``message`` block. A part carrying only a ``thoughtSignature``
  joins the open block. The block payload (format ``google.candidate``) is the candidate as the
  non-streaming API would return it for this block: ``{"content": {"role": "model", "parts":
  [...]}}`` plus ``groundingMetadata`` / ``citationMetadata`` / ``urlContextMetadata`` as received
  (the last non-empty value). Streamed parts are merged into one part (text concatenated,
  ``thoughtSignature`` kept); a body keeps its parts as sent.
* ``functionCall`` -> ``ToolCall`` (id = ``functionCall.id``, else ``"{responseId}:call:{n}"``).
* ``executableCode`` / ``codeExecutionResult`` -> ``code_execution`` activity (id = the part's
  ``id``, else ``"{responseId}:code:{n}"``; a result closes the oldest open call).
* Any other part (``inlineData``, ``toolCall``, ...) -> ``Artifact(type="google.part.<key>")``.
* ``groundingMetadata``: ``{}`` (intermediate stream chunks) is ignored. ``webSearchQueries`` ->
  one ``web_search`` activity, ``started`` then ``completed``, id ``"{responseId}:search"``,
  input ``{"queries": [...]}``, sources = ``groundingChunks[].web``, summary
  "2 queries · 5 sources". ``groundingSupports`` -> one ``Citation`` per referenced chunk,
  ``unit="utf8"`` (the offsets are UTF-8 bytes), ``start`` = ``startIndex`` (absent means 0:
  proto3 JSON drops zeros), ``quote`` = ``segment.text``. The offsets are passed through raw; the
  builder checks them against ``quote``. In a body, ``segment.partIndex`` picks the part (its
  offset inside the merged block is added); in a stream the offsets address the whole streamed
  text (the recordings show it), so ``partIndex`` is not used. Supports with no open message
  block to land on (e.g. the text block was closed by a later ``functionCall``) are kept whole
  as an ``Artifact(type="google.candidate_metadata")``: a citation cannot follow ``BlockEnd``.
* ``searchEntryPoint`` (HTML + CSS Google requires to be shown) -> ``Artifact(type=
  "google.search_entry_point", display_html=renderedContent)``, emitted after the blocks close;
  payload value = the ``searchEntryPoint`` object verbatim.
* ``citationMetadata.citationSources`` -> ``Citation`` (``unit="utf8"``, assumed like grounding;
  no quote is sent, so the builder can only bounds-check them).
* ``finishReason``: STOP -> ``end_turn`` (``tool_use`` when the response called a function:
  Gemini has no separate reason), MAX_TOKENS -> ``max_tokens``, SAFETY / RECITATION /
  BLOCKLIST / PROHIBITED_CONTENT / SPII / IMAGE_* -> ``refusal``; every other reason
  (MALFORMED_FUNCTION_CALL, OTHER, LANGUAGE, future values) -> ``StreamError(code=<reason in
  lower case>)`` then ``error``. ``promptFeedback.blockReason`` without candidates -> ``refusal``.
  An ``{"error": {...}}`` body or chunk -> ``StreamError`` then ``error``.
* ``usageMetadata``: its integer counters, verbatim names (``toolUsePromptTokenCount``, ...).
* Served model: ``modelVersion``; only when the response has none, the model named by
  ``context.endpoint`` (``.../models/<model>:...``).

Interactions API (``step.*``; the older ``content.*`` names are accepted too):

* ``thought`` step -> ``reasoning`` block (``thought_summary`` text); a thought with only a
  ``thought_signature`` is redacted reasoning (the signature lives only in the payload).
* ``model_output`` step -> ``message`` block; ``text_annotation_delta`` annotations with a ``url``
  -> ``Citation`` with ``unit="utf8"``: Google's API schema documents ``start_index`` as
  "measured in bytes" (the recorded text is ASCII, so it cannot show the unit either way).
* ``google_search_call`` / ``google_search_result`` -> ``web_search`` activity (id = the call
  id), ``code_execution_call`` / ``code_execution_result`` -> ``code_execution``;
  ``search_suggestions`` -> the same search entry point ``Artifact`` as above.
  ``function_call`` -> ``ToolCall``; other steps/deltas -> ``Artifact``.
* ``interaction.completed``: completed -> ``end_turn`` (``tool_use`` after a function call),
  requires_action -> ``tool_use``, incomplete -> ``max_tokens``, failed / cancelled / other ->
  ``StreamError`` + ``error``. ``usage`` integer counters -> ``Usage``.

Payload ``version``: the API version in ``context.endpoint`` ("v1beta", "v1", "v1alpha"), as
"vertex/<version>" ("vertex/v1beta1") for Vertex AI (``aiplatform`` hosts: a different contract);
"v1beta" when unknown. Gemini's ``googleSearch`` tool carries no version of its own.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import orjson

from providers import WireContext
from providers.wire import DONE, Frame, MalformedInput, WireInput
from streams.parts import (
    Activity,
    Artifact,
    BlockEnd,
    BlockStart,
    Citation,
    Part,
    Payload,
    ResponseEnd,
    ResponseStart,
    StreamError,
    TextDelta,
    ToolCall,
    Usage,
)
from streams.registries import ACTIVITY_NAMES, END_REASONS

PROVIDER = "google"
DEFAULT_API_VERSION = "v1beta"

CANDIDATE = "google.candidate"  # a candidate restricted to one block's parts (+ its metadata)
PART = "google.part"  # one content part, verbatim
METADATA = "google.candidate_metadata"  # grounding/citation metadata with no block to land on
ENTRY_POINT = "google.search_entry_point"  # searchEntryPoint {"renderedContent": ...}
ERROR = "google.error"  # an {"error": {...}} object
STEP = "google.interactions.step"  # an Interactions step, verbatim or rebuilt from deltas
ITEM = "google.interactions.item"  # an Interactions delta/content/annotation not understood
FORMATS = (CANDIDATE, PART, METADATA, ENTRY_POINT, ERROR, STEP, ITEM)

END_TURN, MAX_TOKENS, TOOL_USE, REFUSAL, ERROR_END = (
    "end_turn",
    "max_tokens",
    "tool_use",
    "refusal",
    "error",
)
for _reason in (END_TURN, MAX_TOKENS, TOOL_USE, REFUSAL, ERROR_END):
    END_REASONS.register(_reason, producer=__name__)

WEB_SEARCH, CODE_EXECUTION = "web_search", "code_execution"
for _name in (WEB_SEARCH, CODE_EXECUTION):
    ACTIVITY_NAMES.register(_name, producer=__name__)

FINISH_REASONS = {
    "STOP": END_TURN,
    "MAX_TOKENS": MAX_TOKENS,
    # Content filters: the model (or Google) declined to produce / continue the answer.
    **dict.fromkeys(
        (
            "SAFETY",
            "RECITATION",
            "BLOCKLIST",
            "PROHIBITED_CONTENT",
            "SPII",
            "IMAGE_SAFETY",
            "IMAGE_PROHIBITED_CONTENT",
            "IMAGE_RECITATION",
        ),
        REFUSAL,
    ),
}

# Part keys that annotate a part rather than say what it is.
_PART_METADATA = {"thought", "thoughtSignature", "partMetadata", "videoMetadata", "mediaResolution"}
# Candidate-level keys kept with the text block they annotate.
_TEXT_METADATA = ("groundingMetadata", "citationMetadata", "urlContextMetadata")
# Keys that identify a generateContent response (or chunk).
_RESPONSE_KEYS = {"candidates", "usageMetadata", "promptFeedback", "modelVersion", "responseId"}

_VERSION = re.compile(r"/(v\d+(?:(?:alpha|beta)\d*)?)(?:/|$)")
_MODEL = re.compile(r"/(?:models|tunedModels)/([^/:?]+)")


# ---------------------------------------------------------------------------------------------
# Small helpers


def api_version(endpoint: str | None) -> str:
    """The Gemini API version named by the request URL ("vertex/<v>" on Vertex AI)."""
    if not endpoint:
        return DEFAULT_API_VERSION
    url = urlsplit(endpoint)
    match = _VERSION.search(url.path)
    if not match:
        return DEFAULT_API_VERSION
    if "aiplatform" in (url.hostname or ""):
        return f"vertex/{match.group(1)}"
    return match.group(1)


def endpoint_model(endpoint: str | None) -> str:
    match = _MODEL.search(urlsplit(endpoint).path) if endpoint else None
    return match.group(1) if match else ""


def _plural(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _counters(usage: Any) -> dict[str, int]:
    """The integer counters of a usage object (nested details lists are left out)."""
    return {k: v for k, v in _dict(usage).items() if type(v) is int}  # JSON: int, never bool


def _object(frame: Frame, what: str) -> dict[str, Any]:
    if not isinstance(frame.data, dict):
        raise MalformedInput(
            f"expected a JSON object ({what}), got {type(frame.data).__name__}", line=frame.line
        )
    return frame.data


def _keys(data: dict[str, Any]) -> str:
    return ", ".join(sorted(data)[:8]) or "none"


def _error_parts(error: dict[str, Any], version: str) -> Iterator[Part]:
    code = _str(error.get("status")) or str(error.get("code") or "") or "error"
    yield StreamError(code, _str(error.get("message")), Payload(PROVIDER, ERROR, version, error))
    yield ResponseEnd(ERROR_END)


def _source(chunk: Any) -> dict[str, str]:
    """url/title of a groundingChunk (web, or a retrieval / maps source)."""
    chunk = _dict(chunk)
    for kind in ("web", "retrievedContext", "maps"):
        source = _dict(chunk.get(kind))
        if _str(source.get("uri")):
            return {"url": source["uri"], "title": _str(source.get("title"))}
    return {}


def _entry_point_artifact(entry: dict[str, Any], html: str, version: str) -> Artifact:
    # Untrusted HTML+CSS that Google's terms require to be displayed: the renderer sanitizes
    # and isolates display_html; the payload keeps the object verbatim.
    return Artifact(
        type="google.search_entry_point",
        summary="Google Search suggestions",
        display_html=html,
        payload=Payload(PROVIDER, ENTRY_POINT, version, entry),
    )


def _search_summary(queries: int, sources: int | None) -> str:
    text = _plural(queries, "query", "queries")
    return text if sources is None else f"{text} · {_plural(sources, 'source', 'sources')}"


# ---------------------------------------------------------------------------------------------
# Entry points


def parse(wire: WireInput, context: WireContext) -> Iterator[Part]:
    frames = [frame for frame in wire.frames if frame.data is not DONE]
    if not frames:
        return
    first = _object(frames[0], "a Gemini response or Interactions event")
    if "event_type" in first or first.get("object") == "interaction":
        # One event line also reads as a JSON body: an event is still an event (a stream cut
        # after it), never a whole Interaction.
        body = wire.kind == "body" and "event_type" not in first
        yield from _Interactions(context).run(frames, body=body)
    else:
        yield from _Generate(context, stream=wire.kind == "stream").run(frames)


def decode(payload_value: Any, format: str) -> None:
    """Raise ValueError if a stored payload of ``format`` is not something this adapter wrote."""
    check = _DECODERS.get(format)
    if check is None:
        raise ValueError(f"unknown Google payload format {format!r}")
    if not isinstance(payload_value, dict):
        raise ValueError(f"{format}: expected a JSON object, got {type(payload_value).__name__}")
    check(payload_value)


def _decode_candidate(value: dict[str, Any]) -> None:
    parts = _dict(value.get("content")).get("parts")
    if not isinstance(parts, list) or not all(isinstance(p, dict) for p in parts):
        raise ValueError(f"{CANDIDATE}: content.parts must be a list of objects")


def _decode_part(value: dict[str, Any]) -> None:
    if not set(value) - _PART_METADATA:
        raise ValueError(f"{PART}: a part needs a data field (text, functionCall, ...)")


def _decode_metadata(value: dict[str, Any]) -> None:
    if not value or not set(value) <= set(_TEXT_METADATA):
        raise ValueError(f"{METADATA}: expected {', '.join(_TEXT_METADATA)}")


def _decode_entry_point(value: dict[str, Any]) -> None:
    if not isinstance(value.get("renderedContent", value.get("sdkBlob")), str):
        raise ValueError(f"{ENTRY_POINT}: renderedContent must be a string")


def _decode_error(value: dict[str, Any]) -> None:
    if not any(k in value for k in ("message", "code", "status")):
        raise ValueError(f"{ERROR}: an error needs a message, code or status")


def _decode_typed(value: dict[str, Any]) -> None:
    if not _str(value.get("type")):
        raise ValueError("an Interactions step or item needs a string type")


_DECODERS: dict[str, Callable[[dict[str, Any]], None]] = {
    CANDIDATE: _decode_candidate,
    PART: _decode_part,
    METADATA: _decode_metadata,
    ENTRY_POINT: _decode_entry_point,
    ERROR: _decode_error,
    STEP: _decode_typed,
    ITEM: _decode_typed,
}


# ---------------------------------------------------------------------------------------------
# generateContent / streamGenerateContent


@dataclass
class _TextBlock:
    key: str
    kind: str  # "message" | "reasoning"
    parts: list[dict[str, Any]] = field(default_factory=list)
    nbytes: int = 0  # UTF-8 length of the text so far: body supports are shifted by it
    metadata: dict[str, Any] = field(default_factory=dict)
    cited: set[tuple[str, int | None, int | None]] = field(default_factory=set)


@dataclass
class _Generate:
    context: WireContext
    stream: bool
    version: str = ""
    started: bool = False
    done: bool = False
    response_id: str = ""
    block: _TextBlock | None = None
    blocks: int = 0
    calls: int = 0
    code_runs: int = 0
    open_code: list[str] = field(default_factory=list)
    called_function: bool = False
    searched: bool = False
    entry_points: list[Artifact] = field(default_factory=list)
    shown_entry_points: set[str] = field(default_factory=set)
    finish: dict[str, Any] | None = None
    block_reason: str = ""
    usage_metadata: dict[str, Any] = field(default_factory=dict)
    # Body mode: candidate-level metadata every message block of the candidate carries.
    candidate_metadata: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.version = api_version(self.context.endpoint)

    def payload(self, fmt: str, value: Any) -> Payload:
        return Payload(PROVIDER, fmt, self.version, value)

    # -- the response ----------------------------------------------------------------------

    def run(self, frames: list[Frame]) -> Iterator[Part]:
        for frame in frames:
            if self.done:
                break
            yield from self.chunk(frame)
        if not self.done:
            yield from self.end()

    def chunk(self, frame: Frame) -> Iterator[Part]:
        data = _object(frame, "a generateContent response")
        if "error" in data:
            yield from self.start(data)
            self.done = True
            yield from _error_parts(
                _dict(data["error"]) or {"message": str(data["error"])}, self.version
            )
            return
        if not _RESPONSE_KEYS & set(data):
            raise MalformedInput(
                "not a Gemini generateContent response (expected candidates, usageMetadata or "
                f"modelVersion; got keys: {_keys(data)})",
                line=frame.line,
            )
        yield from self.start(data)
        if isinstance(data.get("usageMetadata"), dict):
            self.usage_metadata = data["usageMetadata"]  # the last one counts (see end())
        feedback = _dict(data.get("promptFeedback"))
        self.block_reason = _str(feedback.get("blockReason")) or self.block_reason
        candidates = data.get("candidates", [])
        if not isinstance(candidates, list):
            raise MalformedInput("candidates must be a list", line=frame.line)
        for candidate in candidates:
            if not isinstance(candidate, dict):
                raise MalformedInput("a candidate must be an object", line=frame.line)
            if _int(candidate.get("index")) not in (None, 0):
                yield from self.other_candidate(candidate)
                continue
            yield from self.candidate(candidate, frame.line)

    def start(self, data: dict[str, Any]) -> Iterator[Part]:
        if self.started:
            return
        self.started = True
        self.response_id = _str(data.get("responseId"))
        # The served model: the response's own word; the URL only when the response is silent.
        model = _str(data.get("modelVersion")) or endpoint_model(self.context.endpoint)
        yield ResponseStart(PROVIDER, model, self.response_id)

    def other_candidate(self, candidate: dict[str, Any]) -> Iterator[Part]:
        # Only candidate 0 is the turn; extra candidates (candidateCount > 1) are kept whole.
        if isinstance(_dict(candidate.get("content")).get("parts"), list):
            yield Artifact(
                type="google.candidate",
                summary=f"alternative candidate {candidate['index']}",
                payload=self.payload(CANDIDATE, candidate),
            )

    def candidate(self, candidate: dict[str, Any], line: int) -> Iterator[Part]:
        content = candidate.get("content", {})
        parts = _dict(content).get("parts", [])
        if not isinstance(content, dict) or not isinstance(parts, list):
            raise MalformedInput("candidate content.parts must be a list", line=line)
        if not all(isinstance(part, dict) for part in parts):
            raise MalformedInput("a content part must be an object", line=line)
        metadata = {k: candidate[k] for k in _TEXT_METADATA if _dict(candidate.get(k))}
        grounding = _dict(metadata.get("groundingMetadata"))
        if grounding:
            yield from self.search(grounding)
        per_part: dict[int, list[dict[str, Any]]] = {}
        if not self.stream:
            self.candidate_metadata = metadata
            per_part, stray = _supports_by_part(grounding, parts)
            if stray:
                yield self.stray_metadata(metadata, len(stray))
        for index, part in enumerate(parts):
            yield from self.part(part, per_part.get(index, ()), _dict(grounding))
        if self.stream and metadata:
            yield from self.stream_metadata(metadata)
        elif not self.stream:
            yield from self.recitations(metadata)
        if _str(candidate.get("finishReason")):
            self.finish = candidate
            yield from self.close_block()

    def end(self) -> Iterator[Part]:
        cut = self.finish is None and not self.block_reason
        if not cut:
            yield from self.close_block()
        yield from self.entry_points  # whole artifacts: kept even when the stream was cut
        if cut:
            return  # no BlockEnd for the open block, no ResponseEnd
        usage = _counters(self.usage_metadata)
        if usage:
            yield Usage(usage)
        if self.finish is None:
            yield ResponseEnd(REFUSAL)  # the prompt was blocked: no candidate at all
            return
        reason = self.finish["finishReason"]
        end_reason = FINISH_REASONS.get(reason)
        if end_reason is None:
            message = _str(self.finish.get("finishMessage")) or f"Gemini stopped: {reason}"
            yield StreamError(reason.lower(), message)
            end_reason = ERROR_END
        elif end_reason == END_TURN and self.called_function:
            end_reason = TOOL_USE  # Gemini says STOP after a function call: the turn waits
        yield ResponseEnd(end_reason)

    # -- parts -----------------------------------------------------------------------------

    def part(
        self, part: dict[str, Any], supports: Any, grounding: dict[str, Any]
    ) -> Iterator[Part]:
        for kind in _PART_HANDLERS:
            if kind in part:
                break
        else:
            kind = None
        if kind is None and set(part) <= _PART_METADATA and "thoughtSignature" in part:
            kind = "text"  # a bare signature (end of a stream) belongs to the open block
        handler = _PART_HANDLERS.get(kind or "", _Generate.unknown_part)
        yield from handler(self, part, supports, grounding)

    def text_part(
        self, part: dict[str, Any], supports: Any, grounding: dict[str, Any]
    ) -> Iterator[Part]:
        kind = "reasoning" if part.get("thought") else "message"
        text = _str(part.get("text"))
        if not text and self.block is not None:
            kind = self.block.kind  # a bare thoughtSignature (stream end) joins the open block
        if self.block is None or self.block.kind != kind:
            yield from self.close_block()
            yield from self.open_block(kind)
        block = self.block
        assert block is not None
        base = block.nbytes
        _add_part(block.parts, part, merge=self.stream)
        block.nbytes += len(text.encode())
        if text:
            yield TextDelta(block.key, text)
        yield from self.cite(block, supports, grounding, base)

    def open_block(self, kind: str) -> Iterator[Part]:
        self.block = _TextBlock(f"b{self.blocks}", kind)
        self.blocks += 1
        if kind == "message" and not self.stream:
            self.block.metadata = dict(self.candidate_metadata)
        yield BlockStart(self.block.key, kind)

    def close_block(self) -> Iterator[Part]:
        block, self.block = self.block, None
        if block is None:
            return
        value = {"content": {"role": "model", "parts": block.parts}, **block.metadata}
        yield BlockEnd(block.key, self.payload(CANDIDATE, value))

    def function_call(self, part: dict[str, Any], *_: Any) -> Iterator[Part]:
        yield from self.close_block()
        call = part["functionCall"]
        if not isinstance(call, dict):
            yield from self.unknown_part(part)
            return
        self.called_function = True
        call_id = _str(call.get("id")) or f"{self.response_id}:call:{self.calls}"
        self.calls += 1
        yield ToolCall(
            call_id, _str(call.get("name")), call.get("args", {}), self.payload(PART, part)
        )

    def executable_code(self, part: dict[str, Any], *_: Any) -> Iterator[Part]:
        yield from self.close_block()
        code = _dict(part["executableCode"])
        run_id = _str(code.get("id")) or f"{self.response_id}:code:{self.code_runs}"
        self.code_runs += 1
        self.open_code.append(run_id)
        yield Activity(
            run_id,
            CODE_EXECUTION,
            "started",
            input={"language": _str(code.get("language")), "code": _str(code.get("code"))},
            payload=self.payload(PART, part),
        )

    def code_result(self, part: dict[str, Any], *_: Any) -> Iterator[Part]:
        yield from self.close_block()
        result = _dict(part["codeExecutionResult"])
        run_id = _str(result.get("id"))
        if run_id in self.open_code:
            self.open_code.remove(run_id)
        elif not run_id and self.open_code:
            run_id = self.open_code.pop(0)
        elif not run_id:
            run_id = f"{self.response_id}:code:{self.code_runs}"
            self.code_runs += 1
        yield _code_outcome(run_id, _str(result.get("outcome")), self.payload(PART, part))

    def unknown_part(self, part: dict[str, Any], *_: Any) -> Iterator[Part]:
        yield from self.close_block()
        kind = next((k for k in part if k not in _PART_METADATA), "unknown")
        yield Artifact(
            type=f"google.part.{kind}",
            summary=f"Gemini {kind} part",
            payload=self.payload(PART, part),
        )

    # -- grounding -------------------------------------------------------------------------

    def search(self, grounding: dict[str, Any]) -> Iterator[Part]:
        """The hosted Google Search behind the grounding, once per response."""
        entry = _dict(grounding.get("searchEntryPoint"))
        html = _str(entry.get("renderedContent"))
        if html and html not in self.shown_entry_points:
            self.shown_entry_points.add(html)
            self.entry_points.append(_entry_point_artifact(entry, html, self.version))
        queries = [q for q in _list(grounding.get("webSearchQueries")) if isinstance(q, str)]
        if not queries or self.searched:
            return
        self.searched = True
        search_id = f"{self.response_id or 'response'}:search"
        sources = tuple(
            {"url": _str(web.get("uri")), "title": _str(web.get("title"))}
            for web in (_dict(_dict(c).get("web")) for c in _list(grounding.get("groundingChunks")))
            if _str(web.get("uri"))
        )
        yield Activity(search_id, WEB_SEARCH, "started", input={"queries": queries})
        yield Activity(
            search_id,
            WEB_SEARCH,
            "completed",
            input={"queries": queries},
            summary=_search_summary(len(queries), len(sources)),
            sources=sources,
        )

    def cite(
        self, block: _TextBlock, supports: Any, grounding: dict[str, Any], base: int
    ) -> Iterator[Part]:
        chunks = _list(grounding.get("groundingChunks"))
        # Supports cite the same few chunks over and over: read each chunk's source once.
        sources: dict[int, dict[str, str]] = {}
        cited = block.cited
        for support in supports:
            support = _dict(support)
            segment = _dict(support.get("segment"))
            start = base + (_int(segment.get("startIndex")) or 0)
            end = _int(segment.get("endIndex"))
            end = None if end is None else base + end
            quote = segment.get("text") if isinstance(segment.get("text"), str) else None
            for index in _list(support.get("groundingChunkIndices")):
                index = _int(index)
                if index is None or not 0 <= index < len(chunks):
                    continue  # an index with no chunk
                source = sources.get(index)
                if source is None:
                    source = sources[index] = _source(chunks[index])
                if not source or (source["url"], start, end) in cited:
                    continue  # a chunk with no source, or the same citation already sent
                cited.add((source["url"], start, end))
                yield Citation(
                    block.key,
                    source["url"],
                    source["title"],
                    start=start,
                    end=end,
                    unit="utf8",
                    quote=quote,
                )

    def stream_metadata(self, metadata: dict[str, Any]) -> Iterator[Part]:
        """Streamed grounding lands on the open message block (offsets address its text)."""
        block = self.block
        if block is None or block.kind != "message":
            supports = _list(_dict(metadata.get("groundingMetadata")).get("groundingSupports"))
            sources = _list(_dict(metadata.get("citationMetadata")).get("citationSources"))
            if supports or sources:
                yield self.stray_metadata(metadata, len(supports) + len(sources))
            return
        block.metadata.update(metadata)
        grounding = _dict(metadata.get("groundingMetadata"))
        yield from self.cite(block, _list(grounding.get("groundingSupports")), grounding, 0)
        yield from self.recitations(metadata)

    def stray_metadata(self, metadata: dict[str, Any], count: int) -> Artifact:
        # Citations must land on an open block; with none open they are kept whole instead.
        return Artifact(
            type="google.candidate_metadata",
            summary=f"{_plural(count, 'citation', 'citations')} with no text block to attach to",
            payload=self.payload(METADATA, metadata),
        )

    def recitations(self, metadata: dict[str, Any]) -> Iterator[Part]:
        block = self.block
        sources = _list(_dict(metadata.get("citationMetadata")).get("citationSources"))
        if block is None or block.kind != "message":
            return  # stays in the payload of the candidate's message block, if any
        block.metadata.update({k: v for k, v in metadata.items() if k == "citationMetadata"})
        for source in map(_dict, sources):
            url = _str(source.get("uri"))
            start, end = _int(source.get("startIndex")) or 0, _int(source.get("endIndex"))
            if not url or (url, start, end) in block.cited:
                continue
            block.cited.add((url, start, end))
            yield Citation(block.key, url, start=start, end=end, unit="utf8")


_PART_HANDLERS: dict[str, Callable[..., Iterator[Part]]] = {
    "text": _Generate.text_part,
    "functionCall": _Generate.function_call,
    "executableCode": _Generate.executable_code,
    "codeExecutionResult": _Generate.code_result,
}


def _add_part(parts: list[dict[str, Any]], part: dict[str, Any], *, merge: bool) -> None:
    """Streamed pieces of one part are merged (text concatenated, signature kept) unless their
    metadata conflicts; a body keeps the parts it was sent."""
    if merge and parts:
        last = parts[-1]
        extra = {k: v for k, v in part.items() if k != "text"}
        if all(last.get(k, v) == v for k, v in extra.items()):
            merged = {**last, **extra}
            if "text" in last or "text" in part:
                merged["text"] = _str(last.get("text")) + _str(part.get("text"))
            parts[-1] = merged
            return
    parts.append(dict(part))


def _supports_by_part(
    grounding: dict[str, Any], parts: list[dict[str, Any]]
) -> tuple[dict[int, list[Any]], list[Any]]:
    """Body mode: the message part each support addresses (``partIndex``, 0 when absent).
    A support naming a part that is not message text goes to the nearest message part."""
    message_parts = [
        i for i, p in enumerate(parts) if isinstance(p.get("text"), str) and not p.get("thought")
    ]
    by_part: dict[int, list[Any]] = {}
    stray: list[Any] = []
    for support in _list(grounding.get("groundingSupports")):
        wanted = _int(_dict(_dict(support).get("segment")).get("partIndex")) or 0
        target = (
            wanted
            if wanted in message_parts
            else next(
                (i for i in message_parts if i >= wanted),
                message_parts[-1] if message_parts else None,
            )
        )
        if target is None:
            stray.append(support)
        else:
            by_part.setdefault(target, []).append(support)
    return by_part, stray


def _code_outcome(run_id: str, outcome: str, payload: Payload) -> Activity:
    words = outcome.removeprefix("OUTCOME_").lower().replace("_", " ") or "finished"
    if outcome in ("OUTCOME_OK", ""):
        return Activity(run_id, CODE_EXECUTION, "completed", summary="ok", payload=payload)
    return Activity(
        run_id, CODE_EXECUTION, "failed", summary=words, error_code=outcome.lower(), payload=payload
    )


# ---------------------------------------------------------------------------------------------
# Interactions API


@dataclass
class _Step:
    index: int
    type: str
    value: dict[str, Any]
    key: str
    block: bool = False  # BlockStart emitted
    text: list[str] = field(default_factory=list)
    annotations: list[dict[str, Any]] = field(default_factory=list)
    arguments_text: str = ""


# Hosted call/result step types -> activity name.
_HOSTED_CALLS = {"google_search_call": WEB_SEARCH, "code_execution_call": CODE_EXECUTION}
_HOSTED_RESULTS = {"google_search_result": WEB_SEARCH, "code_execution_result": CODE_EXECUTION}


@dataclass
class _Interactions:
    context: WireContext
    version: str = ""
    started: bool = False
    ended: bool = False
    steps: dict[int, _Step] = field(default_factory=dict)
    called_function: bool = False
    shown_entry_points: set[str] = field(default_factory=set)
    call_inputs: dict[str, dict[str, Any]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.version = api_version(self.context.endpoint)

    def payload(self, fmt: str, value: Any) -> Payload:
        return Payload(PROVIDER, fmt, self.version, value)

    def run(self, frames: list[Frame], *, body: bool) -> Iterator[Part]:
        if body:
            yield from self.body(_object(frames[0], "an Interaction"))
            return
        for frame in frames:
            if self.ended:
                break
            data = _object(frame, "an Interactions event")
            event_type = data.get("event_type")
            if not isinstance(event_type, str):
                raise MalformedInput(
                    f"not a Gemini Interactions event (no event_type; got keys: {_keys(data)})",
                    line=frame.line,
                )
            handler = _EVENT_HANDLERS.get(event_type, _Interactions.unknown_event)
            yield from handler(self, data)
        if not self.ended:
            yield from self.cut()

    def body(self, interaction: dict[str, Any]) -> Iterator[Part]:
        """A whole Interaction: replay its steps as start/stop pairs."""
        yield from self.start(interaction)
        steps = _list(interaction.get("steps", interaction.get("outputs")))
        for index, step in enumerate(steps):
            yield from self.step_start({"index": index, "step": step})
            yield from self.step_stop({"index": index})
        yield from self.completed({"interaction": interaction})

    def start(self, interaction: dict[str, Any]) -> Iterator[Part]:
        if self.started:
            return
        self.started = True
        model = (
            _str(interaction.get("model"))
            or _str(interaction.get("agent"))
            or endpoint_model(self.context.endpoint)
        )
        yield ResponseStart(PROVIDER, model, _str(interaction.get("id")))

    # -- lifecycle events ------------------------------------------------------------------

    def created(self, data: dict[str, Any]) -> Iterator[Part]:
        yield from self.start(_dict(data.get("interaction")))

    def status_update(self, data: dict[str, Any]) -> Iterator[Part]:
        return iter(())  # progress only; the outcome comes with interaction.completed

    def completed(self, data: dict[str, Any]) -> Iterator[Part]:
        interaction = _dict(data.get("interaction"))
        yield from self.start(interaction)
        self.ended = True
        usage = _counters(interaction.get("usage"))
        if usage:
            yield Usage(usage)
        status = _str(interaction.get("status"))
        if status == "completed":
            yield ResponseEnd(TOOL_USE if self.called_function else END_TURN)
        elif status == "requires_action":
            yield ResponseEnd(TOOL_USE)
        elif status == "incomplete":
            yield ResponseEnd(MAX_TOKENS)
        else:
            error = _dict(interaction.get("error")) or {
                "code": status or "unknown",
                "message": f"interaction {status or 'ended'}",
            }
            yield StreamError(
                _str(error.get("code")) or status or "error",
                _str(error.get("message")),
                self.payload(ERROR, error),
            )
            yield ResponseEnd(ERROR_END)

    def error(self, data: dict[str, Any]) -> Iterator[Part]:
        yield from self.start({})
        self.ended = True
        error = _dict(data.get("error")) or {"message": "error event without details"}
        yield StreamError(
            _str(error.get("code")) or "error",
            _str(error.get("message")),
            self.payload(ERROR, error),
        )
        yield ResponseEnd(ERROR_END)

    def unknown_event(self, data: dict[str, Any]) -> Iterator[Part]:
        yield from self.start({})
        yield Artifact(
            type=f"google.interactions.event.{data['event_type']}",
            summary=f"Interactions event {data['event_type']}",
            payload=self.payload(ITEM, {"type": data["event_type"], **data}),
        )

    def cut(self) -> Iterator[Part]:
        # A hosted call whose step never stopped is still reported as started.
        for step in list(self.steps.values()):
            if step.type in _HOSTED_CALLS:
                yield from self.hosted_call(step)

    # -- steps -----------------------------------------------------------------------------

    def step_start(self, data: dict[str, Any]) -> Iterator[Part]:
        yield from self.start({})
        index = _int(data.get("index")) or 0
        value = dict(_dict(data.get("step", data.get("content"))))
        step = _Step(index, _str(value.get("type")), value, f"step{index}")
        self.steps[index] = step
        # A step may arrive with its content already filled in (an Interaction body).
        if step.type == "model_output":
            for item in _list(value.pop("content", None)):
                yield from self.delta(step, _dict(item))
        elif step.type == "text":
            if "text" in value:
                yield from self.text(step, {"text": value.pop("text")})
            yield from self.annotate(step, {"annotations": value.pop("annotations", None)})
        elif step.type == "thought":
            for item in _list(value.pop("summary", None)):
                yield from self.thought_summary(step, {"content": item})

    def step_delta(self, data: dict[str, Any]) -> Iterator[Part]:
        step = self.steps.get(_int(data.get("index")) or 0)
        if step is None:  # a delta for a step we never saw start: keep it whole
            yield from self.start({})
            delta = _dict(data.get("delta"))
            yield Artifact(
                type=f"google.interactions.{_str(delta.get('type')) or 'delta'}",
                summary="Interactions delta without a step",
                payload=self.payload(ITEM, {"type": "delta", **delta}),
            )
            return
        yield from self.delta(step, _dict(data.get("delta")))

    def delta(self, step: _Step, delta: dict[str, Any]) -> Iterator[Part]:
        handler = _DELTA_HANDLERS.get(_str(delta.get("type")))
        if handler is not None:
            yield from handler(self, step, delta)
        elif _str(delta.get("type")) == step.type or step.type in _HOSTED_CALLS | _HOSTED_RESULTS:
            # Fields of a call/result step (arguments, result, signature): rebuild the step.
            step.value.update({k: v for k, v in delta.items() if k != "type"})
        else:
            kind = _str(delta.get("type")) or "item"
            yield Artifact(
                type=f"google.interactions.{kind}",
                summary=f"Gemini {kind} output",
                payload=self.payload(ITEM, delta if delta.get("type") else {"type": kind, **delta}),
            )

    def open(self, step: _Step, kind: str) -> Iterator[Part]:
        if not step.block:
            step.block = True
            yield BlockStart(step.key, kind)

    def text(self, step: _Step, delta: dict[str, Any]) -> Iterator[Part]:
        text = _str(delta.get("text"))
        yield from self.open(step, "message")
        step.text.append(text)
        if text:
            yield TextDelta(step.key, text)

    def annotate(self, step: _Step, delta: dict[str, Any]) -> Iterator[Part]:
        for annotation in map(_dict, _list(delta.get("annotations"))):
            # url_citation has `url`; the older Annotation shape names it in `source`.
            source = _str(annotation.get("source"))
            url = _str(annotation.get("url")) or (source if source.startswith("http") else "")
            if not url:
                kind = _str(annotation.get("type")) or "annotation"
                yield Artifact(
                    type=f"google.interactions.{kind}",
                    summary=f"Gemini {kind}",
                    payload=self.payload(ITEM, {"type": kind, **annotation}),
                )
                continue
            yield from self.open(step, "message")
            step.annotations.append(annotation)
            start, end = _int(annotation.get("start_index")), _int(annotation.get("end_index"))
            has_range = end is not None
            yield Citation(
                step.key,
                url,
                _str(annotation.get("title")),
                start=(start or 0) if has_range else None,
                end=end,
                unit="utf8",
            )

    def model_text(self, step: _Step, delta: dict[str, Any]) -> Iterator[Part]:
        yield from self.text(step, delta)
        if delta.get("annotations"):
            yield from self.annotate(step, delta)

    def thought_summary(self, step: _Step, delta: dict[str, Any]) -> Iterator[Part]:
        content = _dict(delta.get("content"))
        text = _str(content.get("text"))
        if content.get("type", "text") != "text":
            yield Artifact(
                type="google.interactions.thought_summary",
                summary="Gemini thought summary item",
                payload=self.payload(ITEM, {"type": "thought_summary", **delta}),
            )
            return
        yield from self.open(step, "reasoning")
        step.text.append(text)
        if text:
            yield TextDelta(step.key, text)

    def thought_signature(self, step: _Step, delta: dict[str, Any]) -> Iterator[Part]:
        if _str(delta.get("signature")):
            step.value["signature"] = delta["signature"]  # sent whole, never in pieces
        return iter(())

    def arguments_delta(self, step: _Step, delta: dict[str, Any]) -> Iterator[Part]:
        step.arguments_text += _str(delta.get("arguments") or delta.get("partial_arguments"))
        return iter(())

    def step_stop(self, data: dict[str, Any]) -> Iterator[Part]:
        step = self.steps.pop(_int(data.get("index")) or 0, None)
        if step is None:
            return
        yield from _STOP_HANDLERS.get(step.type, _Interactions.unknown_step)(self, step)

    def stop_thought(self, step: _Step) -> Iterator[Part]:
        value = dict(step.value)
        if step.text:
            value["summary"] = [{"type": "text", "text": "".join(step.text)}]
        payload = self.payload(STEP, value)
        if not step.block:
            if not value.get("signature"):
                return  # an empty thought: nothing to keep
            # Only the signature is known: reasoning whose content is opaque.
            yield BlockStart(step.key, "reasoning", redacted=True, payload=payload)
        yield BlockEnd(step.key, payload)

    def stop_output(self, step: _Step) -> Iterator[Part]:
        if not step.block:
            return  # no text in this step (other outputs were kept as artifacts)
        content: dict[str, Any] = {"type": "text", "text": "".join(step.text)}
        if step.annotations:
            content["annotations"] = step.annotations
        if step.type == "text":
            value = {**step.value, **content}
        else:
            value = {**step.value, "content": [content]}
        yield BlockEnd(step.key, self.payload(STEP, value))

    def function_call(self, step: _Step) -> Iterator[Part]:
        value = step.value
        arguments = value.get("arguments")
        if arguments is None and step.arguments_text:
            try:
                arguments = orjson.loads(step.arguments_text)
            except orjson.JSONDecodeError:
                arguments = step.arguments_text  # kept as sent: the client decides
            value = {**value, "arguments": arguments}
        self.called_function = True
        yield ToolCall(
            _str(value.get("id")),
            _str(value.get("name")),
            arguments if arguments is not None else {},
            self.payload(STEP, value),
        )

    def hosted_call(self, step: _Step) -> Iterator[Part]:
        self.steps.pop(step.index, None)
        arguments = _dict(step.value.get("arguments"))
        if not arguments and step.arguments_text:
            try:
                arguments = _dict(orjson.loads(step.arguments_text))
            except orjson.JSONDecodeError:
                arguments = {}
        call_id = _str(step.value.get("id"))
        self.call_inputs[call_id] = arguments
        yield Activity(
            call_id,
            _HOSTED_CALLS[step.type],
            "started",
            input=arguments,
            payload=self.payload(STEP, step.value),
        )

    def hosted_result(self, step: _Step) -> Iterator[Part]:
        value = step.value
        name = _HOSTED_RESULTS[step.type]
        call_id = _str(value.get("call_id"))
        payload = self.payload(STEP, value)
        if value.get("is_error"):
            yield Activity(
                call_id, name, "failed", summary="error", error_code="is_error", payload=payload
            )
            return
        if name == CODE_EXECUTION:
            yield Activity(call_id, name, "completed", summary="ok", payload=payload)
            return
        results = [_dict(r) for r in _list(value.get("result"))]
        sources = tuple(
            {"url": _str(r["url"]), "title": _str(r.get("title"))}
            for r in results
            if _str(r.get("url"))
        )
        # The result names no pages (only suggestion chips): summarize by the call's queries.
        queries = _list(self.call_inputs.get(call_id, {}).get("queries"))
        summary = _search_summary(len(queries), len(sources) if sources else None)
        yield Activity(
            call_id,
            name,
            "completed",
            input=self.call_inputs.get(call_id, {}),
            summary=summary,
            sources=sources,
            payload=payload,
        )
        for result in results:
            html = _str(result.get("search_suggestions"))
            if html and html not in self.shown_entry_points:
                self.shown_entry_points.add(html)
                yield _entry_point_artifact({"renderedContent": html}, html, self.version)

    def unknown_step(self, step: _Step) -> Iterator[Part]:
        if step.block:  # text arrived in a step type we do not know: still a message
            yield from self.stop_output(step)
            return
        kind = step.type or "step"
        value = step.value if step.value.get("type") else {"type": kind, **step.value}
        yield Artifact(
            type=f"google.interactions.{kind}",
            summary=f"Gemini {kind} step",
            payload=self.payload(STEP, value),
        )


_EVENT_HANDLERS: dict[str, Callable[[_Interactions, dict[str, Any]], Iterator[Part]]] = {
    "interaction.created": _Interactions.created,
    "interaction.start": _Interactions.created,
    "interaction.status_update": _Interactions.status_update,
    "interaction.completed": _Interactions.completed,
    "interaction.complete": _Interactions.completed,
    "error": _Interactions.error,
    "step.start": _Interactions.step_start,
    "step.delta": _Interactions.step_delta,
    "step.stop": _Interactions.step_stop,
    "content.start": _Interactions.step_start,
    "content.delta": _Interactions.step_delta,
    "content.stop": _Interactions.step_stop,
}

_DELTA_HANDLERS: dict[str, Callable[[_Interactions, _Step, dict[str, Any]], Iterator[Part]]] = {
    "text": _Interactions.model_text,
    "text_annotation_delta": _Interactions.annotate,
    "thought_summary": _Interactions.thought_summary,
    "thought_signature": _Interactions.thought_signature,
    "arguments_delta": _Interactions.arguments_delta,
}

_STOP_HANDLERS: dict[str, Callable[[_Interactions, _Step], Iterator[Part]]] = {
    "thought": _Interactions.stop_thought,
    "model_output": _Interactions.stop_output,
    "text": _Interactions.stop_output,
    "function_call": _Interactions.function_call,
    **dict.fromkeys(_HOSTED_CALLS, _Interactions.hosted_call),
    **dict.fromkeys(_HOSTED_RESULTS, _Interactions.hosted_result),
}
