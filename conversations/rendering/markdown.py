"""Markdown to sanitized HTML, with attributed spans placed by code-point range.

How spans are placed without breaking markdown:

1. The model's text is cleaned first: every code point of the sentinel plane (U+F0000..) is
   removed (ranges are remapped), and newlines/NUL are normalised the way markdown-it would.
2. markdown-it-py parses the *block* structure of the clean text. Only then is each range
   boundary turned into a sentinel code point, inserted into the content of the block token it
   falls in (paragraph/heading/cell inline content, fence or code block text). Block syntax
   never sees a sentinel, so lists, fences, tables and headings parse exactly as without
   citations. A boundary inside block syntax (a ``> `` or ``- `` prefix, a blank line) moves to
   the nearest content.
3. Inline parsing runs with sentinels in place. Boundaries are first nudged out of spots where
   a foreign character would change the parse (inside ``**``/backtick runs, entities, after a
   backslash or ``<``, between ``]`` and ``(``, inside trailing spaces of a hard break), and
   emphasis flanking looks through sentinels. Sentinels in link targets are stripped before the
   URL is normalised or validated; such a boundary takes effect right after the link.
4. The inline token stream is rewritten as a small tree: text is split at sentinels, each
   sentinel opens/closes sources, and maximal runs of siblings cited by the same set of sources
   are wrapped in ``<span class="cite" data-sources="1 3">``. Spans therefore nest properly by
   construction; a span crossing blocks is closed at each block end and reopened in the next.
   Markers (``<a class="cite-marker">``) follow the cited text; one that would land inside a
   link or code span is moved after it, so a link the model wrote is never nested in another.
5. The HTML goes through the one sanitizer (``sanitize.clean_html``).

No regular expression ever runs over rendered HTML. Input longer than ``MAX_MARKDOWN_CHARS`` is
not parsed at all (markdown-it-py has inputs that cost ~50 us per character): it is shown
escaped in a ``<pre>``, which bounds render time for any input.
"""

from __future__ import annotations

import html
import re
import threading
from bisect import bisect_left, bisect_right
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from markdown_it import MarkdownIt
from markdown_it.common.utils import (
    escapeHtml,
    isMdAsciiPunct,
    isPunctChar,
    isWhiteSpace,
    normalizeReference,
    unescapeAll,
)
from markdown_it.parser_inline import ParserInline
from markdown_it.renderer import RendererHTML
from markdown_it.rules_core import StateCore
from markdown_it.rules_inline.backticks import backtick
from markdown_it.rules_inline.state_inline import Scanned, StateInline
from markdown_it.token import Token

from .sanitize import clean_html, is_allowed_url

MAX_MARKDOWN_CHARS = 100_000  # per event; above it the text is shown escaped, not parsed
MAX_PLAIN_CHARS = 1_000_000  # shown at most, on the escaped path
MAX_ATTRIBUTIONS = 10_000  # per event
# Emphasis can nest thousands deep ("*a **a *a ..."), and html5lib (inside bleach) costs
# O(depth) per element: deeper inline markup is shown as its literal delimiters.
MAX_INLINE_DEPTH = 20

_SENTINEL_BASE = 0xF0000
_SENTINEL_COUNT = 0xFFFE  # U+F0000..U+FFFFD, Supplementary Private Use Area-A
_SENTINEL_LO = chr(_SENTINEL_BASE)
_SENTINEL_HI = chr(_SENTINEL_BASE + _SENTINEL_COUNT - 1)
_PLANE_15 = re.compile("[\U000f0000-\U000fffff]")
_SENTINEL = re.compile(f"[{_SENTINEL_LO}-{_SENTINEL_HI}]")
_SENTINEL_SPLIT = re.compile(f"([{_SENTINEL_LO}-{_SENTINEL_HI}])")
_ENTITY = re.compile(r"&(?:#[0-9]{1,7}|#[xX][0-9a-fA-F]{1,6}|[A-Za-z][A-Za-z0-9]{1,31});")
_ASCII_PUNCT = frozenset("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")
_SCHEME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+-.")


def _is_sentinel(ch: str) -> bool:
    return _SENTINEL_LO <= ch <= _SENTINEL_HI


def _strip_sentinels(value: str) -> tuple[str, list[int]]:
    """The value without sentinels, and the sentinel ids it held."""
    found = _SENTINEL.findall(value)
    if not found:
        return value, []
    return _SENTINEL.sub("", value), [ord(ch) - _SENTINEL_BASE for ch in found]


# --- citations in, markers out ----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Cite:
    """One attribution as the renderer needs it. ``start``/``end`` None: the whole text."""

    number: int
    start: int | None = None
    end: int | None = None
    incomplete: bool = False
    title: str = ""


@lru_cache(maxsize=4096)
def marker_html(number: int, title: str, anchor_prefix: str, incomplete: bool = False) -> str:
    """The marker after a cited span: a focusable link to the source list entry."""
    classes = "cite-marker cite-incomplete" if incomplete else "cite-marker"
    label = html.escape(f"Source {number}: {title}" if title else f"Source {number}", quote=True)
    anchor = html.escape(anchor_prefix, quote=True)
    return (
        f'<a class="{classes}" href="#{anchor}{number}" data-source="{number}" '
        f'aria-label="{label}">[{number}]</a>'
    )


@lru_cache(maxsize=1024)
def _span_open(numbers: frozenset[int]) -> str:
    return f'<span class="cite" data-sources="{" ".join(map(str, sorted(numbers)))}">'


# --- text preparation ---------------------------------------------------------------------------


def prepare_text(text: str) -> tuple[str, list[int]]:
    """Text as the parser will see it, and the removed original indices (sorted).

    Sentinel-plane code points are dropped (the model's own could forge boundaries), CRLF/CR
    become LF and NUL becomes U+FFFD (what markdown-it's normalize step would do, done here so
    the offsets stay known).
    """
    removed: list[int] = []
    if "\r" in text or _PLANE_15.search(text):
        out = []
        length = len(text)
        for i, ch in enumerate(text):
            if _is_plane_15(ch) or (ch == "\r" and i + 1 < length and text[i + 1] == "\n"):
                removed.append(i)
            elif ch == "\r":
                out.append("\n")
            else:
                out.append(ch)
        text = "".join(out)
    if "\x00" in text:
        text = text.replace("\x00", "\ufffd")
    return text, removed


def _is_plane_15(ch: str) -> bool:
    return "\U000f0000" <= ch <= "\U000fffff"


def remap(index: int, removed: list[int]) -> int:
    """An original offset as an offset into the prepared text."""
    return index - bisect_left(removed, index) if removed else index


def _snap(text: str, p: int) -> int:
    """Move a boundary out of places where an extra character would change the inline parse.

    Each move only crosses markdown syntax or whitespace, never visible text of its own.
    """
    n = len(text)
    for _ in range(4):
        q = p
        # Inside a delimiter run (** __ ~~ ``): go to its start.
        while 0 < q < n and text[q - 1] == text[q] and text[q] in "*_~`":
            q -= 1
        # In the spaces before a line end (a hard break needs them next to the newline).
        r = q
        while r < n and text[r] in " \t":
            r += 1
        if r == n or text[r] == "\n":
            while q > 0 and text[q - 1] in " \t":
                q -= 1
        elif r > q:
            # In the indentation of a line with text: markdown drops it only if nothing
            # (such as a sentinel) comes first, so go to the first character of the line.
            b = q
            while b > 0 and text[b - 1] in " \t":
                b -= 1
            if b == 0 or text[b - 1] == "\n":
                q = r
        # Right after an escaping backslash.
        if 0 < q < n and text[q - 1] == "\\" and text[q] in _ASCII_PUNCT:
            run = 0
            while q - run - 1 >= 0 and text[q - run - 1] == "\\":
                run += 1
            if run % 2:
                q -= 1
        # Inside an entity reference.
        amp = text.rfind("&", max(0, q - 40), q)
        if amp >= 0:
            match = _ENTITY.match(text, amp)
            if match and amp < q < match.end():
                q = amp
        # Inside a URL scheme or "www." ("htt|ps://", "<htt|ps:"): autolinks and linkify need
        # it whole. Later in the URL a sentinel is harmless (it is stripped from the href).
        start = q
        while start > 0 and text[start - 1] in _SCHEME_CHARS:
            start -= 1
        end = q
        while end < n and text[end] in _SCHEME_CHARS:
            end += 1
        in_www = text[start : start + 4].lower() == "www." and q <= start + 4
        in_scheme = (
            end < n
            and text[end] == ":"
            and (text.startswith("//", end + 1) or (start > 0 and text[start - 1] == "<"))
        )
        if start < q and (in_www or in_scheme):
            q = start
        # Right after "<" (an autolink must start with its scheme), or between "]" and "(".
        if q > 0 and text[q - 1] == "<":
            q -= 1
        if 0 < q < n and text[q - 1] == "]" and text[q] in "([":
            q -= 1
        if q == p:
            return p
        p = q
    return p


# --- the parser -------------------------------------------------------------------------------


class _SentinelTransparentState(StateInline):
    def scanDelims(self, start: int, canSplitWord: bool) -> Scanned:
        """Emphasis flanking per CommonMark, with sentinels invisible to the neighbour test."""
        src = self.src
        limit = self.posMax
        marker = src[start]
        pos = start
        while pos < limit and src[pos] == marker:
            pos += 1
        before = start - 1
        while before >= 0 and _is_sentinel(src[before]):
            before -= 1
        after = pos
        while after < limit and _is_sentinel(src[after]):
            after += 1
        prev_ch = src[before] if before >= 0 else " "
        next_ch = src[after] if after < limit else " "

        prev_punct = isMdAsciiPunct(ord(prev_ch)) or isPunctChar(prev_ch)
        next_punct = isMdAsciiPunct(ord(next_ch)) or isPunctChar(next_ch)
        prev_space = isWhiteSpace(ord(prev_ch))
        next_space = isWhiteSpace(ord(next_ch))

        left = not next_space and (not next_punct or prev_space or prev_punct)
        right = not prev_space and (not prev_punct or next_space or next_punct)
        can_open = left and (canSplitWord or not right or prev_punct)
        can_close = right and (canSplitWord or not left or next_punct)
        return Scanned(can_open, can_close, pos - start)


def _backticks(state: StateInline, silent: bool) -> bool:
    """markdown-it's code span rule, with the one-space padding rule applied as if the span
    held no sentinels (``` `` S| `` ``` must lose its padding like ``` `` | `` ```)."""
    start = state.pos
    count = len(state.tokens)
    if not backtick(state, silent):
        return False
    if len(state.tokens) == count:
        return True  # silent, or an unmatched run kept as text
    token = state.tokens[-1]
    if token.type == "code_inline" and _SENTINEL.search(token.content):
        size = len(token.markup)
        raw = state.src[start + size : state.pos - size].replace("\n", " ")
        plain = _SENTINEL.sub("", raw)
        if plain[:1] == " " and plain[-1:] == " " and plain.strip(" "):
            real = [i for i, ch in enumerate(raw) if not _is_sentinel(ch)]
            first, last = real[0], real[-1]
            raw = raw[:first] + raw[first + 1 : last] + raw[last + 1 :]
        token.content = raw
    return True


class _CiteParserInline(ParserInline):
    def parse(self, src: str, md: Any, env: Any, tokens: list[Token]) -> list[Token]:
        state = _SentinelTransparentState(src, md, env, tokens)
        self.tokenize(state)
        for rule in self.ruler2.getRules(""):
            rule(state)
        return state.tokens


# What linkify-it needs before it can find anything: a scheme colon, "//", an "@", "www.",
# a dot followed by a label character, or "localhost". Checked first because its own tests
# run large regexes over every text token (about 40% of markdown-it's time on prose).
_MAY_LINK = re.compile(r"[:@]|//|www\.|\.[^\s.]|localhost", re.IGNORECASE)


class _QuickLinkify:
    """linkify-it with a conservative pre-check in ``test``/``pretest``; same results."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def test(self, text: str) -> bool:
        return bool(_MAY_LINK.search(text)) and self._inner.test(text)

    def pretest(self, text: str) -> bool:
        return bool(_MAY_LINK.search(text)) and self._inner.pretest(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class _CiteMarkdownIt(MarkdownIt):
    """js-default (raw HTML off), typographer off, linkify on, images off, strict links."""

    def __init__(self) -> None:
        super().__init__("js-default", {"typographer": False, "linkify": True})
        # Same rules and state, one overridden method: swap the class, not the instance.
        self.inline.__class__ = _CiteParserInline
        # Images would load third-party URLs (exfiltration by prompt injection): "![a](u)"
        # renders as "!" plus an ordinary link.
        self.disable("image")
        # prepare_text already normalised newlines and NUL (it has to, to keep offsets).
        self.disable("normalize")
        self.inline.ruler.at("backticks", _backticks)
        self.linkify = _QuickLinkify(self.linkify)
        self.core.ruler.after("block", "cite_sentinels", _insert_sentinels)
        self.core.ruler.push("limit_depth", _limit_inline_depth)
        self.core.ruler.push("cite_spans", _place_spans)
        self.add_render_rule("fence", _render_fence)
        self.add_render_rule("code_block", _render_code_block)

    def normalizeLink(self, url: str) -> str:
        # Keep boundary marks out of the URL encoder; they ride along at the end and are
        # taken out of the attribute again when spans are placed.
        clean, ids = _strip_sentinels(url)
        normal = super().normalizeLink(clean)
        return normal + "".join(chr(_SENTINEL_BASE + i) for i in ids)

    def validateLink(self, url: str) -> bool:
        return is_allowed_url(_strip_sentinels(url)[0])


class _References(dict):  # type: ignore[type-arg]
    """Reference definitions, looked up as if the label had no sentinels in it."""

    @staticmethod
    def _key(key: Any) -> Any:
        if isinstance(key, str) and any(_is_sentinel(ch) for ch in key):
            return normalizeReference(_strip_sentinels(key)[0])
        return key

    def get(self, key: Any, default: Any = None) -> Any:
        return super().get(self._key(key), default)

    def __contains__(self, key: object) -> bool:
        return super().__contains__(self._key(key))

    def __getitem__(self, key: Any) -> Any:
        return super().__getitem__(self._key(key))


_local = threading.local()


def _md() -> _CiteMarkdownIt:
    md = getattr(_local, "md", None)
    if md is None:
        md = _local.md = _CiteMarkdownIt()
    return md


# --- boundary plan ------------------------------------------------------------------------------

_CLOSE, _MARK, _OPEN = 0, 1, 2


@dataclass
class _Plan:
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
        for kind, index in self.slots[sid]:
            cite = self.cites[index]
            if kind == _OPEN:
                self.active[cite.number] += 1
                continue
            if kind == _CLOSE and self.active[cite.number] > 0:
                self.active[cite.number] -= 1
            # A marker is incomplete only if every attribution ending here is.
            closing[cite.number] = closing.get(cite.number, True) and cite.incomplete
        self.key = frozenset(n for n, c in self.active.items() if c > 0)
        return [self.marker(n, closing[n]) for n in sorted(closing)]

    def marker(self, number: int, incomplete: bool) -> str:
        if not self.titles:
            for cite in self.cites:
                if cite.title and cite.number not in self.titles:
                    self.titles[cite.number] = cite.title
        return marker_html(number, self.titles.get(number, ""), self.anchor_prefix, incomplete)


def _build_events(text: str, cites: Sequence[Cite]) -> list[tuple[int, int, int]]:
    length = len(text)
    events = []
    for index, cite in enumerate(cites):
        if cite.start is None or cite.end is None:
            start, end = 0, length
        else:
            start = _snap(text, min(max(cite.start, 0), length))
            end = max(start, _snap(text, min(max(cite.end, 0), length)))
        if start == end:
            events.append((start, _MARK, index))
        else:
            events.append((start, _OPEN, index))
            events.append((end, _CLOSE, index))
    events.sort()
    return events


# --- step 2: sentinels into block contents --------------------------------------------------------


def _line_starts(src: str) -> list[int]:
    starts = [0]
    find = src.find
    pos = find("\n")
    while pos != -1:
        starts.append(pos + 1)
        pos = find("\n", pos + 1)
    return starts


@dataclass
class _Content:
    index: int  # in state.tokens
    token: Token
    first_line: int  # source line of the content's first line
    span_start: int
    span_end: int
    cell: bool
    segments: list[tuple[int, int, int]] | None = None  # (content pos, src pos, length)
    src_starts: list[int] | None = None


def _contents(tokens: list[Token], starts: list[int], src_len: int) -> list[_Content]:
    out = []
    nlines = len(starts)
    previous = ""
    for index, token in enumerate(tokens):
        if token.type in ("inline", "fence", "code_block") and token.map:
            first, last = token.map
            if first >= nlines:
                continue
            span_start = starts[first]
            span_end = starts[last] if last < nlines else src_len
            content_first = first + 1 if token.type == "fence" else first
            out.append(
                _Content(
                    index=index,
                    token=token,
                    first_line=content_first,
                    span_start=span_start,
                    span_end=span_end,
                    cell=previous in ("th_open", "td_open"),
                )
            )
        previous = token.type
    return out


def _align(content: _Content, src: str, starts: list[int], cursors: dict[int, int]) -> None:
    """Map the content's characters to source positions, as (content, src, length) segments."""
    segments: list[tuple[int, int, int]] = []
    nlines = len(starts)
    pos = 0
    pieces = content.token.content.split("\n")
    for j, piece in enumerate(pieces):
        line_no = content.first_line + j
        if line_no >= nlines:
            break
        line_start = starts[line_no]
        line_end = starts[line_no + 1] - 1 if line_no + 1 < nlines else len(src)
        line = src[line_start:line_end]
        if piece:
            low = cursors.get(line_no, 0) if content.cell else 0
            if content.cell:
                at = line.find(piece, low)
            elif line.endswith(piece):
                at = len(line) - len(piece)
            else:
                at = line.rfind(piece)
            if at >= 0:
                segments.append((pos, line_start + at, len(piece)))
                if content.cell:
                    cursors[line_no] = at + len(piece)
            else:
                segments.extend(_align_chars(piece, line, low, pos, line_start))
                if content.cell and segments:
                    cursors[line_no] = segments[-1][1] - line_start + 1
        pos += len(piece)
        if j < len(pieces) - 1:
            segments.append((pos, line_end, 1))  # the newline
            pos += 1
    content.segments = segments
    content.src_starts = [s for _, s, _ in segments]


def _align_chars(
    piece: str, line: str, low: int, pos: int, line_start: int
) -> list[tuple[int, int, int]]:
    """Character alignment for content the block parser rewrote (tabs, escaped pipes)."""
    found = []
    j = len(line) - 1
    for i in range(len(piece) - 1, -1, -1):
        ch = piece[i]
        k = j
        while k >= max(low, j - 3) and line[k] != ch:
            k -= 1
        if k >= low and k >= 0 and line[k] == ch:
            found.append((pos + i, line_start + k, 1))
            j = k - 1
    found.reverse()
    return found


def _offset(content: _Content, p: int) -> int:
    """Content offset for source position p (p inside the content's span)."""
    segments = content.segments or []
    j = bisect_right(content.src_starts or [], p) - 1
    if j < 0:
        return 0
    cpos, spos, length = segments[j]
    if p <= spos + length:
        return cpos + (p - spos)
    return cpos + length


def _insert_sentinels(state: StateCore) -> None:
    plan: _Plan | None = state.env.get("cite_plan")
    if plan is None or not plan.events:
        return
    src = state.src
    starts = _line_starts(src)
    contents = _contents(state.tokens, starts, len(src))
    if not contents:
        plan.slots = [[(kind, index) for _, kind, index in plan.events]]
        plan.trailer = [0]
        return
    span_starts = [c.span_start for c in contents]
    cursors: dict[int, int] = {}
    aligned: set[int] = set()

    def ensure(ci: int) -> _Content:
        content = contents[ci]
        if ci not in aligned:
            # Cells of one table row share a span: align them together, left to right.
            group = [ci]
            if content.cell:
                lo = ci
                while lo > 0 and contents[lo - 1].span_start == content.span_start:
                    lo -= 1
                hi = ci
                while hi + 1 < len(contents) and contents[hi + 1].span_start == content.span_start:
                    hi += 1
                group = list(range(lo, hi + 1))
            for g in group:
                if g not in aligned:
                    _align(contents[g], src, starts, cursors)
                    aligned.add(g)
        return content

    def locate(p: int, kind: int) -> tuple[int, int]:
        ci = bisect_right(span_starts, p) - 1
        if ci < 0:
            return 0, 0
        # Among cells sharing a row span, pick the first whose text reaches p.
        while ci > 0 and contents[ci - 1].span_start == contents[ci].span_start:
            ci -= 1
        while True:
            content = contents[ci]
            if p >= content.span_end:
                break
            ensure(ci)
            last = content.segments[-1] if content.segments else None
            same_row = ci + 1 < len(contents) and contents[ci + 1].span_start == content.span_start
            if same_row and (last is None or p > last[1] + last[2]):
                ci += 1
                continue
            offset = _offset(content, p)
            size = len(content.token.content)
            if kind != _OPEN and offset == 0 and ci > 0:
                return ci - 1, len(contents[ci - 1].token.content)
            if kind == _OPEN and offset >= size and ci + 1 < len(contents):
                return ci + 1, 0
            return ci, min(offset, size)
        # In the gap after a block (after a table row's last cell): opens go to the next
        # block, the rest stay behind.
        while ci + 1 < len(contents) and contents[ci + 1].span_start == contents[ci].span_start:
            ci += 1
        if kind == _OPEN and ci + 1 < len(contents):
            return ci + 1, 0
        return ci, len(contents[ci].token.content)

    located = [locate(p, kind) for p, kind, _ in plan.events]
    opens = {index: where for (_, kind, index), where in zip(plan.events, located, strict=True)
             if kind == _OPEN}  # fmt: skip
    closes = {index: where for (_, kind, index), where in zip(plan.events, located, strict=True)
              if kind == _CLOSE}  # fmt: skip
    slot_ids: dict[tuple[int, int], int] = {}
    for (_, kind, index), where in zip(plan.events, located, strict=True):
        if kind != _MARK and closes[index] < opens[index]:
            # Only block syntax or whitespace between start and end (the start moved on to
            # the next block, the end stayed behind): no span, just the marker.
            if kind == _OPEN:
                continue
            kind = _MARK
        sid = slot_ids.get(where)
        if sid is None:
            if len(plan.slots) >= _SENTINEL_COUNT:
                continue
            sid = slot_ids[where] = len(plan.slots)
            plan.slots.append([])
        plan.slots[sid].append((kind, index))

    by_content: dict[int, list[tuple[int, int]]] = {}
    for (ci, offset), sid in slot_ids.items():
        by_content.setdefault(ci, []).append((offset, sid))
    for ci, marks in by_content.items():
        content = contents[ci]
        text = content.token.content
        marks.sort()
        pieces = []
        last = 0
        for offset, sid in marks:
            pieces.append(text[last:offset])
            pieces.append(chr(_SENTINEL_BASE + sid))
            last = offset
        pieces.append(text[last:])
        content.token.content = "".join(pieces)
        plan.token_sentinels[content.index] = [sid for _, sid in marks]


# --- step 4: spans and markers in the token stream ----------------------------------------------


class _Mixed:
    """Uniformity value of an element whose descendants are cited differently."""


_MIXED = _Mixed()


_UNSET = object()


class _Elem:
    __slots__ = ("atomic", "close", "deferred", "kids", "open", "pending", "uniform")

    def __init__(self, open_token: Token | None, atomic: bool = False) -> None:
        self.open = open_token
        self.close: Token | None = None
        self.kids: list[Any] = []  # _Elem, or (token, key) leaves; key None: a marker
        self.atomic = atomic
        self.deferred: list[Any] = []  # markers to place after this (outermost atomic) element
        self.pending: list[int] = []  # sentinel ids found in attributes
        self.uniform: Any = _UNSET


@lru_cache(maxsize=4096)
def _html_token(content: str) -> Token:
    # Shared instances: the renderer only reads tokens, and markers/span tags repeat a lot.
    return Token("html_inline", "", 0, content=content)


def _text_token(content: str) -> Token:
    return Token("text", "", 0, content=content)


def _uniform(node: Any) -> Any:
    """A frozenset: all text inside is cited by exactly these sources; ``None``: a marker;
    ``_MIXED``: anything else (spans must go inside the element). Recursion depth is bounded
    by ``MAX_INLINE_DEPTH``."""
    if type(node) is tuple:
        return node[1]
    value = node.uniform
    if value is _UNSET:
        value = None
        for kid in node.kids:
            u = _uniform(kid)
            if u is None:
                continue
            if u is _MIXED or (value is not None and u != value):
                value = _MIXED
                break
            value = u
        if value is None:
            value = _MIXED if node.kids else frozenset()  # markers only: emit as they are
        node.uniform = value
    return value


def _emit_plain(node: Any, out: list[Token]) -> None:
    if type(node) is tuple:
        out.append(node[0])
        return
    if node.open is not None:
        out.append(node.open)
    for kid in node.kids:
        _emit_plain(kid, out)
    if node.close is not None:
        out.append(node.close)


def _emit(kids: list[Any], out: list[Token]) -> None:
    """Flatten the tree back into tokens, wrapping each maximal run of siblings cited by the
    same (non-empty) set of sources in one span."""
    i = 0
    count = len(kids)
    while i < count:
        node = kids[i]
        u = _uniform(node)
        if u and type(u) is frozenset:
            j = i + 1
            while j < count and _uniform(kids[j]) == u:
                j += 1
            out.append(_html_token(_span_open(u)))
            for k in range(i, j):
                _emit_plain(kids[k], out)
            out.append(_html_token("</span>"))
            i = j
            continue
        if u is _MIXED:
            if node.open is not None:
                out.append(node.open)
            _emit(node.kids, out)
            if node.close is not None:
                out.append(node.close)
        else:
            _emit_plain(node, out)
        i += 1


def _rewrite_inline(token: Token, plan: _Plan, expected: list[int]) -> None:
    root = _Elem(None)
    stack = [root]
    atomic: list[_Elem] = []  # atomic elements currently open, outermost first

    def add_markers(markers: list[str]) -> None:
        leaves = [(_html_token(m), None) for m in markers]
        if atomic:
            atomic[0].deferred.extend(leaves)
        else:
            stack[-1].kids.extend(leaves)

    def add_text(content: str, make: Any = _text_token) -> None:
        for part in _SENTINEL_SPLIT.split(content):
            if not part:
                continue
            if len(part) == 1 and _is_sentinel(part):
                add_markers(plan.apply(ord(part) - _SENTINEL_BASE))
            else:
                stack[-1].kids.append((make(part), plan.key))

    for child in token.children or []:
        if child.nesting == 1:
            elem = _Elem(child, atomic=child.type == "link_open")
            for name, value in list(child.attrs.items()):
                if isinstance(value, str):
                    clean, ids = _strip_sentinels(value)
                    if ids:
                        child.attrs[name] = clean
                        elem.pending.extend(ids)
            stack[-1].kids.append(elem)
            stack.append(elem)
            if elem.atomic:
                atomic.append(elem)
        elif child.nesting == -1:
            if len(stack) == 1:
                stack[0].kids.append((child, plan.key))
                continue
            elem = stack.pop()
            elem.close = child
            if atomic and atomic[-1] is elem:
                atomic.pop()
            if elem.atomic and not atomic:
                # Markers from inside the link: after it, never nested in it.
                stack[-1].kids.extend(elem.deferred)
                elem.deferred = []
            for sid in elem.pending:  # boundaries from the link target: right after the link
                add_markers(plan.apply(sid))
        elif child.type == "text":
            if _SENTINEL.search(child.content):
                add_text(child.content)
            else:
                stack[-1].kids.append((child, plan.key))
        elif child.type == "code_inline" and _SENTINEL.search(child.content):
            code = _Elem(_html_token("<code>"), atomic=True)
            code.close = _html_token("</code>")
            stack[-1].kids.append(code)
            stack.append(code)
            atomic.append(code)
            add_text(child.content)
            stack.pop()
            atomic.pop()
            if not atomic:
                stack[-1].kids.extend(code.deferred)
                code.deferred = []
        else:
            if child.content and _SENTINEL.search(child.content):
                child.content = _strip_sentinels(child.content)[0]
            stack[-1].kids.append((child, plan.key))

    # Boundaries the inline parse swallowed (e.g. inside a reference label): end of block.
    lost = [sid for sid in expected if sid not in plan.seen]
    for sid in lost:
        root.kids.extend((_html_token(m), None) for m in plan.apply(sid))

    out: list[Token] = []
    _emit(root.kids, out)
    token.children = out


def _code_html(content: str, plan: _Plan) -> tuple[str, str]:
    """Escaped code with spans, and the markers to put after the code element."""
    body: list[str] = []
    markers: list[str] = []
    for part in _SENTINEL_SPLIT.split(content):
        if not part:
            continue
        if len(part) == 1 and _is_sentinel(part):
            markers.extend(plan.apply(ord(part) - _SENTINEL_BASE))
        elif plan.key:
            body.append(_span_open(plan.key) + escapeHtml(part) + "</span>")
        else:
            body.append(escapeHtml(part))
    return "".join(body), "".join(markers)


def _limit_inline_depth(state: StateCore) -> None:
    for token in state.tokens:
        children = token.children
        if token.type != "inline" or not children or len(children) <= 2 * MAX_INLINE_DEPTH:
            continue
        depth = 0
        flattened: list[bool] = []
        for child in children:
            if child.nesting == 1:
                depth += 1
                flattened.append(depth > MAX_INLINE_DEPTH)
                if flattened[-1]:
                    _as_text(child)
            elif child.nesting == -1:
                depth -= 1
                if flattened and flattened.pop():
                    _as_text(child)


def _as_text(token: Token) -> None:
    token.type, token.tag, token.nesting = "text", "", 0
    token.content, token.attrs = token.markup, {}


def _place_spans(state: StateCore) -> None:
    plan: _Plan | None = state.env.get("cite_plan")
    if plan is None:
        return
    for index, token in enumerate(state.tokens):
        expected = plan.token_sentinels.get(index)
        if token.type == "inline":
            if expected:
                _rewrite_inline(token, plan, expected)
            elif plan.key and token.children:
                # Inside a cited range with no boundary here: one span around the block.
                token.children = [
                    _html_token(_span_open(plan.key)),
                    *token.children,
                    _html_token("</span>"),
                ]
        elif token.type in ("fence", "code_block") and (expected or plan.key):
            body, markers = _code_html(token.content, plan)
            lost = [sid for sid in expected or () if sid not in plan.seen]
            markers += "".join(m for sid in lost for m in plan.apply(sid))
            token.content = _strip_sentinels(token.content)[0]
            token.meta = {**(token.meta or {}), "cite_html": body, "cite_markers": markers}
    if plan.trailer:
        markers = [m for sid in plan.trailer for m in plan.apply(sid)]
        if markers:
            paragraph = Token("paragraph_open", "p", 1, block=True)
            inline = Token("inline", "", 0, children=[_html_token(m) for m in markers])
            state.tokens.extend([paragraph, inline, Token("paragraph_close", "p", -1, block=True)])


def _render_fence(self: RendererHTML, tokens: list[Token], idx: int, options: Any, env: Any) -> str:
    token = tokens[idx]
    meta = token.meta or {}
    if "cite_html" not in meta:
        return RendererHTML.fence(self, tokens, idx, options, env)
    info = unescapeAll(token.info).strip() if token.info else ""
    lang = info.split(maxsplit=1)[0] if info else ""
    cls = f' class="{escapeHtml(options.langPrefix + lang)}"' if lang else ""
    return f"<pre><code{cls}>{meta['cite_html']}</code>{meta['cite_markers']}</pre>\n"


def _render_code_block(
    self: RendererHTML, tokens: list[Token], idx: int, options: Any, env: Any
) -> str:
    meta = tokens[idx].meta or {}
    if "cite_html" not in meta:
        return RendererHTML.code_block(self, tokens, idx, options, env)
    return f"<pre><code>{meta['cite_html']}</code>{meta['cite_markers']}</pre>\n"


# --- public API -----------------------------------------------------------------------------------


def is_capped(text: str) -> bool:
    """True when ``render_markdown`` will show this text escaped instead of parsing it."""
    return len(prepare_text(text)[0]) > MAX_MARKDOWN_CHARS


def _capped_html(text: str, cites: Sequence[Cite], anchor_prefix: str) -> str:
    # Built only from escaped text and constants, so it needs no sanitizer pass (bleach is
    # superlinear on long entity-heavy text, which is exactly what this path must avoid).
    shown = text[:MAX_PLAIN_CHARS]
    note = f"This message is {len(text):,} characters long, so it is shown as plain text" + (
        " (cut at 1,000,000 characters; the export has all of it)." if shown != text else "."
    )
    parts = [
        f'<p class="render-note">{html.escape(note)}</p>',
        f'<pre class="render-plain">{html.escape(shown, quote=False)}</pre>',
    ]
    numbers: dict[int, bool] = {}
    titles: dict[int, str] = {}
    for cite in cites:
        numbers[cite.number] = numbers.get(cite.number, True) and cite.incomplete
        titles.setdefault(cite.number, cite.title)
    if numbers:
        markers = "".join(
            marker_html(n, titles[n], anchor_prefix, numbers[n]) for n in sorted(numbers)
        )
        parts.append(f"<p>{markers}</p>")
    return "\n".join(parts) + "\n"


def render_markdown(text: str, cites: Sequence[Cite] = (), *, anchor_prefix: str = "") -> str:
    """Markdown to sanitized HTML, with ``cites`` marked as spans + markers.

    Ranges in ``cites`` are code-point offsets into ``text`` (invalid ones are the caller's
    problem: pass ``start=end=None`` for "whole text"). ``anchor_prefix`` + number is the id of
    the source list entry a marker links to.
    """
    if not isinstance(text, str):
        text = ""
    prepared, removed = prepare_text(text)
    cites = list(cites)[:MAX_ATTRIBUTIONS]
    if removed:
        cites = [
            Cite(
                c.number,
                None if c.start is None else remap(c.start, removed),
                None if c.end is None else remap(c.end, removed),
                c.incomplete,
                c.title,
            )
            for c in cites
        ]
    if len(prepared) > MAX_MARKDOWN_CHARS:
        return _capped_html(prepared, cites, anchor_prefix)
    md = _md()
    env: dict[str, Any] = {"references": _References()}
    if cites:
        env["cite_plan"] = _Plan(
            cites=cites, events=_build_events(prepared, cites), anchor_prefix=anchor_prefix
        )
    rendered = md.renderer.render(md.parse(prepared, env), md.options, env)
    return clean_html(rendered)
