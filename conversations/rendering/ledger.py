"""The research ledger of one agent turn: what it searched, what it opened, what it cited, and
how those connect.

``build_ledger(turn)`` reads one portable-projection turn (the same dict the page, the live view
and the exports render) and nothing else, so it says the same for every provider: a search is a
``web_search`` or ``file_search`` hosted activity (OpenAI's ``open_page`` / ``find_in_page``
actions are pages opened, not searches), a page opened is a ``web_fetch`` or one of those
actions, a cited source is a numbered entry of the turn's one source registry (``sources``).

The cross-links are facts of the stored events, not guesses: a cited source was *surfaced* by
every search whose returned sources include it (same normalised URL); it was *opened* if a fetch
or page-open names its URL. Integrity counts what ingest did with each attribution's range
(``Attribution.integrity``: exact, repaired, dropped, no source).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from streams.bodies import ActivityBody

from .sources import SourceRegistry, normalise_url, number_sources, seq_order
from .text import clean_text

SEARCH_NAMES = frozenset({"web_search", "file_search", "x_search"})
FETCH_NAMES = frozenset({"web_fetch"})
# OpenAI's web_search call also opens pages and searches inside them: those are not searches.
PAGE_ACTIONS = frozenset({"open_page", "find_in_page"})
_QUERY_KEYS = ("query", "queries", "q", "search_query")
INTEGRITY_KINDS = ("exact", "repaired", "dropped", "no_source")


@dataclass(frozen=True, slots=True)
class LedgerSearch:
    """One search, in the order the provider ran it. ``results`` is how many sources it
    returned (None unless it completed, and when the provider does not report them);
    ``cited`` the numbers of the cited sources among them."""

    position: int  # 1-based, in the order the searches started
    activity_id: str
    name: str
    queries: tuple[str, ...]
    state: str
    results: int | None
    cited: tuple[int, ...]

    @property
    def never_finished(self) -> bool:
        return self.state == "started"

    @property
    def no_results(self) -> bool:
        """It ran and returned nothing to ground the answer on."""
        return self.state == "completed" and self.results == 0

    def as_dict(self) -> dict[str, Any]:
        return {"activity_id": self.activity_id, "name": self.name,
                "queries": list(self.queries), "state": self.state, "results": self.results,
                "cited": list(self.cited)}


@dataclass(frozen=True, slots=True)
class LedgerOpen:
    """A page the provider opened, fetched, or searched inside (``action``: fetch, open_page,
    find_in_page). ``cited``: that page's source number, if the turn cites it."""

    activity_id: str
    name: str
    action: str
    url: str
    href: str | None
    pattern: str
    state: str
    cited: int | None

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"activity_id": self.activity_id, "name": self.name,
                               "action": self.action, "url": self.url, "state": self.state,
                               "cited": self.cited}
        if self.pattern:
            out["pattern"] = self.pattern
        return out


@dataclass(frozen=True, slots=True)
class LedgerCited:
    """A cited source: which searches (by ``position``) returned it, whether it was opened,
    and what ingest did with its citations' ranges."""

    number: int
    label: str
    url: str
    href: str | None
    surfaced_by: tuple[int, ...]
    opened: bool
    citations: int
    repaired: int
    dropped: int

    def as_dict(self) -> dict[str, Any]:
        return {"number": self.number, "title": self.label, "url": self.url,
                "surfaced_by": list(self.surfaced_by), "opened": self.opened,
                "citations": self.citations, "repaired": self.repaired,
                "dropped": self.dropped}


@dataclass(frozen=True, slots=True)
class Integrity:
    """Per turn: how many attributions ingest placed exactly, repaired by searching for the
    provider's segment text, could not place (dropped: shown as citing the whole passage), or
    found naming no source; and the searches that ran but returned no grounding data."""

    exact: int = 0
    repaired: int = 0
    dropped: int = 0
    no_source: int = 0
    unchecked: int = 0  # the provider gave no range (the whole block is the cited span)
    searches_without_results: tuple[int, ...] = ()

    @property
    def problems(self) -> bool:
        return bool(self.dropped or self.no_source or self.searches_without_results)

    def as_dict(self) -> dict[str, Any]:
        return {"exact": self.exact, "repaired": self.repaired, "dropped": self.dropped,
                "no_source": self.no_source, "unchecked": self.unchecked,
                "searches_without_results": list(self.searches_without_results)}


@dataclass(frozen=True, slots=True)
class Ledger:
    searches: tuple[LedgerSearch, ...] = ()
    opened: tuple[LedgerOpen, ...] = ()
    cited: tuple[LedgerCited, ...] = ()
    integrity: Integrity = field(default_factory=Integrity)

    @property
    def empty(self) -> bool:
        """Nothing searched, opened or cited, and nothing to say about integrity."""
        return not (self.searches or self.opened or self.cited or self.integrity.problems)

    def as_dict(self) -> dict[str, Any]:
        """The ledger as the JSON export and the API carry it (``schemas/export.schema.json``,
        ``$defs/ledger``)."""
        return {"searches": [s.as_dict() for s in self.searches],
                "opened": [o.as_dict() for o in self.opened],
                "cited": [c.as_dict() for c in self.cited],
                "integrity": self.integrity.as_dict()}


def _match_key(url: object) -> str:
    """A URL's identity for "was this page opened?": the registry's normalised key without
    tracking parameters (OpenAI cites ``?utm_source=openai`` on pages it opened without it)."""
    key = normalise_url(url).key
    if "?" not in key or "utm_" not in key:
        return key
    parts = urlsplit(key)
    query = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True)
             if not k.startswith("utm_")]
    return urlunsplit(parts._replace(query=urlencode(query)))


def _queries(value: object) -> tuple[str, ...]:
    if not isinstance(value, dict):
        return ()
    for key in _QUERY_KEYS:
        candidate = value.get(key)
        items = candidate if isinstance(candidate, list) else [candidate]
        found = tuple(clean_text(c, limit=500) for c in items if isinstance(c, str) and c.strip())
        if found:
            return found
    return ()


@dataclass
class _Activity:
    activity_id: str
    name: str = ""
    state: str = ""
    input: dict[str, Any] = field(default_factory=dict)
    sources: list[Any] = field(default_factory=list)
    reported: bool = False  # a transition said what it found (xAI's never do)


def _activities(events: list[dict[str, Any]]) -> list[_Activity]:
    """Hosted activities grouped by id, in the order they started, each at its latest state."""
    groups: dict[str, _Activity] = {}
    for position, event in enumerate(events):
        if event.get("kind") != "hosted_activity":
            continue
        body = ActivityBody.from_body(event)
        key = body.id or f"event:{event.get('id') or position}"
        group = groups.setdefault(key, _Activity(clean_text(body.id, limit=200)))
        group.name = body.name or group.name
        group.state = body.state or group.state
        if body.input:
            group.input = dict(body.input)
        group.sources.extend(body.sources or ())
        # a start never holds the results: the terminal transition says whether any came back
        group.reported = group.reported or (body.sources is not None and body.state != "started")
    return list(groups.values())


def build_ledger(turn: object, registry: SourceRegistry | None = None) -> Ledger:
    """The ledger of one portable turn. ``registry``: the turn's ``number_sources`` result,
    when the caller has it already. Pure and deterministic."""
    if not isinstance(turn, dict):
        return Ledger()
    registry = registry or number_sources(turn)
    events = seq_order(turn.get("events"))
    cited_by_key = {_match_key(s.href or s.url): s.number for s in registry.cited
                    if s.number is not None}

    searches: list[LedgerSearch] = []
    opened: list[LedgerOpen] = []
    surfaced: dict[int, list[int]] = {}
    opened_numbers: set[int] = set()
    for activity in _activities(events):
        name = clean_text(activity.name, limit=100)
        state = activity.state or "started"
        action = activity.input.get("action") if isinstance(activity.input, dict) else None
        if name in FETCH_NAMES or (name == "web_search" and action in PAGE_ACTIONS):
            url = activity.input.get("url")
            norm = normalise_url(url)
            number = cited_by_key.get(_match_key(url)) if norm.key else None
            if number is not None:
                opened_numbers.add(number)
            opened.append(LedgerOpen(
                activity.activity_id, name, "fetch" if name in FETCH_NAMES else str(action),
                norm.display, norm.href, clean_text(activity.input.get("pattern"), limit=500),
                state, number,
            ))
            continue
        if name not in SEARCH_NAMES:
            continue
        position = len(searches) + 1
        keys: list[str] = []
        numbers: list[int] = []
        for raw in activity.sources:
            source = registry.lookup(raw)
            if source is None or source.key in keys:
                continue
            keys.append(source.key)
            number = source.number or cited_by_key.get(_match_key(source.href or source.url))
            if number is not None and number not in numbers:
                numbers.append(number)
                surfaced.setdefault(number, []).append(position)
        searches.append(LedgerSearch(
            position, activity.activity_id, name, _queries(activity.input), state,
            len(keys) if state == "completed" and activity.reported else None,
            tuple(sorted(numbers)),
        ))

    counts = dict.fromkeys(INTEGRITY_KINDS, 0)
    unchecked = 0
    per_number: dict[int, list[int]] = {}  # number -> [citations, repaired, dropped]
    for event in events:
        if event.get("kind") != "message" or not isinstance(event.get("attributions"), list):
            continue
        for attribution in event["attributions"]:
            if not isinstance(attribution, dict):
                continue
            integrity = attribution.get("integrity")
            if integrity in counts:
                counts[integrity] += 1
            else:
                unchecked += 1
            number = registry.number_for(attribution.get("source"))
            if number is None or integrity == "no_source":
                continue
            tally = per_number.setdefault(number, [0, 0, 0])
            tally[0] += 1
            tally[1] += integrity == "repaired"
            tally[2] += integrity == "dropped"

    cited = tuple(
        LedgerCited(
            source.number, source.label, source.url, source.href,
            tuple(surfaced.get(source.number, ())), source.number in opened_numbers,
            *per_number.get(source.number, [0, 0, 0]),
        )
        for source in registry.cited if source.number is not None
    )
    integrity = Integrity(
        counts["exact"], counts["repaired"], counts["dropped"], counts["no_source"], unchecked,
        tuple(s.position for s in searches if s.no_results),
    )
    return Ledger(tuple(searches), tuple(opened), cited, integrity)
