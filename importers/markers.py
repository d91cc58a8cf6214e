"""Citation markers in chat-export text: removed from the stored text, ranges remapped.

Chat apps write their citation markers into the message text (ChatGPT's ``【6†source】`` in 2023-24,
private-use characters such as U+E200 ``cite`` U+E202 ``turn0search18`` U+E201 in 2025) and give
the citations' offsets over that text. The stored text has the markers removed, so every offset
is mapped through the removal (``Removal.position``), never left pointing into the old text.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterable

# What a marker cites when the export says no more: the sentence it follows (shared with the
# adapters, whose providers write markers too).
from streams.ranges import sentence_before

__all__ = ["PRIVATE_USE", "TETHER_MARKER", "Removal", "marked_sentence_before", "nearest",
           "sentence_before"]

# ChatGPT's browsing marker: 【6†source】, 【3:0†source】, 【12†title†domain】.
TETHER_MARKER = re.compile(r"【\d+(?::\d+)?†[^【】]*】")
# Private-use characters of 2025 exports: U+E200 .. U+E201 wrap a reference ("cite", ids), U+E203
# and U+E204 open and close a cited sentence, U+E206 ends a paragraph of them. The block is
# U+E200-U+E2FF in every file seen; nothing else in chat text uses it.
PRIVATE_USE = re.compile(r"\ue200[^\ue200\ue201]{0,200}\ue201|[\ue200-\ue2ff]")
SENTENCE_OPEN, SENTENCE_CLOSE = "\ue203", "\ue204"


class Removal:
    """Spans removed from a text, and where an old position lands in the new text."""

    def __init__(self, text: str, spans: Iterable[tuple[int, int]]) -> None:
        merged: list[list[int]] = []
        for start, end in sorted((s, e) for s, e in spans if 0 <= s < e <= len(text)):
            if merged and start <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], end)
            else:
                merged.append([start, end])
        self.spans = [(s, e) for s, e in merged]
        self._starts = [s for s, _ in self.spans]
        # removed[i]: code points removed before spans[i] ends
        self._removed: list[int] = []
        total = 0
        for start, end in self.spans:
            total += end - start
            self._removed.append(total)
        pieces, last = [], 0
        for start, end in self.spans:
            pieces.append(text[last:start])
            last = end
        pieces.append(text[last:])
        self.text = "".join(pieces)

    def position(self, old: int) -> int:
        """Where ``old`` (a position in the original text) is in the new one; a position inside
        a removed span lands where the span was."""
        index = bisect.bisect_right(self._starts, old) - 1
        if index < 0:
            return old
        start, end = self.spans[index]
        before = self._removed[index - 1] if index else 0
        if old < end:
            return start - before
        return old - self._removed[index]


def nearest(text: str, needle: str, hint: int) -> int | None:
    """The start of the occurrence of ``needle`` in ``text`` nearest to ``hint``."""
    if not needle:
        return None
    best = None
    position = text.find(needle)
    while position != -1:
        if best is None or abs(position - hint) < abs(best - hint):
            best = position
        position = text.find(needle, position + 1)
    return best


def marked_sentence_before(text: str, position: int) -> tuple[int, int] | None:
    """The U+E203 ... U+E204 sentence that ends right before ``position`` (whitespace between
    allowed), as a span of the original text without the two marks; None if there is none."""
    end = position
    while end > 0 and text[end - 1].isspace():
        end -= 1
    if end == 0 or text[end - 1] != SENTENCE_CLOSE:
        return None
    opening = text.rfind(SENTENCE_OPEN, 0, end - 1)
    if opening == -1 or text.rfind(SENTENCE_CLOSE, opening, end - 1) != -1:
        return None
    return (opening + 1, end - 1) if opening + 1 < end - 1 else None
