"""The raw part protocol: provider-neutral stream parts.

Adapters (``providers/``) translate wire formats into these parts; the one EventBuilder
(``streams.builder``) turns them into events. Nothing here knows a provider or Django.

A *block* is text that streams (assistant text or reasoning): ``BlockStart``, any number of
``TextDelta`` and ``Citation`` parts in any order, then ``BlockEnd`` with the block's native
payload. Everything else arrives whole.

Parts are values: nothing changes a part once it is made. They are plain slots dataclasses
(equal and hashable by value) rather than frozen ones, whose ``__init__`` costs about twice as
much, and an adapter makes one per streamed text delta.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

RangeUnit = Literal["codepoint", "utf8", "utf16"]
BlockKind = Literal["message", "reasoning"]


@dataclass(slots=True, unsafe_hash=True)
class Payload:
    """A native provider artifact, kept verbatim for exact same-provider replay."""

    provider: str
    format: str
    version: str
    value: Any

    def as_dict(self) -> dict[str, Any]:
        return {
            "provider": self.provider,
            "format": self.format,
            "version": self.version,
            "value": self.value,
        }


@dataclass(slots=True, unsafe_hash=True)
class ResponseStart:
    """A provider response begins. ``model`` is the served model the response names."""

    provider: str
    model: str
    response_id: str = ""


@dataclass(slots=True, unsafe_hash=True)
class BlockStart:
    key: str
    kind: BlockKind
    redacted: bool = False
    # Redacted reasoning arrives whole: its opaque data lives only in the payload.
    payload: Payload | None = None


@dataclass(slots=True, unsafe_hash=True)
class TextDelta:
    key: str
    text: str


@dataclass(slots=True, unsafe_hash=True)
class Citation:
    """An attribution on a block.

    ``start``/``end`` address the block's final text in ``unit``; the builder converts them to
    code points and checks them against ``quote`` (the provider's own segment text) when given.
    No range means the whole block is the cited span.
    """

    key: str
    url: str
    title: str = ""
    excerpt: str = ""
    start: int | None = None
    end: int | None = None
    unit: RangeUnit = "codepoint"
    quote: str | None = None
    replay: Payload | None = None
    # A stored turn rebuilt as parts (a live replay, a continued turn): what ingest found of the
    # provider's range then (``streams.ranges``), kept rather than judged again on the range it
    # repaired; adapters leave it empty.
    integrity: str = ""
    # The pages of the source document the cited passage is on, (first, last), 1-based and
    # inclusive (a PDF cited by page); None when the provider locates it otherwise or not at all.
    pages: tuple[int, int] | None = None


@dataclass(slots=True, unsafe_hash=True)
class BlockEnd:
    key: str
    payload: Payload | None = None


@dataclass(slots=True, unsafe_hash=True)
class Activity:
    """A hosted activity transition (a search or fetch the provider ran itself)."""

    activity_id: str
    name: str
    state: Literal["started", "completed", "failed"]
    input: dict[str, Any] = field(default_factory=dict)
    summary: str = ""
    # Sources the activity consulted, in provider order: [{"url": ..., "title": ...}]; None
    # when the provider does not report them (xAI keeps its tools' results to itself).
    sources: tuple[dict[str, str], ...] | None = ()
    error_code: str = ""
    payload: Payload | None = None
    # What the activity produced, for display (``streams.bodies.ACTIVITY_OUTPUT`` says which
    # keys): the text it returned, a run's stderr and return code, images, tools it found.
    output: dict[str, Any] | None = None


@dataclass(slots=True, unsafe_hash=True)
class ToolCall:
    """A client tool call the model asked the host to run. ``incomplete``: the stream was cut
    while its arguments were still arriving (``arguments`` holds what arrived); such a call is
    recorded, never handed to the host."""

    call_id: str
    name: str
    arguments: Any = None
    payload: Payload | None = None
    incomplete: bool = False


@dataclass(slots=True, unsafe_hash=True)
class Artifact:
    """A block or item this version does not understand, kept whole."""

    type: str
    summary: str = ""
    # Untrusted HTML the provider requires to be shown as provided (Google's search entry
    # point). The renderer sanitizes and isolates it; it is part of the portable projection.
    display_html: str = ""
    payload: Payload | None = None


@dataclass(slots=True, unsafe_hash=True)
class Refusal:
    """Why the provider refused, when it says (Anthropic's ``stop_details``): its category and
    explanation. The response still ends with ``ResponseEnd("refusal")``."""

    category: str
    explanation: str = ""
    payload: Payload | None = None


@dataclass(slots=True, unsafe_hash=True)
class Usage:
    """Usage counters (diagnostics only, never stored in the event log)."""

    counters: dict[str, int]


@dataclass(slots=True, unsafe_hash=True)
class ResponseEnd:
    """The response finished: the provider said why."""

    end_reason: str


@dataclass(slots=True, unsafe_hash=True)
class StreamError:
    """The provider reported an error inside the stream; the turn fails."""

    code: str
    message: str = ""
    payload: Payload | None = None


Part = (
    ResponseStart
    | BlockStart
    | TextDelta
    | Citation
    | BlockEnd
    | Activity
    | ToolCall
    | Artifact
    | Refusal
    | Usage
    | ResponseEnd
    | StreamError
)
