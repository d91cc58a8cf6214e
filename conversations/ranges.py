"""Attribution ranges: convert provider offsets to code points and check them against the text.

A range is stored only if it addresses the event's final text exactly; otherwise it is repaired
(by searching for the provider's own copy of the cited segment) or dropped. Never stale.
"""

from __future__ import annotations

from conversations.parts import RangeUnit


def _to_codepoints(text: str, offset: int, unit: RangeUnit) -> int | None:
    """The code-point index at ``offset`` ``unit``s into ``text``, or None if it splits a char."""
    if unit == "codepoint":
        return offset
    encoding = "utf-8" if unit == "utf8" else "utf-16-le"
    width = 1 if unit == "utf8" else 2
    encoded = text.encode(encoding, "surrogatepass")
    byte_offset = offset * width
    if byte_offset > len(encoded):
        return None
    try:
        return len(encoded[:byte_offset].decode(encoding, "surrogatepass"))
    except UnicodeDecodeError:
        return None


def resolve(
    text: str,
    start: int | None,
    end: int | None,
    unit: RangeUnit = "codepoint",
    quote: str | None = None,
) -> tuple[int, int] | None:
    """Return a verified code-point range into ``text``, or None (no usable range)."""
    if start is None and end is None:
        return None
    start = 0 if start is None else start  # proto3 JSON drops zero-valued fields
    if end is None or start < 0 or end <= start:
        return _search(text, quote, 0)
    cp_start = _to_codepoints(text, start, unit)
    cp_end = _to_codepoints(text, end, unit)
    in_bounds = cp_start is not None and cp_end is not None and 0 <= cp_start < cp_end <= len(text)
    if in_bounds and (quote is None or text[cp_start:cp_end] == quote):
        return cp_start, cp_end
    hint = cp_start if cp_start is not None else min(start, len(text))
    return _search(text, quote, hint)


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
