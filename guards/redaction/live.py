"""Redaction of a block's text while it streams (what a viewer sees before the stored text is
redacted whole)."""

from __future__ import annotations

import re

from guards.redaction.rules import HEADERS, may_hold_secret, redact_with_map

# (multi-line: searched from the start of the current line, which ``^`` must match)
_HEADER_LINE = re.compile(rf'(?im)^[ \t-]*(?:{HEADERS})[ \t]*:|"(?:{HEADERS})"\s*:')
LIVE_CONTEXT = 8192  # characters of the current line kept as context (a secret is shorter)


class LiveText:
    """One streaming block's text as it may be shown while it streams: a credential split across
    deltas is never shown in pieces (the stored text is redacted whole anyway; this is what a
    viewer sees meanwhile). ``take(text)`` returns what may go out now, redacted in the context
    of the line it is on. What could still be a credential's secret part — the last words when
    they hold a credential's trigger ("sk-ant-…", "?key=…", "Bearer …"), the rest of a header
    line — waits for what follows, or for ``take(..., final=True)`` at the block's end. A
    trigger's own literal may go out first (it is no secret); what follows it never does
    unredacted."""

    def __init__(self) -> None:
        self._line = ""  # what went out of the current line (its raw text, at most the context)
        self._held = ""

    @property
    def holding(self) -> bool:
        return bool(self._held)

    def take(self, text: str, final: bool = False) -> str:
        held = self._held + text
        cut = len(held) if final else self._cut(held)
        out, self._held = held[:cut], held[cut:]
        if not out:
            return ""
        segment = self._line + out
        shown = out
        if may_hold_secret(segment):
            redacted, remap = redact_with_map(segment)
            shown = redacted[remap(len(self._line), False):]
        newline = max(segment.rfind("\n"), segment.rfind("\r"))
        self._line = segment[newline + 1:][-LIVE_CONTEXT:]
        return shown

    def _cut(self, held: str) -> int:
        """How much of ``held`` may go out now."""
        line = self._line + held
        offset = len(self._line)  # where ``held`` starts in ``line``
        newline = max(line.rfind("\n"), line.rfind("\r"))
        if _HEADER_LINE.search(line, newline + 1):  # its value runs to the end of the line
            return max(newline + 1 - offset, 0)
        # The last two words and the whitespace after them ("Bearer" and its token), looked at
        # from the end and no further back than a secret can reach.
        floor = max(newline + 1, len(line) - LIVE_CONTEXT)
        start = len(line)
        for want_space in (True, False, True, False):
            while start > floor and line[start - 1].isspace() == want_space:
                start -= 1
        if start < len(line) and may_hold_secret(line[start:]):
            return max(start - offset, 0)
        return len(held)
