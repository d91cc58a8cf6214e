"""Citations in, markers out: what the renderer is told (``Cite``), the HTML it adds for them
(span tags and markers), and the boundary plan that turns sentinels back into both.

``Plan`` is the per-render state ``cite_plugin`` reads from ``env["cite_plan"]``
(``CITE_PLAN``): the range boundaries as sorted events, which sentinel slot holds which
events, and which sources are open at the current point of the token stream.
"""

from __future__ import annotations

import html
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache

from .prepare import snap

CITE_PLAN = "cite_plan"  # the env key of the render's Plan


@dataclass(frozen=True, slots=True)
class Cite:
    """One attribution as the renderer needs it. ``start``/``end`` None: the whole text."""

    number: int
    start: int | None = None
    end: int | None = None
    incomplete: bool = False
    title: str = ""
    # Ingest placed this range by the provider's quoted segment, not its offsets.
    repaired: bool = False


# U+2060 WORD JOINER: no line break between a marker and the word it follows (nor between two
# markers), so "[2][3]" never wraps alone onto the next line.
WORD_JOINER = "\u2060"
REPAIRED_NOTE = "placed by its quoted text: the provider's offsets did not match"


@lru_cache(maxsize=4096)
def marker_html(
    number: int, title: str, anchor_prefix: str, incomplete: bool = False,
    repaired: bool = False,
) -> str:
    """The marker after a cited span: a focusable link to the source list entry."""
    classes = "cite-marker cite-incomplete" if incomplete else "cite-marker"
    label = f"Source {number}: {title}" if title else f"Source {number}"
    if repaired:
        classes += " cite-repaired"
        label += f" ({REPAIRED_NOTE})"
    label = html.escape(label, quote=True)
    anchor = html.escape(anchor_prefix, quote=True)
    return (
        f'{WORD_JOINER}<a class="{classes}" href="#{anchor}{number}" data-source="{number}" '
        f'aria-label="{label}">[{number}]</a>'
    )


@lru_cache(maxsize=1024)
def span_open(numbers: frozenset[int]) -> str:
    """The opening tag of a span cited by ``numbers``."""
    return f'<span class="cite" data-sources="{" ".join(map(str, sorted(numbers)))}">'


# Event kinds, in the order events at one position apply: closes first, opens last.
CLOSE, MARK, OPEN = 0, 1, 2


@dataclass
class Plan:
    cites: list[Cite]
    events: list[tuple[int, int, int]]  # (position, kind, cite index), sorted
    anchor_prefix: str
    slots: list[list[tuple[int, int]]] = field(default_factory=list)  # sentinel id -> events
    token_sentinels: dict[int, list[int]] = field(default_factory=dict)  # token index -> ids
    trailer: list[int] = field(default_factory=list)  # ids when the text has no content
    active: Counter[int] = field(default_factory=Counter)
    key: frozenset[int] = frozenset()
    titles: dict[int, str] = field(default_factory=dict)
    seen: set[int] = field(default_factory=set)

    def apply(self, sid: int) -> list[str]:
        """Run one sentinel's events; return the marker HTML it produces."""
        if sid in self.seen or sid >= len(self.slots):
            return []
        self.seen.add(sid)
        closing: dict[int, bool] = {}
        repaired: set[int] = set()
        for kind, index in self.slots[sid]:
            cite = self.cites[index]
            if kind == OPEN:
                self.active[cite.number] += 1
                continue
            if kind == CLOSE and self.active[cite.number] > 0:
                self.active[cite.number] -= 1
            # A marker is incomplete only if every attribution ending here is.
            closing[cite.number] = closing.get(cite.number, True) and cite.incomplete
            if cite.repaired:
                repaired.add(cite.number)
        self.key = frozenset(n for n, c in self.active.items() if c > 0)
        return [self.marker(n, closing[n], n in repaired) for n in sorted(closing)]

    def marker(self, number: int, incomplete: bool, repaired: bool = False) -> str:
        if not self.titles:
            for cite in self.cites:
                if cite.title and cite.number not in self.titles:
                    self.titles[cite.number] = cite.title
        return marker_html(number, self.titles.get(number, ""), self.anchor_prefix, incomplete,
                           repaired)


def build_events(text: str, cites: Sequence[Cite]) -> list[tuple[int, int, int]]:
    """Each cite's boundaries in the prepared text, snapped, as sorted plan events."""
    length = len(text)
    events = []
    for index, cite in enumerate(cites):
        if cite.start is None or cite.end is None:
            start, end = 0, length
        else:
            start = snap(text, min(max(cite.start, 0), length))
            end = max(start, snap(text, min(max(cite.end, 0), length)))
        if start == end:
            events.append((start, MARK, index))
        else:
            events.append((start, OPEN, index))
            events.append((end, CLOSE, index))
    events.sort()
    return events
