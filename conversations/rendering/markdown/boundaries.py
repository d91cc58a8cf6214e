"""Step 2 of span placement: each range boundary as a sentinel in the content of its block.

Runs as a core rule right after the block parse (``insert_sentinels``), so block syntax never
sees a sentinel: lists, fences, tables and headings parse exactly as without citations. Block
token contents are aligned back to source positions (a table row's cells together, left to
right); a boundary that falls inside block syntax (a ``> `` or ``- `` prefix, a blank line)
moves to the nearest content. Each content position that receives boundaries gets one
sentinel, whose slot in the plan lists the events that happen there.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass

from markdown_it.rules_core import StateCore
from markdown_it.token import Token

from .cites import CITE_PLAN, CLOSE, MARK, OPEN, Plan
from .sentinels import SENTINEL_BASE, SENTINEL_COUNT

# Block tokens whose content holds cited text: inline runs, code, display math.
_CONTENT_TYPES = frozenset({"inline", "fence", "code_block", "math_block", "amsmath"})


def line_starts(src: str) -> list[int]:
    """The offset where each line of ``src`` starts (token maps count lines)."""
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
        if token.type in _CONTENT_TYPES and token.map:
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


def insert_sentinels(state: StateCore) -> None:
    """Core rule, after ``block``: each boundary of the plan as a sentinel in block content."""
    plan: Plan | None = state.env.get(CITE_PLAN)
    if plan is None or not plan.events:
        return
    src = state.src
    starts = line_starts(src)
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
            if kind != OPEN and offset == 0 and ci > 0:
                return ci - 1, len(contents[ci - 1].token.content)
            if kind == OPEN and offset >= size and ci + 1 < len(contents):
                return ci + 1, 0
            return ci, min(offset, size)
        # In the gap after a block (after a table row's last cell): opens go to the next
        # block, the rest stay behind.
        while ci + 1 < len(contents) and contents[ci + 1].span_start == contents[ci].span_start:
            ci += 1
        if kind == OPEN and ci + 1 < len(contents):
            return ci + 1, 0
        return ci, len(contents[ci].token.content)

    located = [locate(p, kind) for p, kind, _ in plan.events]
    opens = {index: where for (_, kind, index), where in zip(plan.events, located, strict=True)
             if kind == OPEN}  # fmt: skip
    closes = {index: where for (_, kind, index), where in zip(plan.events, located, strict=True)
              if kind == CLOSE}  # fmt: skip
    slot_ids: dict[tuple[int, int], int] = {}
    for (_, kind, index), where in zip(plan.events, located, strict=True):
        if kind != MARK and closes[index] < opens[index]:
            # Only block syntax or whitespace between start and end (the start moved on to
            # the next block, the end stayed behind): no span, just the marker.
            if kind == OPEN:
                continue
            kind = MARK
        sid = slot_ids.get(where)
        if sid is None:
            if len(plan.slots) >= SENTINEL_COUNT:
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
            pieces.append(chr(SENTINEL_BASE + sid))
            last = offset
        pieces.append(text[last:])
        content.token.content = "".join(pieces)
        plan.token_sentinels[content.index] = [sid for _, sid in marks]


def content_segments(tokens: list[Token], src: str) -> dict[int, list[tuple[int, int, int]]]:
    """For each content token (by index): its ``(content pos, source pos, length)`` segments,
    the alignment citations use, for readers of the source such as the Markdown export."""
    starts = line_starts(src)
    contents = _contents(tokens, starts, len(src))
    cursors: dict[int, int] = {}
    out = {}
    for content in contents:
        _align(content, src, starts, cursors)
        out[content.index] = content.segments or []
    return out
