"""Per-turn source registry: one number per source, assigned once, used everywhere.

``number_sources(turn)`` walks the turn's events in ``seq`` order. A source gets the next
number (1-based) the first time it is *cited* (an attribution on a message event; within an
event, in the order the markers appear in the text). Sources that hosted activities consulted
but nothing cited are kept, unnumbered, as "also consulted". The page, the live view and both
exports call this same pure function, so the numbers agree everywhere.

Identity is the normalised URL: scheme and host lowercased (host in IDNA/punycode form), the
default port, the userinfo and the fragment dropped, an empty path made ``/``, unsafe
characters percent-encoded. The query is kept as given, tracking parameters included: they are
part of the address the provider reported, stripping them can change which page loads, and a
provider appends the same ones every time (OpenAI's ``utm_source=openai``), so they do not
split one page into two numbers in practice. What is shown and linked drops OpenAI's
``utm_source=openai`` (``urls.shown_url``); the payload keeps the URL as sent.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, TypeGuard
from urllib.parse import quote, urlsplit

from streams.bodies import ActivityBody

from .text import clean_text
from .urls import browser_url, shown_url

MAX_URL_CHARS = 8192
MAX_TITLE_CHARS = 300
MAX_EXCERPT_CHARS = 1000
MAX_EXCERPTS_PER_SOURCE = 5
_DEFAULT_PORTS = {"http": 80, "https": 443}
# Characters left alone when re-encoding a path or query: the URL syntax ones and "%" (already
# encoded octets stay as they are).
_PATH_SAFE = "/%:@!$&'()*+,;=-._~"
_QUERY_SAFE = _PATH_SAFE + "?"


@dataclass(frozen=True, slots=True)
class NormalisedURL:
    key: str  # identity of the source
    href: str | None  # absolute http(s) URL safe to link to, or None
    domain: str  # host shown to the reader ("" when there is none)
    display: str  # the URL as plain text, capped


def normalise_url(raw: object) -> NormalisedURL:
    """Normalise a source URL. Only http and https sources get an ``href``."""
    return _normalise(raw if isinstance(raw, str) else "")


@lru_cache(maxsize=4096)
def _normalise(raw: str) -> NormalisedURL:
    # Pure function of the string, and a turn asks for the same few URLs many times.
    url = browser_url(raw)
    display = clean_text(url, limit=300)
    if not url:
        return NormalisedURL(key="", href=None, domain="", display="")
    if len(url) > MAX_URL_CHARS:
        return NormalisedURL(key=url, href=None, domain="", display=display)
    try:
        parts = urlsplit(url)
        scheme = parts.scheme.lower()
        host = parts.hostname or ""
        port = parts.port
    except ValueError:
        return NormalisedURL(key=url, href=None, domain="", display=display)
    if scheme not in _DEFAULT_PORTS or not host:
        # mailto:, javascript:, data:, //host, relative...: shown as text, never linked.
        key = f"{scheme}:{url.split(':', 1)[1]}" if scheme else url
        return NormalisedURL(key=key, href=None, domain="", display=display)
    if not host.isascii():
        try:
            host = host.encode("idna").decode("ascii")
        except UnicodeError:
            return NormalisedURL(key=url, href=None, domain="", display=display)
    if not all(c.isalnum() or c in "-._:[]" for c in host):
        return NormalisedURL(key=url, href=None, domain="", display=display)
    netloc = f"[{host}]" if ":" in host else host
    if port is not None and port != _DEFAULT_PORTS[scheme]:
        netloc += f":{port}"
    path = quote(parts.path or "/", safe=_PATH_SAFE)
    query = quote(parts.query, safe=_QUERY_SAFE)
    key = f"{scheme}://{netloc}{path}" + (f"?{query}" if query else "")
    return NormalisedURL(key=key, href=shown_url(key), domain=host,
                         display=clean_text(shown_url(url), limit=300))


@dataclass(slots=True)
class Source:
    """One source of a turn. ``number`` is None for a source consulted but never cited."""

    key: str
    url: str  # display form of the URL (plain text)
    href: str | None  # normalised http(s) URL without text fragment, or None
    domain: str
    title: str = ""
    number: int | None = None
    excerpts: list[str] = field(default_factory=list)
    fragment: str = ""  # the original URL's fragment, kept for the link
    # The document pages cited, (first, last) inclusive, in the order first cited.
    pages: list[tuple[int, int]] = field(default_factory=list)

    @property
    def label(self) -> str:
        """What to call the source when it has no title."""
        return self.title or self.domain or self.url or "Untitled source"


@dataclass(slots=True)
class SourceRegistry:
    turn_id: str
    cited: list[Source] = field(default_factory=list)
    consulted: list[Source] = field(default_factory=list)
    _by_key: dict[str, Source] = field(default_factory=dict)

    def lookup(self, source: object) -> Source | None:
        """The registry entry for an attribution's ``source`` dict (or a URL string)."""
        key = _source_key(source)
        return self._by_key.get(key)

    def number_for(self, source: object) -> int | None:
        entry = self.lookup(source)
        return entry.number if entry else None


def _is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def event_text(event: dict[str, Any]) -> str:
    """An event's text; "" when it has none."""
    text = event.get("text")
    return text if isinstance(text, str) else ""


def _field(mapping: object, name: str) -> Any:
    return mapping.get(name) if isinstance(mapping, dict) else None


def _source_key(source: object) -> str:
    if isinstance(source, str):
        url, title = source, ""
    else:
        url, title = _field(source, "url"), _field(source, "title")
    key = normalise_url(url).key
    # Sources without any URL are told apart by title.
    return key or "untitled:" + clean_text(title, limit=MAX_TITLE_CHARS)


def seq_order(events: object) -> list[dict[str, Any]]:
    """Events sorted by ``seq`` (stable; events without an int seq keep their place last)."""
    if not isinstance(events, list):
        return []
    valid = [e for e in events if isinstance(e, dict)]

    def key(item: tuple[int, dict[str, Any]]) -> tuple[int, int, int]:
        index, event = item
        seq = event.get("seq")
        if isinstance(seq, int) and not isinstance(seq, bool):
            return (0, seq, index)
        return (1, 0, index)

    return [event for _, event in sorted(enumerate(valid), key=key)]


def attribution_range(attribution: dict[str, Any], length: int) -> tuple[int, int] | None:
    """A valid ``(start, end)`` in code points, or None for "the whole event"."""
    rng = attribution.get("range")
    if not isinstance(rng, dict):
        return None
    start, end = rng.get("start"), rng.get("end")
    if not (_is_int(start) and _is_int(end)):
        return None
    if not 0 <= start <= end <= length:
        return None
    return start, end


def attribution_pages(pages: object) -> tuple[int, int] | None:
    """An attribution's ``pages`` as (first, last), or None when absent or not a page span."""
    first, last = _field(pages, "first"), _field(pages, "last")
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in (first, last)):
        return None
    return (first, last) if 1 <= first <= last else None


def pages_label(pages: list[tuple[int, int]] | tuple[tuple[int, int], ...]) -> str:
    """The cited pages as a reader writes them: "p. 3", "p. 3–4", "p. 3–4, 9"; "" for none."""
    spans = [str(first) if first == last else f"{first}–{last}" for first, last in pages]
    return f"p. {', '.join(spans)}" if spans else ""


def citation_order(event: dict[str, Any]) -> list[dict[str, Any]]:
    """An event's attributions in the order their markers appear: by end, then start."""
    attributions = event.get("attributions")
    if not isinstance(attributions, list):
        return []
    length = len(event_text(event))
    keyed = []
    for index, attribution in enumerate(attributions):
        if not isinstance(attribution, dict):
            continue
        rng = attribution_range(attribution, length)
        start, end = rng if rng else (0, length)
        keyed.append(((end, start, index), attribution))
    keyed.sort(key=lambda pair: pair[0])
    return [attribution for _, attribution in keyed]


def number_sources(turn: dict[str, Any]) -> SourceRegistry:
    """Number the sources of one turn (portable projection dict). Pure and deterministic."""
    turn_id = turn.get("id") if isinstance(turn, dict) else None
    registry = SourceRegistry(turn_id=turn_id if isinstance(turn_id, str) else "")
    seen: dict[str, Source] = registry._by_key
    order: list[Source] = []

    def note(source: object, *, excerpt: object = None, pages: object = None,
             cite: bool) -> None:
        url, title = _field(source, "url"), _field(source, "title")
        if not isinstance(source, dict):
            return
        norm = normalise_url(url)
        key = norm.key or "untitled:" + clean_text(title, limit=MAX_TITLE_CHARS)
        entry = seen.get(key)
        if entry is None:
            fragment = ""
            if norm.href and isinstance(url, str) and "#" in url:
                fragment = url.split("#", 1)[1].strip()
            entry = seen[key] = Source(
                key=key, url=norm.display, href=norm.href, domain=norm.domain, fragment=fragment
            )
            order.append(entry)
        if not entry.title:
            entry.title = clean_text(title, limit=MAX_TITLE_CHARS)
        if cite:
            if entry.number is None:
                registry.cited.append(entry)
                entry.number = len(registry.cited)
            if len(entry.excerpts) < MAX_EXCERPTS_PER_SOURCE:
                text = clean_text(excerpt, limit=MAX_EXCERPT_CHARS)
                if text and text not in entry.excerpts:
                    entry.excerpts.append(text)
            span = attribution_pages(pages)
            if span and span not in entry.pages:
                entry.pages.append(span)

    for event in seq_order(turn.get("events") if isinstance(turn, dict) else None):
        kind = event.get("kind")
        if kind == "message":
            for attribution in citation_order(event):
                if attribution.get("integrity") == "no_source":
                    continue  # ingest found it names no source: no number (the ledger counts it)
                note(attribution.get("source"), excerpt=attribution.get("excerpt"),
                     pages=attribution.get("pages"), cite=True)
        elif kind == "hosted_activity":
            for source in ActivityBody.from_body(event).sources or ():
                note(source, cite=False)
    registry.consulted = [entry for entry in order if entry.number is None]
    return registry
