"""Gemini ``generateContent`` bodies and ``streamGenerateContent`` streams (SSE, or a JSON array
of chunks).

One reader object (``Generate``) holds the candidate's open block, its held function calls and
streamed arguments, and the grounding that later chunks complete; every part handler shares
that state. Its metadata handlers (grounding, URL context, citations) are in ``grounding``,
streamed function-call arguments in ``partial_args``, the shared JSON helpers and payload
formats in ``common``.

generateContent / streamGenerateContent (candidate ``index`` 0; other candidates -> ``Artifact``):

* Consecutive ``text`` parts form ONE block, across stream chunks: ``thought: true`` parts a
  ``reasoning`` block, the others a ``message`` block. A part carrying only a ``thoughtSignature``
  joins the open block. The block payload (format ``google.candidate``) is the candidate as the
  non-streaming API would return it for this block: ``{"content": {"role": "model", "parts":
  [...]}}`` plus ``groundingMetadata`` / ``citationMetadata`` / ``urlContextMetadata`` as received
  (the last non-empty value). Streamed parts are merged into one part (text concatenated,
  ``thoughtSignature`` kept); a body keeps its parts as sent.
* A part with no text (``{"text": ""}``) is no message: its ``thoughtSignature``, if any, joins
  the open block's payload; with no block open, a lone signature is redacted reasoning.
* ``functionCall`` -> ``ToolCall`` (id = ``functionCall.id``, else ``"{responseId}:call:{n}"``).
  Streamed arguments (Vertex ``streamFunctionCallArguments``): a call with ``willContinue`` and
  no ``args`` is held while ``partialArgs`` pieces (``jsonPath`` with a ``stringValue`` /
  ``numberValue`` / ``boolValue`` / ``nullValue``; a string piece with ``willContinue`` goes on
  in the next) build its arguments, until a piece without ``willContinue`` (``{}``) ends it.
  Its payload is the part as a whole response would hold it (``name``, ``args``, the first
  piece's ``thoughtSignature``). A call cut before its end is ``ToolCall(incomplete=True)``
  with the arguments that arrived and no payload.
* ``executableCode`` / ``codeExecutionResult`` -> ``code_execution`` activity (id = the part's
  ``id``, else ``"{responseId}:code:{n}"``; a result closes the oldest open call; its
  ``output`` is the activity's output text). Gemini 2.5 shows a File Search it runs as
  ``executableCode`` ``print(file_search.query(query="..."))`` (nothing executes it): that is a
  ``file_search`` activity, input ``{"query": ...}``, completed by the retrieved-context
  grounding that comes back, the chunks its sources.
* ``toolCall`` / ``toolResponse`` (Google's own tools, by ``toolType``: ``GOOGLE_SEARCH_WEB`` ->
  ``web_search``, ``FILE_SEARCH`` -> ``file_search``) -> the activity by the part's own ``id``
  (a response without one answers the oldest open call of its tool): ``started`` with the
  call's ``args``, ``completed`` at the response, whose ``search_suggestions`` is the search
  entry point below. A response with a search ``toolCall`` makes no grounding search activity.
  Other tool types -> ``Artifact``.
* Any other part (``inlineData``, ...) -> ``Artifact(type="google.part.<key>")``.
* ``groundingMetadata``: ``{}`` (intermediate stream chunks) is ignored. ``webSearchQueries``
  (empty strings left out) -> one ``web_search`` activity, ``started`` then ``completed``, id
  ``"{responseId}:search"``, input ``{"queries": [...]}``, sources = ``groundingChunks[].web``,
  summary "2 queries · 5 sources". ``groundingSupports`` -> one ``Citation`` per referenced chunk,
  ``unit="utf8"`` (the offsets are UTF-8 bytes), ``start`` = ``startIndex`` (absent means 0:
  proto3 JSON drops zeros), ``quote`` = ``segment.text``. A ``retrievedContext`` chunk with no
  ``uri`` (File Search) is cited by its ``title``, else ``documentName``, else its
  ``fileSearchStore``: a source with no link, the chunk's ``text`` its excerpt (its
  ``customMetadata`` stays in the payload). The offsets are passed through raw; the
  builder checks them against ``quote``. In a body, ``segment.partIndex`` picks the part (its
  offset inside the merged block is added); in a stream the offsets address the whole streamed
  text (the recordings show it), so ``partIndex`` is not used. Supports with no open message
  block to land on (e.g. the text block was closed by a later ``functionCall``) are kept whole
  as an ``Artifact(type="google.candidate_metadata")``: a citation cannot follow ``BlockEnd``.
* ``urlContextMetadata`` (URL context) -> one ``web_fetch`` activity per ``retrievedUrl``, id
  ``"{responseId}:url_context:{n}"``: ``started``, then ``completed`` (SUCCESS, the URL its
  source) or ``failed`` (``error_code`` = the status without its prefix, lower case: "error",
  "paywall", "unsafe"); UNSPECIFIED leaves it started.
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
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from providers import served
from providers.google.common import (
    CANDIDATE,
    CODE_EXECUTION,
    END_TURN,
    ERROR_END,
    FILE_SEARCH,
    MAX_TOKENS,
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
from providers.google.grounding import Grounding, TextBlock, supports_by_part
from providers.google.partial_args import StreamedCall, apply_partial_args
from providers.protocol import WireContext
from providers.values import (
    as_dict,
    as_int,
    as_list,
    as_str,
    int_counters,
    output_text,
)
from providers.wire import DONE, Row
from streams.errors import MalformedInput
from streams.parts import (
    Activity,
    Artifact,
    BlockEnd,
    BlockKind,
    BlockStart,
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


# Server-side tool parts (``toolCall`` / ``toolResponse``) by ``toolType`` -> activity name.
SERVER_TOOLS = {"GOOGLE_SEARCH_WEB": WEB_SEARCH, "FILE_SEARCH": FILE_SEARCH}
# Gemini 2.5 shows a File Search it runs as code: ``print(file_search.query(query="..."))``.
_FILE_SEARCH_CODE = re.compile(r"""file_search\.query\(\s*query\s*=\s*(["'])((?:\\.|(?!\1).)*)\1""")




@dataclass
class _ServerTool:
    call_id: str
    name: str
    tool_type: str
    input: dict[str, Any]


@dataclass
class Generate(Grounding):
    context: WireContext
    stream: bool
    version: str = ""
    started: bool = False
    done: bool = False
    response_id: str = ""
    block: TextBlock | None = None
    blocks: int = 0
    calls: int = 0
    code_runs: int = 0
    open_code: list[str] = field(default_factory=list)
    called_function: bool = False
    streamed_call: StreamedCall | None = None
    server_tools: list[_ServerTool] = field(default_factory=list)  # called, not yet answered
    tool_parts: int = 0
    file_searches: list[tuple[str, dict[str, Any]]] = field(default_factory=list)  # as code
    fetched: set[str] = field(default_factory=set)  # urlContextMetadata URLs reported
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
        yield ResponseStart(served.provider(self.context, PROVIDER), model, self.response_id)

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
        if any(
            as_str(as_dict(p.get("toolCall")).get("toolType")) == "GOOGLE_SEARCH_WEB"
            for p in parts
        ):
            self.searched = True  # the search has its own activity, by the toolCall's id
        if grounding:
            yield from self.search(grounding)
        if "urlContextMetadata" in metadata:
            yield from self.url_context(as_dict(metadata["urlContextMetadata"]), grounding)
        per_part: dict[int, list[dict[str, Any]]] = {}
        if not self.stream:
            self.candidate_metadata = metadata
            per_part, stray = supports_by_part(grounding, parts)
            if stray:
                yield self.stray_metadata(metadata, len(stray))
        for index, part in enumerate(parts):
            yield from self.part(part, per_part.get(index, ()), as_dict(grounding))
        if grounding and self.file_searches:
            yield from self.file_search_results(grounding)
        if self.stream and metadata:
            yield from self.stream_metadata(metadata)
        elif not self.stream:
            yield from self.recitations(metadata)
        if as_str(candidate.get("finishReason")):
            self.finish = candidate
            yield from self.close_block()

    def end(self) -> Iterator[Part]:
        cut = self.finish is None and not self.block_reason
        if self.streamed_call is not None:  # its arguments never finished arriving
            yield from self.finish_call(complete=False)
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
        if self.streamed_call is not None and kind != "functionCall":
            yield from self.finish_call(complete=False)  # it said it would continue; it did not
        handler: _PartHandler = _PART_HANDLERS.get(kind or "", Generate.unknown_part)
        yield from handler(self, part, supports, grounding)

    def text_part(
        self, part: dict[str, Any], supports: Any, grounding: dict[str, Any]
    ) -> Iterator[Part]:
        kind: BlockKind = "reasoning" if part.get("thought") else "message"
        text = as_str(part.get("text"))
        if not text:
            yield from self.empty_text_part(part)
            return
        if self.block is None or self.block.kind != kind:
            yield from self.close_block()
            yield from self.open_block(kind)
        block = self.block
        assert block is not None
        base = block.nbytes
        _add_part(block.parts, part, merge=self.stream)
        block.nbytes += len(text.encode())
        yield TextDelta(block.key, text)
        yield from self.cite(block, supports, grounding, base)

    def empty_text_part(self, part: dict[str, Any]) -> Iterator[Part]:
        """A part with no text is no message. Its thoughtSignature (which Gemini needs back)
        joins the open block's payload; with no block open it is reasoning whose content is
        opaque, as a thought with only a signature is."""
        if "thoughtSignature" not in part:
            return  # ``{"text": ""}``: nothing at all
        if self.block is not None:
            _add_part(self.block.parts, part, merge=self.stream)
            return
        key = f"b{self.blocks}"
        self.blocks += 1
        payload = self.payload(CANDIDATE, {"content": {"role": "model", "parts": [dict(part)]}})
        yield BlockStart(key, "reasoning", redacted=True, payload=payload)
        yield BlockEnd(key, payload)

    def open_block(self, kind: BlockKind) -> Iterator[Part]:
        self.block = TextBlock(f"b{self.blocks}", kind)
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
        streamed = self.streamed_call
        if streamed is not None:  # the next piece of a call whose arguments stream
            apply_partial_args(streamed, call.get("partialArgs"))
            if call.get("willContinue") is not True:
                yield from self.finish_call(complete=True)
            return
        if call.get("willContinue") is True and "args" not in call:
            # The arguments follow in pieces (``partialArgs``) until a part without
            # ``willContinue``: hold the call until then.
            rest = {k: v for k, v in part.items() if k != "functionCall"}
            streamed = self.streamed_call = StreamedCall(self.call_id(call), as_str(
                call.get("name")), rest)
            if as_str(call.get("id")):
                streamed.part["id"] = call["id"]
            apply_partial_args(streamed, call.get("partialArgs"))
            return
        yield ToolCall(
            self.call_id(call), as_str(call.get("name")), call.get("args", {}),
            self.payload(PART, part),
        )

    def call_id(self, call: dict[str, Any]) -> str:
        call_id = as_str(call.get("id")) or f"{self.response_id}:call:{self.calls}"
        self.calls += 1
        return call_id

    def finish_call(self, *, complete: bool) -> Iterator[Part]:
        """The streamed call is whole (its last piece came) or never will be (the stream was
        cut, or went on to other parts): an incomplete call keeps the arguments that arrived
        and no payload, since it is not what the model sent."""
        streamed, self.streamed_call = self.streamed_call, None
        assert streamed is not None
        if not complete:
            yield ToolCall(streamed.call_id, streamed.name, streamed.args, incomplete=True)
            return
        function: dict[str, Any] = {"name": streamed.name, "args": streamed.args}
        if "id" in streamed.part:
            function = {"id": streamed.part["id"], **function}
        rest = {k: v for k, v in streamed.part.items() if k != "id"}
        # The part as generateContent would have returned it whole.
        payload = self.payload(PART, {"functionCall": function, **rest})
        yield ToolCall(streamed.call_id, streamed.name, streamed.args, payload)

    def executable_code(self, part: dict[str, Any], *_: Any) -> Iterator[Part]:
        yield from self.close_block()
        code = as_dict(part["executableCode"])
        source = as_str(code.get("code"))
        run_id = as_str(code.get("id")) or f"{self.response_id}:code:{self.code_runs}"
        self.code_runs += 1
        query = _FILE_SEARCH_CODE.search(source)
        if query is not None:
            # Gemini 2.5 shows the File Search it runs as this code; nothing executes it, and
            # its results come back as retrieved-context grounding.
            found = re.sub(r"\\(.)", r"\1", query.group(2))
            self.file_searches.append((run_id, {"query": found}))
            yield Activity(run_id, FILE_SEARCH, "started", input={"query": found},
                           payload=self.payload(PART, part))
            return
        self.open_code.append(run_id)
        yield Activity(
            run_id,
            CODE_EXECUTION,
            "started",
            input={"language": as_str(code.get("language")), "code": source},
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
        yield _code_outcome(
            run_id, as_str(result.get("outcome")), as_str(result.get("output")),
            self.payload(PART, part),
        )

    def tool_call(self, part: dict[str, Any], *_: Any) -> Iterator[Part]:
        """A tool Google runs itself (``toolCall``: Google Search, File Search), by its id."""
        call = as_dict(part["toolCall"])
        tool_type = as_str(call.get("toolType"))
        name = SERVER_TOOLS.get(tool_type)
        if name is None:
            yield from self.unknown_part(part)
            return
        yield from self.close_block()
        call_id = as_str(call.get("id"))
        if not call_id:
            call_id = f"{self.response_id}:{tool_type.lower()}:{self.tool_parts}"
        self.tool_parts += 1
        args = dict(as_dict(call.get("args")))
        self.server_tools.append(_ServerTool(call_id, name, tool_type, args))
        yield Activity(call_id, name, "started", input=args, payload=self.payload(PART, part))

    def tool_response(self, part: dict[str, Any], *_: Any) -> Iterator[Part]:
        """Its result (``toolResponse``): the call with the same id, else the oldest one of
        the same tool still waiting (a response may leave its id out)."""
        answer = as_dict(part["toolResponse"])
        answer_id, tool_type = as_str(answer.get("id")), as_str(answer.get("toolType"))
        waiting = self.server_tools
        call = next((c for c in waiting if answer_id and c.call_id == answer_id), None)
        if call is None and not answer_id:
            call = next((c for c in waiting if not tool_type or c.tool_type == tool_type), None)
        if call is None:
            yield from self.unknown_part(part)
            return
        yield from self.close_block()
        waiting.remove(call)
        response = as_dict(answer.get("response"))
        html = as_str(response.get("search_suggestions"))
        if html and html not in self.shown_entry_points:
            self.shown_entry_points.add(html)
            self.entry_points.append(
                entry_point_artifact({"renderedContent": html}, html, self.version)
            )
        queries = [q for q in as_list(call.input.get("queries")) if isinstance(q, str) and q]
        summary = search_summary(len(queries), None) if queries else ""
        yield Activity(call.call_id, call.name, "completed", call.input, summary,
                       payload=self.payload(PART, part))

    def unknown_part(self, part: dict[str, Any], *_: Any) -> Iterator[Part]:
        yield from self.close_block()
        kind = next((k for k in part if k not in PART_METADATA), "unknown")
        yield Artifact(
            type=f"google.part.{kind}",
            summary=f"Gemini {kind} part",
            payload=self.payload(PART, part),
        )

_PartHandler = Callable[[Generate, dict[str, Any], Any, dict[str, Any]], Iterator[Part]]
_PART_HANDLERS: dict[str, _PartHandler] = {
    "text": Generate.text_part,
    "functionCall": Generate.function_call,
    "executableCode": Generate.executable_code,
    "codeExecutionResult": Generate.code_result,
    "toolCall": Generate.tool_call,
    "toolResponse": Generate.tool_response,
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


def _code_outcome(run_id: str, outcome: str, output: str, payload: Payload) -> Activity:
    words = outcome.removeprefix("OUTCOME_").lower().replace("_", " ") or "finished"
    shown = {"text": output_text(output)} if output else None
    if outcome in ("OUTCOME_OK", ""):
        return Activity(run_id, CODE_EXECUTION, "completed", summary="ok", payload=payload,
                        output=shown)
    return Activity(
        run_id, CODE_EXECUTION, "failed", summary=words, error_code=outcome.lower(),
        payload=payload, output=shown,
    )
