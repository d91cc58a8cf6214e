"""The sentinel code points that mark range boundaries inside the text being parsed.

A sentinel is one code point of the Supplementary Private Use Area-A; its offset from
``SENTINEL_BASE`` is the id of a boundary slot (see ``cites.Plan``). The model's own code points
from that plane never reach the parser (``prepare.prepare_text`` removes them), so every
sentinel the parser sees is ours.
"""

from __future__ import annotations

import re

SENTINEL_BASE = 0xF0000
SENTINEL_COUNT = 0xFFFE  # U+F0000..U+FFFFD, Supplementary Private Use Area-A
_LO = chr(SENTINEL_BASE)
_HI = chr(SENTINEL_BASE + SENTINEL_COUNT - 1)
SENTINEL = re.compile(f"[{_LO}-{_HI}]")
# Splits text into pieces and single sentinels (the sentinels kept as their own pieces).
SENTINEL_SPLIT = re.compile(f"([{_LO}-{_HI}])")


def is_sentinel(ch: str) -> bool:
    return _LO <= ch <= _HI


def strip_sentinels(value: str) -> tuple[str, list[int]]:
    """The value without sentinels, and the sentinel ids it held."""
    found = SENTINEL.findall(value)
    if not found:
        return value, []
    return SENTINEL.sub("", value), [ord(ch) - SENTINEL_BASE for ch in found]
