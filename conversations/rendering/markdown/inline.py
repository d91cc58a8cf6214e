"""Step 3 of span placement: the inline parse with sentinels in place, as if they were not.

The inline rules here wrap markdown-it's own; each differs only where a sentinel is involved:

* emphasis and strikethrough flanking look through sentinels (``**a**S`` still closes);
* a code span's one-space padding is dropped as if the span held no sentinels;
* reference labels are looked up without their sentinels;
* link targets: sentinels are kept out of the URL encoder and the URL policy; they ride along
  at the end of the href, and ``spans`` takes them out of the attribute again.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from markdown_it.common.utils import isMdAsciiPunct, isPunctChar, isWhiteSpace, normalizeReference
from markdown_it.rules_core import StateCore
from markdown_it.rules_inline.backticks import backtick
from markdown_it.rules_inline.state_inline import StateInline

from .cites import CITE_PLAN
from .sentinels import SENTINEL, SENTINEL_BASE, is_sentinel, strip_sentinels

InlineRule = Callable[[StateInline, bool], bool]


def _flanking(state: StateInline, start: int, can_split_word: bool) -> tuple[bool, bool]:
    """CommonMark's (can open, can close) of the delimiter run at ``start``, with sentinels
    invisible to the neighbour test."""
    src = state.src
    limit = state.posMax
    marker = src[start]
    pos = start
    while pos < limit and src[pos] == marker:
        pos += 1
    before = start - 1
    while before >= 0 and is_sentinel(src[before]):
        before -= 1
    after = pos
    while after < limit and is_sentinel(src[after]):
        after += 1
    prev_ch = src[before] if before >= 0 else " "
    next_ch = src[after] if after < limit else " "

    prev_punct = isMdAsciiPunct(ord(prev_ch)) or isPunctChar(prev_ch)
    next_punct = isMdAsciiPunct(ord(next_ch)) or isPunctChar(next_ch)
    prev_space = isWhiteSpace(ord(prev_ch))
    next_space = isWhiteSpace(ord(next_ch))

    left = not next_space and (not next_punct or prev_space or prev_punct)
    right = not prev_space and (not prev_punct or next_space or next_punct)
    can_open = left and (can_split_word or not right or prev_punct)
    can_close = right and (can_split_word or not left or next_punct)
    return can_open, can_close


def sentinel_transparent(tokenize: InlineRule, split_word: Callable[[str], bool]) -> InlineRule:
    """A delimiter rule (emphasis, strikethrough) whose flanking ignores sentinels.

    ``tokenize`` runs as it is; only when a sentinel touches the run are the open/close flags
    of the delimiters it added computed again (with no sentinel next to the run, markdown-it's
    own answer is the same). ``split_word(marker)``: whether that marker may split a word.
    """

    def rule(state: StateInline, silent: bool) -> bool:
        start = state.pos
        count = len(state.delimiters)
        if not tokenize(state, silent):
            return False
        end = state.pos
        src = state.src
        if (start > 0 and is_sentinel(src[start - 1])) or (
            end < state.posMax and is_sentinel(src[end])
        ):
            can_open, can_close = _flanking(state, start, split_word(src[start]))
            for delimiter in state.delimiters[count:]:
                delimiter.open, delimiter.close = can_open, can_close
        return True

    return rule


def backticks(state: StateInline, silent: bool) -> bool:
    """markdown-it's code span rule, with the one-space padding rule applied as if the span
    held no sentinels (``` `` S| `` ``` must lose its padding like ``` `` | `` ```)."""
    start = state.pos
    count = len(state.tokens)
    if not backtick(state, silent):
        return False
    if len(state.tokens) == count:
        return True  # silent, or an unmatched run kept as text
    token = state.tokens[-1]
    if token.type == "code_inline" and SENTINEL.search(token.content):
        size = len(token.markup)
        raw = state.src[start + size : state.pos - size].replace("\n", " ")
        plain = SENTINEL.sub("", raw)
        if plain[:1] == " " and plain[-1:] == " " and plain.strip(" "):
            real = [i for i, ch in enumerate(raw) if not is_sentinel(ch)]
            first, last = real[0], real[-1]
            raw = raw[:first] + raw[first + 1 : last] + raw[last + 1 :]
        token.content = raw
    return True


class _References(dict):  # type: ignore[type-arg]
    """Reference definitions, looked up as if the label had no sentinels in it."""

    @staticmethod
    def _key(key: Any) -> Any:
        if isinstance(key, str) and any(is_sentinel(ch) for ch in key):
            return normalizeReference(strip_sentinels(key)[0])
        return key

    def get(self, key: Any, default: Any = None) -> Any:
        return super().get(self._key(key), default)

    def __contains__(self, key: object) -> bool:
        return super().__contains__(self._key(key))

    def __getitem__(self, key: Any) -> Any:
        return super().__getitem__(self._key(key))


def sentinel_blind_references(state: StateCore) -> None:
    """Core rule, between the block and the inline parse: the reference definitions the block
    parse found, looked up without sentinels from now on (labels in links carry them)."""
    if state.env.get(CITE_PLAN) is not None:
        state.env["references"] = _References(state.env.get("references") or {})


def link_hooks(
    normalize: Callable[[str], str], validate: Callable[[str], bool]
) -> tuple[Callable[[str], str], Callable[[str], bool]]:
    """``normalizeLink`` and ``validateLink`` that see a URL without its sentinels."""

    def normalize_link(url: str) -> str:
        # Keep boundary marks out of the URL encoder; they ride along at the end and are
        # taken out of the attribute again when spans are placed.
        clean, ids = strip_sentinels(url)
        return normalize(clean) + "".join(chr(SENTINEL_BASE + i) for i in ids)

    def validate_link(url: str) -> bool:
        return validate(strip_sentinels(url)[0])

    return normalize_link, validate_link
