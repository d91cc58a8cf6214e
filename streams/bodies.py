"""Typed event bodies: what each event kind adds to the fields every event has.

Every event has an id, a seq, a kind, a text and an ``incomplete`` flag (columns), and a message
has attribution rows. The rest is the kind's *body*: one class per event kind here, stored as
JSON text in ``Event.body`` and spread into the event object of an export, after ``id``,
``seq`` and ``kind`` (``schemas/export.schema.json``). A hosted activity's stored body,
``{"activity": {...}}``, is exactly what its export event adds.

This module is the only code that knows those shapes. The builder makes bodies; the store
writes ``to_body()``; every reader (stored rows, export documents, the renderer's portable
events) goes through ``from_body()`` or ``load()``.

``from_body`` takes a stored body or a whole portable event (which carries its body's fields at
its top level), and is lenient: a field of the wrong type reads as absent, never raises, because
the renderer reads untrusted documents and shows what it can. Checking a document is the
schema's job, before anything is stored. A field the schema leaves optional is None when absent
and ``to_body()`` leaves it out, so ``from_body(b.to_body()) == b`` and, for every body the
builder or an import wrote, ``from_body(d).to_body() == d`` (same keys, same order): the stored
JSON and the export stay byte-identical.

Nothing here imports Django, a provider or ``conversations``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

import orjson

__all__ = [
    "ACTIVITY_OUTPUT",
    "ACTIVITY_STATES",
    "BODIES",
    "IMAGE_MEDIA_TYPES",
    "MAX_IMAGE_URL_CHARS",
    "MAX_OUTPUT_TEXT_CHARS",
    "MESSAGE",
    "ActivityBody",
    "ArtifactBody",
    "Body",
    "ErrorBody",
    "MessageBody",
    "ReasoningBody",
    "RefusalBody",
    "ToolCallBody",
    "ToolResultBody",
    "body_class",
    "body_json",
    "load",
]

ACTIVITY_STATES = ("started", "completed", "failed")
# What a hosted activity's ``output`` may say (the schema closes it to these keys):
#   text         the text it returned (a run's stdout or logs, an MCP result, advice, a file)
#   stderr       a run's standard error
#   return_code  a run's exit status (an integer)
#   error        the provider's error message, when the activity failed
#   images       images it produced: [{"url": a data: URL, "media_type": "image/png"}, ...]
#   tools        names of the tools it found or listed
ACTIVITY_OUTPUT = ("text", "stderr", "return_code", "error", "images", "tools")
# An image is kept in ``output`` only as a base64 data: URL of one of these raster types (never
# SVG, which can carry script) and no longer than this; anything else stays in the payload only.
IMAGE_MEDIA_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp")
MAX_IMAGE_URL_CHARS = 4 * 1024 * 1024
# Longer output text is cut (the payload keeps all of it).
MAX_OUTPUT_TEXT_CHARS = 20_000

_EMPTY: Mapping[str, Any] = {}


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else _EMPTY


@dataclass(frozen=True, slots=True)
class MessageBody:
    """Assistant or user text: everything it has is a column (text, incomplete) or an
    attribution row, so its body is empty."""

    kind: ClassVar[str] = "message"

    def to_body(self) -> dict[str, Any]:
        return {}

    @classmethod
    def from_body(cls, body: Mapping[str, Any]) -> MessageBody:
        return MESSAGE


MESSAGE = MessageBody()


@dataclass(frozen=True, slots=True)
class ReasoningBody:
    """Reasoning text (a column). ``redacted``: the provider sent it encrypted; the text is
    empty and the opaque data lives only in the payload."""

    kind: ClassVar[str] = "reasoning"
    redacted: bool = False

    def to_body(self) -> dict[str, Any]:
        return {"redacted": self.redacted}

    @classmethod
    def from_body(cls, body: Mapping[str, Any]) -> ReasoningBody:
        return cls(_mapping(body).get("redacted") is True)


@dataclass(frozen=True, slots=True)
class ActivityBody:
    """One transition of a hosted activity (a search or fetch the provider ran itself),
    linked to the others by ``id``, the provider's id."""

    kind: ClassVar[str] = "hosted_activity"
    id: str
    name: str
    state: str  # one of ACTIVITY_STATES (the builder checks; a reader may meet anything)
    input: Mapping[str, Any] = field(default_factory=dict)
    summary: str = ""
    # Sources the activity consulted, in provider order: ({"url": ..., "title": ...}, ...).
    sources: tuple[Mapping[str, Any], ...] | None = None
    error_code: str | None = None
    # What it produced (keys: ACTIVITY_OUTPUT). A reader checks each value's type itself.
    output: Mapping[str, Any] | None = None

    def to_body(self) -> dict[str, Any]:
        activity: dict[str, Any] = {
            "id": self.id, "name": self.name, "state": self.state, "input": self.input,
            "summary": self.summary,
        }
        if self.sources is not None:
            activity["sources"] = [dict(source) for source in self.sources]
        if self.error_code is not None:
            activity["error_code"] = self.error_code
        if self.output is not None:
            activity["output"] = dict(self.output)
        return {"activity": activity}

    @classmethod
    def from_body(cls, body: Mapping[str, Any]) -> ActivityBody:
        activity = _mapping(_mapping(body).get("activity"))
        sources = activity.get("sources")
        error_code = activity.get("error_code")
        output = activity.get("output")
        return cls(
            _str(activity.get("id")),
            _str(activity.get("name")),
            _str(activity.get("state")),
            _mapping(activity.get("input")),
            _str(activity.get("summary")),
            tuple(s for s in sources if isinstance(s, Mapping))
            if isinstance(sources, list | tuple) else None,
            error_code if isinstance(error_code, str) else None,
            output if isinstance(output, Mapping) else None,
        )


@dataclass(frozen=True, slots=True)
class ToolCallBody:
    """A client tool call the model asked the host to run. ``arguments`` is any JSON value,
    as the provider sent it. ``incomplete``: the stream was cut while the arguments were still
    arriving (True, or None: absent from the stored body, so complete calls keep their shape)."""

    kind: ClassVar[str] = "tool_call_request"
    id: str
    name: str
    arguments: Any = None
    incomplete: bool | None = None

    def to_body(self) -> dict[str, Any]:
        call = {"id": self.id, "name": self.name, "arguments": self.arguments}
        if self.incomplete is not None:
            call["incomplete"] = self.incomplete
        return {"call": call}

    @classmethod
    def from_body(cls, body: Mapping[str, Any]) -> ToolCallBody:
        call = _mapping(_mapping(body).get("call"))
        incomplete = call.get("incomplete")
        return cls(_str(call.get("id")), _str(call.get("name")), call.get("arguments"),
                   incomplete if isinstance(incomplete, bool) else None)


@dataclass(frozen=True, slots=True)
class ArtifactBody:
    """A block or item this version does not understand, kept whole in the payload.
    ``display_html``: untrusted HTML the provider requires to be shown as provided (Google's
    search entry point); the renderer sanitizes and isolates it."""

    kind: ClassVar[str] = "provider_artifact"
    type: str
    summary: str = ""
    display_html: str | None = None

    def to_body(self) -> dict[str, Any]:
        body = {"type": self.type, "summary": self.summary}
        if self.display_html is not None:
            body["display_html"] = self.display_html
        return body

    @classmethod
    def from_body(cls, body: Mapping[str, Any]) -> ArtifactBody:
        body = _mapping(body)
        display = body.get("display_html")
        return cls(_str(body.get("type")), _str(body.get("summary")),
                   display if isinstance(display, str) else None)


@dataclass(frozen=True, slots=True)
class ErrorBody:
    """An error the provider reported inside the stream (the turn failed)."""

    kind: ClassVar[str] = "error"
    code: str
    message: str = ""

    def to_body(self) -> dict[str, Any]:
        return {"error": {"code": self.code, "message": self.message}}

    @classmethod
    def from_body(cls, body: Mapping[str, Any]) -> ErrorBody:
        error = _mapping(_mapping(body).get("error"))
        return cls(_str(error.get("code")), _str(error.get("message")))


@dataclass(frozen=True, slots=True)
class ToolResultBody:
    """The result of a client tool call the host dispatched (the recording proxy reads it from
    the request that sends it back). ``output`` is a plain-text preview; the payload keeps the
    provider's block whole."""

    kind: ClassVar[str] = "tool_call_response"
    id: str
    name: str = ""
    output: str = ""
    is_error: bool = False

    def to_body(self) -> dict[str, Any]:
        return {"result": {"id": self.id, "name": self.name, "output": self.output,
                           "is_error": self.is_error}}

    @classmethod
    def from_body(cls, body: Mapping[str, Any]) -> ToolResultBody:
        result = _mapping(_mapping(body).get("result"))
        return cls(_str(result.get("id")), _str(result.get("name")), _str(result.get("output")),
                   result.get("is_error") is True)


@dataclass(frozen=True, slots=True)
class RefusalBody:
    """Why the provider refused to answer, as it said (Anthropic's ``stop_details``): a
    category (e.g. ``reasoning_extraction``) and an explanation for the reader."""

    kind: ClassVar[str] = "refusal"
    category: str
    explanation: str = ""

    def to_body(self) -> dict[str, Any]:
        return {"refusal": {"category": self.category, "explanation": self.explanation}}

    @classmethod
    def from_body(cls, body: Mapping[str, Any]) -> RefusalBody:
        refusal = _mapping(_mapping(body).get("refusal"))
        return cls(_str(refusal.get("category")), _str(refusal.get("explanation")))


Body = (
    MessageBody | ReasoningBody | ActivityBody | ToolCallBody | ToolResultBody | ArtifactBody
    | ErrorBody | RefusalBody
)

BODIES: dict[str, type[Body]] = {
    cls.kind: cls
    for cls in (MessageBody, ReasoningBody, ActivityBody, ToolCallBody, ToolResultBody,
                ArtifactBody, ErrorBody, RefusalBody)
}


def body_class(kind: str) -> type[Body]:
    """The body class of event ``kind``. Every registered event kind has one (a test checks)."""
    try:
        return BODIES[kind]
    except KeyError:
        raise ValueError(f"no body type for event kind {kind!r}") from None


def load(kind: str, body: str | bytes | Mapping[str, Any]) -> Body:
    """The typed body of a ``kind`` event from its stored JSON text (or an already decoded
    body, or a portable event)."""
    if isinstance(body, str | bytes):
        body = orjson.loads(body)
    return body_class(kind).from_body(_mapping(body))


def body_json(body: Body) -> str:
    """The JSON text ``body`` is stored as."""
    return orjson.dumps(body.to_body()).decode()
