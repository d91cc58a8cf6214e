"""Perplexity's ``[n]`` citation markers in Chat Completions text (``chat``): where each one
was, taken out of text that arrives in pieces."""

from __future__ import annotations


class Markers:
    """Perplexity's ``[n]`` citation markers, taken out of text that arrives in pieces.

    ``feed`` returns the text without the markers; ``found`` holds ``(position, n)``: where a
    marker was, in the text returned so far. A marker may be split across pieces, so ``[`` and
    the digits after it are held until the marker closes (or proves not to be one); a complete
    marker is held one more character, since ``[1](`` is a Markdown link, not a marker.
    """

    __slots__ = ("found", "held", "length", "limit")

    def __init__(self, limit: int) -> None:
        self.limit = limit  # the highest n that names a citation
        self.found: list[tuple[int, int]] = []
        self.held = ""
        self.length = 0  # code points returned so far

    def feed(self, text: str) -> str:
        if not self.held and "[" not in text:
            self.length += len(text)
            return text
        out: list[str] = []
        for ch in text:
            out.append(self._char(ch))
        kept = "".join(out)
        return kept

    def close(self) -> str:
        held, self.held = self.held, ""
        if self._complete(held):
            self._record(held)
            return ""
        self.length += len(held)
        return held

    def _complete(self, held: str) -> bool:
        return len(held) > 2 and held.endswith("]") and 1 <= int(held[1:-1]) <= self.limit

    def _record(self, held: str) -> None:
        self.found.append((self.length, int(held[1:-1])))

    def _char(self, ch: str) -> str:
        held = self.held
        if not held:
            if ch == "[":
                self.held = ch
                return ""
            self.length += 1
            return ch
        if held.endswith("]"):  # a whole marker, unless a link target follows
            self.held = ""
            if ch == "(" or not self._complete(held):
                self.length += len(held) + 1
                return held + ch
            self._record(held)
            return self._char(ch)
        if ch.isdigit() and len(held) < 5:
            self.held = held + ch
            return ""
        if ch == "]" and len(held) > 1:
            self.held = held + ch
            return ""
        self.held = ""
        self.length += len(held)
        return held + self._char(ch)
