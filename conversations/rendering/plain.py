"""Markdown as the plain text a title, a list row or a search snippet shows: the words without
the syntax around them (``## Answer``, ``**bold**``, ``[site](url)`` read "Answer", "bold",
"site"). Line-based and linear, for short texts and snippets; never for rendered HTML."""

from __future__ import annotations

import re

_BLOCK = re.compile(r"^[ \t]{0,3}(?:#{1,6}[ \t]+|>[ \t]?|[-*+][ \t]+|\d{1,9}[.)][ \t]+)+")
_FENCE = re.compile(r"^[ \t]{0,3}(?:```|~~~).*$")
_RULE = re.compile(r"^[ \t]{0,3}(?:[-*_][ \t]*){3,}$")
_IMAGE_OR_LINK = re.compile(r"!?\[([^\]\n]*)\]\([^)\n]*\)")
_EMPHASIS = re.compile(r"(\*{1,3}|_{2,3}|~~)(?=\S)(.+?)(?<=\S)\1")
_CODE = re.compile(r"`+([^`\n]+)`+")
_CLOSING_HASHES = re.compile(r"[ \t]+#+[ \t]*$")


def plain_line(line: str) -> str:
    """One line of markdown as plain text."""
    if _FENCE.match(line) or _RULE.match(line):
        return ""
    line = _BLOCK.sub("", line)
    line = _CLOSING_HASHES.sub("", line)
    line = _IMAGE_OR_LINK.sub(r"\1", line)
    line = _CODE.sub(r"\1", line)
    for _ in range(3):  # nested emphasis: ***a*** and **_a_**
        stripped = _EMPHASIS.sub(r"\2", line)
        if stripped == line:
            break
        line = stripped
    return line


def plain_text(text: str) -> str:
    """``text`` (markdown) as plain text, line by line; line breaks are kept."""
    return "\n".join(plain_line(line) for line in text.split("\n"))
