"""Attribution ranges: convert provider offsets to code points and check them against the text.

A range is stored only if it addresses the event's final text exactly; otherwise it is repaired
(by searching for the provider's own copy of the cited segment) or dropped. Never stale.
"""

from __future__ import annotations

import re

from streams.parts import RangeUnit


class Offsets:
    """Code-point offsets into one text from offsets in another unit, with the text encoded
    once (a block's citations share one ``Offsets``)."""

    __slots__ = ("_continuations", "_encoded", "_text")

    _ENCODINGS = {"utf8": ("utf-8", 1), "utf16": ("utf-16-le", 2)}

    def __init__(self, text: str) -> None:
        self._text = text
        self._encoded: dict[str, bytes] = {}
        self._continuations = b""

    def codepoint(self, offset: int, unit: RangeUnit) -> int | None:
        """The code-point index ``offset`` ``unit``s into the text; None where that splits a
        character or lies beyond the end."""
        if unit == "codepoint":
            return offset
        encoding, width = self._ENCODINGS[unit]
        if self._text.isascii():  # one byte (UTF-8) or one code unit (UTF-16) per character
            return offset if offset <= len(self._text) else None
        encoded = self._encoded.get(encoding)
        if encoded is None:
            encoded = self._encoded[encoding] = self._text.encode(encoding, "surrogatepass")
        if width == 1:
            # UTF-8: a character is a lead byte and its continuation bytes (0x80-0xBF); the
            # code points before a byte offset are the bytes before it less the continuations.
            if offset > len(encoded):
                return None
            if offset < len(encoded) and 0x80 <= encoded[offset] <= 0xBF:
                return None  # inside a character
            if not self._continuations:
                self._continuations = encoded.translate(_CONTINUATIONS)
            return offset - self._continuations.count(1, 0, offset)
        byte_offset = offset * width
        if byte_offset > len(encoded):
            return None
        try:
            return len(encoded[:byte_offset].decode(encoding, "surrogatepass"))
        except UnicodeDecodeError:
            return None


# 1 for a UTF-8 continuation byte, 0 for any other.
_CONTINUATIONS = bytes(1 if 0x80 <= b <= 0xBF else 0 for b in range(256))


# What ingest did with a provider's range (``Attribution.integrity``): it matched the text as
# given, was found again by searching for the provider's own copy of the cited segment, or could
# not be placed (the attribution is kept, addressing the whole event).
EXACT, REPAIRED, DROPPED = "exact", "repaired", "dropped"
Placement = tuple[tuple[int, int] | None, str]


def place(
    text: str,
    start: int | None,
    end: int | None,
    unit: RangeUnit = "codepoint",
    quote: str | None = None,
    offsets: Offsets | None = None,
) -> Placement:
    """A verified code-point range into ``text``, and how it was found: ``(span, EXACT |
    REPAIRED | DROPPED)``, span None when no usable range; ``(None, "")`` when the provider gave
    no range at all (the whole event is cited; nothing to check). ``offsets`` converts units
    for ``text`` (pass one to share it across a block's ranges)."""
    if start is None and end is None:
        return None, ""
    start = 0 if start is None else start  # proto3 JSON drops zero-valued fields
    if end is None or start < 0 or end <= start:
        return _repaired(_search(text, quote, 0))
    offsets = offsets or Offsets(text)
    cp_start = offsets.codepoint(start, unit)
    cp_end = offsets.codepoint(end, unit)
    if (
        cp_start is not None
        and cp_end is not None
        and 0 <= cp_start < cp_end <= len(text)
        and (quote is None or text[cp_start:cp_end] == quote)
    ):
        return (cp_start, cp_end), EXACT
    hint = cp_start if cp_start is not None else min(start, len(text))
    return _repaired(_search(text, quote, hint))


def _repaired(span: tuple[int, int] | None) -> Placement:
    return (span, REPAIRED) if span is not None else (None, DROPPED)


def _search(text: str, quote: str | None, hint: int) -> tuple[int, int] | None:
    """Repair: the occurrence of ``quote`` nearest to ``hint``."""
    if not quote:
        return None
    best: int | None = None
    position = text.find(quote)
    while position != -1:
        if best is None or abs(position - hint) < abs(best - hint):
            best = position
        position = text.find(quote, position + 1)
    if best is None:
        return None
    return best, best + len(quote)


# A sentence ends at a full stop (or ! ? and their CJK forms) before a space, or a line break.
# Not at an abbreviation: a stop followed by a lower-case word ("U.S. data"), or after an
# initial or a short title ("J. Smith", "St. Louis", "Dr. Who").
_SENTENCE_END = re.compile(
    r"(?<![A-Za-z]\.[A-Za-z])(?<!\b[A-Z])(?<!\b(?:Mr|Ms|Dr|St|Jr|Sr|Mt|vs))(?<!\bMrs)"
    r"[.!?。！？](?=\s)(?!\s+[a-z])|\n"
)


def sentence_before(text: str, position: int) -> tuple[int, int] | None:
    """The sentence (or line) that ends at ``position``, trailing space excluded: what a
    citation marker placed there cites when the provider (or the export) says no more."""
    end = position
    while end > 0 and text[end - 1].isspace():
        end -= 1
    if end == 0:
        return None
    # The sentence's own full stop may sit just before the marker: look before it.
    search_to = end - 1 if text[end - 1] in ".!?。！？" else end
    start = 0
    for match in _SENTENCE_END.finditer(text, 0, search_to):
        start = match.end()
    while start < end and text[start].isspace():
        start += 1
    # A list item or heading: the markup is not part of the sentence.
    markup = _LEAD_MARKUP.match(text, start, end)
    if markup and markup.end() < end:
        start = markup.end()
    return (start, end) if start < end else None


_LEAD_MARKUP = re.compile(r"(?:[-*+]|\d+[.)]|#{1,6})\s+|\*\*")  # a list item's or heading's
