"""Display data: what ``render_turn`` returns for the templates and the exports.

Only message HTML and the search-entry-point ``srcdoc`` are HTML, both sanitized and typed
``SanitizedHTML`` (its ``__html__`` tells Django and Jinja not to escape it again). Every other
string — titles, excerpts, queries, URLs — is plain text for the template engine to escape.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .activities import NO_DETAILS, ActivityDetails, LabelPart
from .entry_point import SEARCH_ENTRY_POINT_SANDBOX
from .ledger import Ledger
from .links import anchor_prefix, source_anchor, source_href
from .sources import Source, pages_label


class SanitizedHTML(str):
    """HTML that went through the sanitizer. Template engines honour ``__html__``."""

    __slots__ = ()

    def __html__(self) -> str:
        return str(self)


@dataclass(frozen=True, slots=True)
class SourceItem:
    number: int | None  # None: consulted, never cited
    title: str  # "" when the provider gave none
    label: str  # title, else domain, else URL
    domain: str
    url: str  # the URL as plain text
    href: str | None  # http(s) only, with a text fragment when there is an excerpt
    excerpt: str | None
    excerpts: tuple[str, ...]
    anchor: str | None  # id of the list entry (cited sources)
    redirect: bool = False  # the link is the provider's redirect (Gemini), not the page
    pages: str = ""  # the document pages cited, as "p. 3–4" ("" when not cited by page)


# Gemini links every web source through this redirect and names the site in the title.
GOOGLE_REDIRECT = ("vertexaisearch.cloud.google.com", "/grounding-api-redirect/")
_DOMAIN = re.compile(r"(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]{2,63}")


def _redirect_domain(source: Source) -> tuple[str, bool]:
    """The domain to show and whether the link is Gemini's redirect: for a redirect, the site
    Gemini names (its title, when that is a domain), never the redirect's host."""
    host, path = GOOGLE_REDIRECT
    if source.domain != host or not (source.href or "").startswith(f"https://{host}{path}"):
        return source.domain, False
    title = source.title.strip().lower()
    return (title if _DOMAIN.fullmatch(title) else ""), True


def source_item(source: Source, turn_id: str) -> SourceItem:
    domain, redirect = _redirect_domain(source)
    return SourceItem(
        number=source.number,
        title=source.title,
        label=source.label,
        domain=domain,
        redirect=redirect,
        url=source.url,
        href=source_href(source),
        excerpt=source.excerpts[0] if source.excerpts else None,
        excerpts=tuple(source.excerpts),
        anchor=source_anchor(turn_id, source.number) if source.number else None,
        pages=pages_label(source.pages),
    )


@dataclass(frozen=True, slots=True)
class MessageItem:
    seq: int | None
    event_id: str  # the first event of the run
    html: SanitizedHTML
    incomplete: bool
    type: str = "message"
    event_ids: tuple[str, ...] = ()  # every event of the run, in seq order


@dataclass(frozen=True, slots=True)
class ActivityItem:
    seq: int | None
    event_ids: tuple[str, ...]
    activity_id: str
    name: str
    state: str  # latest state: started | completed | failed
    never_finished: bool  # started, no terminal transition, and the turn is over
    running: bool  # started and the turn is still streaming
    query: str | None
    inputs: tuple[tuple[str, str], ...]
    summary: str
    sources: tuple[SourceItem, ...]
    error_code: str
    type: str = "activity"
    # The reader's label for activities whose name says too little ("MCP call `t` on S",
    # "Looked up tools: ..."); () shows the name. ``state_label``: the state in words.
    label: tuple[LabelPart, ...] = ()
    state_label: str = ""
    details: ActivityDetails = NO_DETAILS  # code, output, images, tools


@dataclass(frozen=True, slots=True)
class ReasoningItem:
    seq: int | None
    event_id: str
    text: str  # plain text ("" when redacted)
    redacted: bool
    incomplete: bool
    type: str = "reasoning"
    count: int = 1  # redacted rows of one timeline run shown as one (``render_turn``)


@dataclass(frozen=True, slots=True)
class ToolCallItem:
    seq: int | None
    event_id: str
    call_id: str
    name: str
    arguments: str  # JSON text, plain
    type: str = "tool_call"
    incomplete: bool = False  # the stream was cut while its arguments arrived


@dataclass(frozen=True, slots=True)
class RefusalItem:
    """The provider refused, and said why (a category and an explanation, plain text)."""

    seq: int | None
    event_id: str
    category: str
    explanation: str
    type: str = "refusal"


@dataclass(frozen=True, slots=True)
class ArtifactItem:
    seq: int | None
    event_id: str
    artifact_type: str
    summary: str
    # Attribute-escaped document for an export's <iframe sandbox="{sandbox}" srcdoc="{srcdoc}">
    # (the page frames the same document by URL); None when the artifact has nothing to show.
    srcdoc: SanitizedHTML | None
    sandbox: str = SEARCH_ENTRY_POINT_SANDBOX
    type: str = "artifact"
    label: str = ""  # what it is, in words ("Google Search suggestions")


@dataclass(frozen=True, slots=True)
class ToolResultItem:
    seq: int | None
    event_id: str
    call_id: str
    output: str  # plain text
    is_error: bool
    type: str = "tool_result"


@dataclass(frozen=True, slots=True)
class ErrorItem:
    """An error the provider reported (or Turnscope's recording of the turn broke off)."""

    seq: int | None
    event_id: str
    code: str
    message: str
    type: str = "error"


TimelineItem = (MessageItem | ActivityItem | ReasoningItem | ToolCallItem | ToolResultItem
                | ErrorItem | ArtifactItem | RefusalItem)


@dataclass(frozen=True, slots=True)
class RenderedTurn:
    turn_id: str
    index: int | None
    role: str
    status: str
    end_reason: str
    agent_id: str
    provider: str
    model: str
    html: dict[str, SanitizedHTML]  # message-run HTML by run key (``run_key``)
    fresh_html: dict[str, SanitizedHTML]  # the part of ``html`` rendered now (cache these)
    sources: tuple[SourceItem, ...]
    also_consulted: tuple[SourceItem, ...]
    items: tuple[TimelineItem, ...]  # every event kind, in seq order
    # What the turn searched, opened and cited, and how they connect (``ledger``).
    ledger: Ledger = field(default_factory=Ledger)

    @property
    def source_prefix(self) -> str:
        """The id prefix of this turn's source list entries (+ number)."""
        return anchor_prefix(self.turn_id)
