"""The model's Markdown as the export keeps it: raw HTML and images made inert, and where a
footnote reference may go.

A Markdown viewer renders raw HTML (``<img onerror>``, ``<iframe>``) and loads images; the page
does neither (raw HTML off, images off). ``neutralise`` puts a backslash before each ``<``
that starts raw HTML and each ``!`` that starts an image, as a viewer with raw HTML on (GFM)
would parse them, so they show as the literal text the page shows; nothing else changes.
Positions come from the parse itself (the inline rules record where they matched, block
contents are aligned back to the source as for citations), and the parse is repeated until
nothing is left (escaping an HTML block's first tag exposes the tags inside it); if that does
not settle, the whole message becomes a code block.

Links whose target the page would not link (``urls.is_allowed_url``: javascript:, data:,
relative) get the same backslash before their ``[`` or ``<``, so they stay text too.

``Layout`` says where a footnote reference can go so it lands where the page puts the marker:
right after the cited text, moved past a link, code span, formula or autolink it would
otherwise fall into, out of block syntax, and after a code or math block on its own line.
"""

from __future__ import annotations

import threading
from bisect import bisect_left, bisect_right
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from markdown_it import MarkdownIt
from markdown_it.rules_block import StateBlock
from markdown_it.rules_core import StateCore
from markdown_it.rules_inline import StateInline

from ..markdown import content_segments, line_starts, math_plugin
from ..markdown.parser import QuickLinkify
from ..markdown.prepare import snap
from ..urls import is_allowed_url

_INDEX = "export_inline_index"  # env: the inline token being parsed
_FOUND = "export_found"  # env: what the recording rules saw
# Inline constructs a footnote reference must not be put inside.
_ATOMIC = ("backticks", "link", "image", "autolink", "html_inline", "linkify", "math_inline",
           "math_inline_bracket", "entity")  # fmt: skip
# Blocks whose content is not inline Markdown: a reference goes on its own line after them.
_OPAQUE = frozenset({"fence", "code_block", "math_block", "amsmath", "html_block"})
MAX_PASSES = 8


@dataclass
class _Found:
    html_blocks: list[int] = field(default_factory=list)  # source positions of "<"
    # (token index, start, end, rule, href of a link) in content offsets
    inline: list[tuple[int, int, int, str, str | None]] = field(default_factory=list)


def _recording(name: str, rule: Callable[[StateInline, bool], bool]) -> Any:
    def wrapped(state: StateInline, silent: bool) -> bool:
        start, count = state.pos, len(state.tokens)
        ok = rule(state, silent)
        if ok and not silent:
            href = next((t.attrs.get("href") for t in state.tokens[count:]
                         if t.type == "link_open"), None)  # fmt: skip
            found: _Found = state.env[_FOUND]
            found.inline.append((state.env[_INDEX], start, state.pos, name,
                                 href if isinstance(href, str) else None))
        return ok

    return wrapped


def _inline_with_index(state: StateCore) -> None:
    """markdown-it's core ``inline`` rule, noting which token each inline parse is for."""
    for index, token in enumerate(state.tokens):
        if token.type == "inline":
            if token.children is None:
                token.children = []
            state.env[_INDEX] = index
            state.md.inline.parse(token.content, state.md, state.env, token.children)


def _html_block(rule: Callable[[StateBlock, int, int, bool], bool]) -> Any:
    def wrapped(state: StateBlock, start: int, end: int, silent: bool) -> bool:
        ok = rule(state, start, end, silent)
        if ok and not silent:
            state.env[_FOUND].html_blocks.append(state.bMarks[start] + state.tShift[start])
        return ok

    return wrapped


def _viewer_parser(math: bool) -> MarkdownIt:
    """Markdown as a viewer reads it: CommonMark with raw HTML and images, GFM tables,
    strikethrough and bare links; with ``math``, the math delimiters the page knows too (for
    placing references only: a viewer without math reads HTML inside ``$…$``)."""
    md = MarkdownIt("commonmark", {"html": True, "linkify": True})
    md.enable(["table", "strikethrough", "linkify"])
    md.linkify = QuickLinkify(md.linkify)  # the page's pre-check: same links, found sooner
    # Every link a viewer might make is seen (and judged by this project's policy below).
    md.validateLink = lambda url: True  # type: ignore[method-assign]
    md.normalizeLink = lambda url: url  # type: ignore[method-assign]
    if math:
        math_plugin(md)
    md.core.ruler.at("inline", _inline_with_index)
    md.block.ruler.at("html_block", _html_block(_rule(md, "html_block")),
                      {"alt": ["paragraph", "reference", "blockquote"]})
    for name in _ATOMIC:
        if math or not name.startswith("math"):
            md.inline.ruler.at(name, _recording(name, _inline_rule(md, name)))
    return md


def _rule(md: MarkdownIt, name: str) -> Any:
    return md.block.ruler.__rules__[md.block.ruler.__find__(name)].fn


def _inline_rule(md: MarkdownIt, name: str) -> Any:
    return md.inline.ruler.__rules__[md.inline.ruler.__find__(name)].fn


_local = threading.local()


def _parser(math: bool) -> MarkdownIt:
    name = "math" if math else "plain"
    md = getattr(_local, name, None)
    if md is None:
        md = _viewer_parser(math)
        setattr(_local, name, md)
    return md


@dataclass
class Layout:
    """Where a footnote reference may go in one text (``place``)."""

    text: str
    segments: list[tuple[int, int]]  # inline content spans in the source, sorted
    atomic: list[tuple[int, int]]  # inline constructs (source spans), sorted by start
    opaque: list[tuple[int, int]]  # code/math blocks: (start, insertion point after), sorted
    exact: bool = True  # False: positions unknown, references go at the end

    def place(self, end: int) -> tuple[int, bool]:
        """``(offset, on_its_own_line)`` for a reference to a span ending at ``end``."""
        text = self.text
        if not self.exact:
            return len(text.rstrip()), False
        p = snap(text, max(0, min(end, len(text))))
        while p > 0 and text[p - 1] in " \t\n":
            p -= 1
        i = bisect_right([s for s, _ in self.opaque], max(p - 1, 0)) - 1
        if i >= 0 and self.opaque[i][0] < p <= self.opaque[i][1]:
            return self.opaque[i][1], True
        moved = True
        while moved:  # out of every construct it falls inside (they may nest)
            moved = False
            for start, stop in self.atomic:
                if start >= p:
                    break
                if start < p < stop:
                    p, moved = stop, True
        j = bisect_right([s for s, _ in self.segments], p) - 1
        if j < 0:
            return (self.segments[0][0] if self.segments else 0), False
        start, stop = self.segments[j]
        if p > stop:
            # In block syntax between contents: after the text before it.
            p = stop
        return p, False


def _analyse(text: str, math: bool = False) -> tuple[Layout, list[int]]:
    """The layout of ``text`` and the positions a backslash must go before."""
    md = _parser(math)
    found = _Found()
    env: dict[str, Any] = {_FOUND: found}
    tokens = md.parse(text, env)
    segments = content_segments(tokens, text)
    starts = line_starts(text)
    exact = True

    def source(index: int, offset: int) -> int | None:
        segs = segments.get(index)
        if not segs:
            return None
        k = bisect_right([c for c, _, _ in segs], offset) - 1
        if k < 0:
            return None
        cpos, spos, length = segs[k]
        if offset > cpos + length:
            return None
        return spos + (offset - cpos)

    escapes: list[int] = list(found.html_blocks)
    atomic: list[tuple[int, int]] = []
    for index, start, stop, name, href in found.inline:
        a = source(index, start)
        b = source(index, stop - 1) if stop > start else a
        if a is None or b is None:
            exact = False
            if name in ("html_inline", "image"):
                return Layout(text, [], [], [], exact=False), [-1]  # unknown: give up
            continue
        atomic.append((a, b + 1))
        if name == "html_inline":
            if text[a] != "<":
                return Layout(text, [], [], [], exact=False), [-1]
            escapes.append(a)
        elif name == "image":
            if text[a] != "!":
                return Layout(text, [], [], [], exact=False), [-1]
            escapes.append(a)
        elif name in ("link", "autolink") and href is not None and not is_allowed_url(href):
            # A link the page shows as text (javascript:, data:, relative): text here too.
            if text[a] not in "[<":
                return Layout(text, [], [], [], exact=False), [-1]
            escapes.append(a)
    opaque = []
    nlines = len(starts)
    for token in tokens:
        if token.type in _OPAQUE and token.map:
            first, last = token.map
            begin = starts[min(first, nlines - 1)]
            stop = (starts[last] - 1) if last < nlines else len(text)
            while stop > begin and text[stop - 1] in " \t\n":
                stop -= 1
            opaque.append((begin, stop))
    spans = sorted((spos, spos + length) for segs in segments.values() for _, spos, length in segs
                   if length)  # fmt: skip
    layout = Layout(text, spans, sorted(atomic), sorted(opaque), exact=exact)
    return layout, sorted(set(escapes))


def neutralise(text: str, ends: list[int]) -> tuple[str, list[int], Layout | None]:
    """``text`` with raw HTML and images escaped, ``ends`` (offsets into ``text``) as offsets
    into the result, and its layout; layout None: it did not settle (show it as code)."""
    current, mapped = text, list(ends)
    for _ in range(MAX_PASSES):
        layout, escapes = _analyse(current)
        if escapes == [-1]:
            return text, list(ends), None
        if not escapes:
            if "$" in current or "\\" in current:  # math the page may read: where it is
                layout, _ = _analyse(current, math=True)
            return current, mapped, layout
        for at in reversed(escapes):
            current = current[:at] + "\\" + current[at:]
        # A reference ending right before an escaped "<" stays before its backslash.
        mapped = [end + bisect_left(escapes, end) for end in mapped]
    return text, list(ends), None
