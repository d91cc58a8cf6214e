"""Gemini ``generateContent`` bodies and ``streamGenerateContent`` streams (SSE, or a JSON array
of chunks).


"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from providers.google.common import (
    CANDIDATE,
    CODE_EXECUTION,
    END_TURN,
    ERROR_END,
    MAX_TOKENS,
    METADATA,
    PART,
    PART_METADATA,
    PROVIDER,
    REFUSAL,
    TEXT_METADATA,
    TOOL_USE,
    WEB_SEARCH,
    api_version,
    endpoint_model,
    entry_point_artifact,
    error_parts,
    keys,
    object_of,
    search_summary,
)
from providers.protocol import WireContext
from providers.values import as_dict, as_int, as_list, as_str, count, int_counters
from providers.wire import DONE, Row
from streams.errors import MalformedInput
from streams.parts import (
    Activity,
    Artifact,
    BlockEnd,
    BlockKind,
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

# Keys that identify a generateContent response (or chunk).
_RESPONSE_KEYS = {"candidates", "usageMetadata", "promptFeedback", "modelVersion", "responseId"}


def _source(chunk: Any) -> dict[str, str]:
    """url/title of a groundingChunk (web, or a retrieval / maps source)."""
    chunk = as_dict(chunk)
    for kind in ("web", "retrievedContext", "maps"):
        source = as_dict(chunk.get(kind))
        if as_str(source.get("uri")):
            return {"url": source["uri"], "title": as_str(source.get("title"))}
    return {}



@dataclass
class _TextBlock:
    key: str
    kind: BlockKind
    parts: list[dict[str, Any]] = field(default_factory=list)
    nbytes: int = 0  # UTF-8 length of the text so far: body supports are shifted by it
    metadata: dict[str, Any] = field(default_factory=dict)
    cited: set[tuple[str, int | None, int | None]] = field(default_factory=set)


@dataclass
class Generate:
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

    def feed(self, row: Row) -> Iterator[Part]:
        if self.done or row[1] is DONE:
            return iter(())  # after an error nothing is read
        return self.chunk(row[1], row[0])

    def close(self) -> Iterator[Part]:
        return iter(()) if self.done else self.end()

    def chunk(self, data: Any, line: int) -> Iterator[Part]:
        data = object_of(data, line, "a generateContent response")
        if "error" in data:
            yield from self.start(data)
            self.done = True
            yield from error_parts(
                as_dict(data["error"]) or {"message": str(data["error"])}, self.version
            )
            return
        if not _RESPONSE_KEYS & set(data):
            raise MalformedInput(
                "not a Gemini generateContent response (expected candidates, usageMetadata or "
                f"modelVersion; got keys: {keys(data)})",
                line=line,
            )
        yield from self.start(data)
        if isinstance(data.get("usageMetadata"), dict):
            self.usage_metadata = data["usageMetadata"]  # the last one counts (see end())
        feedback = as_dict(data.get("promptFeedback"))
        self.block_reason = as_str(feedback.get("blockReason")) or self.block_reason
        candidates = data.get("candidates", [])
        if not isinstance(candidates, list):
            raise MalformedInput("candidates must be a list", line=line)
        for candidate in candidates:
            if not isinstance(candidate, dict):
                raise MalformedInput("a candidate must be an object", line=line)
            if as_int(candidate.get("index")) not in (None, 0):
                yield from self.other_candidate(candidate)
                continue
            yield from self.candidate(candidate, line)

    def start(self, data: dict[str, Any]) -> Iterator[Part]:
        if self.started:
            return
        self.started = True
        self.response_id = as_str(data.get("responseId"))
        # The served model: the response's own word; the URL only when the response is silent.
        model = as_str(data.get("modelVersion")) or endpoint_model(self.context.endpoint)
        yield ResponseStart(PROVIDER, model, self.response_id)

    def other_candidate(self, candidate: dict[str, Any]) -> Iterator[Part]:
        # Only candidate 0 is the turn; extra candidates (candidateCount > 1) are kept whole.
        if isinstance(as_dict(candidate.get("content")).get("parts"), list):
            yield Artifact(
                type="google.candidate",
                summary=f"alternative candidate {candidate['index']}",
                payload=self.payload(CANDIDATE, candidate),
            )

    def candidate(self, candidate: dict[str, Any], line: int) -> Iterator[Part]:
        content = candidate.get("content", {})
        parts = as_dict(content).get("parts", [])
        if not isinstance(content, dict) or not isinstance(parts, list):
            raise MalformedInput("candidate content.parts must be a list", line=line)
        if not all(isinstance(part, dict) for part in parts):
            raise MalformedInput("a content part must be an object", line=line)
        metadata = {k: candidate[k] for k in TEXT_METADATA if as_dict(candidate.get(k))}
        grounding = as_dict(metadata.get("groundingMetadata"))
        if grounding:
            yield from self.search(grounding)
        per_part: dict[int, list[dict[str, Any]]] = {}
        if not self.stream:
            self.candidate_metadata = metadata
            per_part, stray = _supports_by_part(grounding, parts)
            if stray:
                yield self.stray_metadata(metadata, len(stray))
        for index, part in enumerate(parts):
            yield from self.part(part, per_part.get(index, ()), as_dict(grounding))
        if self.stream and metadata:
            yield from self.stream_metadata(metadata)
        elif not self.stream:
            yield from self.recitations(metadata)
        if as_str(candidate.get("finishReason")):
            self.finish = candidate
            yield from self.close_block()

    def end(self) -> Iterator[Part]:
        cut = self.finish is None and not self.block_reason
        if not cut:
            yield from self.close_block()
        yield from self.entry_points  # whole artifacts: kept even when the stream was cut
        if cut:
            return  # no BlockEnd for the open block, no ResponseEnd
        usage = int_counters(self.usage_metadata)
        if usage:
            yield Usage(usage)
        if self.finish is None:
            yield ResponseEnd(REFUSAL)  # the prompt was blocked: no candidate at all
            return
        reason = self.finish["finishReason"]
        end_reason = FINISH_REASONS.get(reason)
        if end_reason is None:
            message = as_str(self.finish.get("finishMessage")) or f"Gemini stopped: {reason}"
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
        if kind is None and set(part) <= PART_METADATA and "thoughtSignature" in part:
            kind = "text"  # a bare signature (end of a stream) belongs to the open block
        handler: _PartHandler = _PART_HANDLERS.get(kind or "", Generate.unknown_part)
        yield from handler(self, part, supports, grounding)

    def text_part(
        self, part: dict[str, Any], supports: Any, grounding: dict[str, Any]
    ) -> Iterator[Part]:
        kind: BlockKind = "reasoning" if part.get("thought") else "message"
        text = as_str(part.get("text"))
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

    def open_block(self, kind: BlockKind) -> Iterator[Part]:
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
        call_id = as_str(call.get("id")) or f"{self.response_id}:call:{self.calls}"
        self.calls += 1
        yield ToolCall(
            call_id, as_str(call.get("name")), call.get("args", {}), self.payload(PART, part)
        )

    def executable_code(self, part: dict[str, Any], *_: Any) -> Iterator[Part]:
        yield from self.close_block()
        code = as_dict(part["executableCode"])
        run_id = as_str(code.get("id")) or f"{self.response_id}:code:{self.code_runs}"
        self.code_runs += 1
        self.open_code.append(run_id)
        yield Activity(
            run_id,
            CODE_EXECUTION,
            "started",
            input={"language": as_str(code.get("language")), "code": as_str(code.get("code"))},
            payload=self.payload(PART, part),
        )

    def code_result(self, part: dict[str, Any], *_: Any) -> Iterator[Part]:
        yield from self.close_block()
        result = as_dict(part["codeExecutionResult"])
        run_id = as_str(result.get("id"))
        if run_id in self.open_code:
            self.open_code.remove(run_id)
        elif not run_id and self.open_code:
            run_id = self.open_code.pop(0)
        elif not run_id:
            run_id = f"{self.response_id}:code:{self.code_runs}"
            self.code_runs += 1
        yield _code_outcome(run_id, as_str(result.get("outcome")), self.payload(PART, part))

    def unknown_part(self, part: dict[str, Any], *_: Any) -> Iterator[Part]:
        yield from self.close_block()
        kind = next((k for k in part if k not in PART_METADATA), "unknown")
        yield Artifact(
            type=f"google.part.{kind}",
            summary=f"Gemini {kind} part",
            payload=self.payload(PART, part),
        )

    # -- grounding -------------------------------------------------------------------------

    def search(self, grounding: dict[str, Any]) -> Iterator[Part]:
        """The hosted Google Search behind the grounding, once per response."""
        entry = as_dict(grounding.get("searchEntryPoint"))
        html = as_str(entry.get("renderedContent"))
        if html and html not in self.shown_entry_points:
            self.shown_entry_points.add(html)
            self.entry_points.append(entry_point_artifact(entry, html, self.version))
        queries = [q for q in as_list(grounding.get("webSearchQueries")) if isinstance(q, str)]
        if not queries or self.searched:
            return
        self.searched = True
        search_id = f"{self.response_id or 'response'}:search"
        chunks = as_list(grounding.get("groundingChunks"))
        sources = tuple(
            {"url": as_str(web.get("uri")), "title": as_str(web.get("title"))}
            for web in (as_dict(as_dict(c).get("web")) for c in chunks)
            if as_str(web.get("uri"))
        )
        yield Activity(search_id, WEB_SEARCH, "started", input={"queries": queries})
        yield Activity(
            search_id,
            WEB_SEARCH,
            "completed",
            input={"queries": queries},
            summary=search_summary(len(queries), len(sources)),
            sources=sources,
        )

    def cite(
        self, block: _TextBlock, supports: Any, grounding: dict[str, Any], base: int
    ) -> Iterator[Part]:
        chunks = as_list(grounding.get("groundingChunks"))
        # Supports cite the same few chunks over and over: read each chunk's source once.
        sources: dict[int, dict[str, str]] = {}
        cited = block.cited
        for support in supports:
            support = as_dict(support)
            segment = as_dict(support.get("segment"))
            start = base + (as_int(segment.get("startIndex")) or 0)
            end = as_int(segment.get("endIndex"))
            end = None if end is None else base + end
            quote = segment.get("text") if isinstance(segment.get("text"), str) else None
            for index in as_list(support.get("groundingChunkIndices")):
                index = as_int(index)
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
            supports = as_list(as_dict(metadata.get("groundingMetadata")).get("groundingSupports"))
            sources = as_list(as_dict(metadata.get("citationMetadata")).get("citationSources"))
            if supports or sources:
                yield self.stray_metadata(metadata, len(supports) + len(sources))
            return
        block.metadata.update(metadata)
        grounding = as_dict(metadata.get("groundingMetadata"))
        yield from self.cite(block, as_list(grounding.get("groundingSupports")), grounding, 0)
        yield from self.recitations(metadata)

    def stray_metadata(self, metadata: dict[str, Any], cited: int) -> Artifact:
        # Citations must land on an open block; with none open they are kept whole instead.
        return Artifact(
            type="google.candidate_metadata",
            summary=f"{count(cited, 'citation')} with no text block to attach to",
            payload=self.payload(METADATA, metadata),
        )

    def recitations(self, metadata: dict[str, Any]) -> Iterator[Part]:
        block = self.block
        sources = as_list(as_dict(metadata.get("citationMetadata")).get("citationSources"))
        if block is None or block.kind != "message":
            return  # stays in the payload of the candidate's message block, if any
        block.metadata.update({k: v for k, v in metadata.items() if k == "citationMetadata"})
        for source in map(as_dict, sources):
            url = as_str(source.get("uri"))
            start, end = as_int(source.get("startIndex")) or 0, as_int(source.get("endIndex"))
            if not url or (url, start, end) in block.cited:
                continue
            block.cited.add((url, start, end))
            yield Citation(block.key, url, start=start, end=end, unit="utf8")


_PartHandler = Callable[[Generate, dict[str, Any], Any, dict[str, Any]], Iterator[Part]]
_PART_HANDLERS: dict[str, _PartHandler] = {
    "text": Generate.text_part,
    "functionCall": Generate.function_call,
    "executableCode": Generate.executable_code,
    "codeExecutionResult": Generate.code_result,
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
                merged["text"] = as_str(last.get("text")) + as_str(part.get("text"))
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
    for support in as_list(grounding.get("groundingSupports")):
        wanted = as_int(as_dict(as_dict(support).get("segment")).get("partIndex")) or 0
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
