"""A streaming block's text as the live view shows it (DESIGN "Live turns"): split at stable
markdown block boundaries (a blank line outside a code fence); each finished block is rendered
once, on the server, and only the unfinished rest is shown raw. Never the whole message per
delta: that would be quadratic in its length.

``BlockSplitter`` is fed the text as it streams and hands back each block as it finishes
(the live runner renders it into the delta that finished it); ``split_finished`` does the same
for a whole tail at once (a fragment rendered mid-stream), so both agree on every boundary.
"""

from __future__ import annotations

import re

from .markdown import render_markdown

_FENCE = re.compile(r"^ {0,3}(```|~~~)")


class BlockSplitter:
    """Finished markdown blocks out of text that arrives in pieces. Each line is scanned once."""

    def __init__(self) -> None:
        self.pending = ""  # text of the open block
        self._scan = 0  # where the next unscanned line of ``pending`` starts
        self._in_fence = False
        self._has_text = False  # whether ``pending[:_scan]`` holds more than blank lines

    def feed(self, text: str) -> list[str]:
        """The blocks ``text`` finishes, each with the blank line that ended it."""
        self.pending += text
        out: list[str] = []
        pos = self._scan
        while (nl := self.pending.find("\n", pos)) >= 0:
            line = self.pending[pos:nl]
            blank = not line.strip()
            if _FENCE.match(line):
                self._in_fence = not self._in_fence
            elif blank and not self._in_fence and self._has_text:
                out.append(self.pending[:nl + 1])
                self.pending = self.pending[nl + 1:]
                pos, self._has_text = 0, False
                continue
            self._has_text = self._has_text or not blank
            pos = nl + 1
        self._scan = pos
        return out


def split_finished(text: str) -> tuple[list[str], str]:
    """A whole tail's finished blocks and its open rest (as ``BlockSplitter`` splits it)."""
    splitter = BlockSplitter()
    return splitter.feed(text), splitter.pending


def render_block(block: str) -> str:
    """A finished block as sanitized HTML (citations come with the committed event)."""
    return render_markdown(block)
