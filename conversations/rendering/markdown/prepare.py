"""Text preparation: the model's text as the parser will see it, and where boundaries may go.

Offsets (attribution ranges) address the original text, so everything markdown-it would change
before parsing is done here instead, where the removed positions stay known (``remap``). Then
``snap`` nudges each boundary out of the spots where an extra character (a sentinel) would
change the inline parse.
"""

from __future__ import annotations

import re
from bisect import bisect_left

_PLANE_15 = re.compile("[\U000f0000-\U000fffff]")
_ENTITY = re.compile(r"&(?:#[0-9]{1,7}|#[xX][0-9a-fA-F]{1,6}|[A-Za-z][A-Za-z0-9]{1,31});")
_ASCII_PUNCT = frozenset("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")
_SCHEME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+-.")


def escaped(text: str, index: int) -> bool:
    """Whether ``text[index]`` follows an escaping backslash (an odd run of them)."""
    run = 0
    while index - run - 1 >= 0 and text[index - run - 1] == "\\":
        run += 1
    return run % 2 == 1


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


def snap(text: str, p: int) -> int:
    """Move a boundary out of places where an extra character would change the inline parse.

    Each move only crosses markdown syntax or whitespace, never visible text of its own, except
    back to the start of a bare link or autolink whose scheme or "www." domain it fell inside.
    """
    n = len(text)
    for _ in range(4):
        q = p
        # Inside a delimiter run (** __ ~~ `` $$): go to its start.
        while 0 < q < n and text[q - 1] == text[q] and text[q] in "*_~`$":
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
        if 0 < q < n and text[q] in _ASCII_PUNCT and escaped(text, q):
            q -= 1
        # Inside an entity reference.
        amp = text.rfind("&", max(0, q - 40), q)
        if amp >= 0:
            match = _ENTITY.match(text, amp)
            if match and amp < q < match.end():
                q = amp
        # Inside a URL scheme, its "://", or "www." ("htt|ps://", "http:|//", "http:/|/",
        # "<htt|ps:", "<http:|"): autolinks and linkify need it whole. Later in the URL a
        # sentinel is harmless (it is stripped from the href).
        at = q - 1 if text[q - 1 : q] == ":" else q - 2 if text[q - 2 : q] == ":/" else q
        start = at
        while start > 0 and text[start - 1] in _SCHEME_CHARS:
            start -= 1
        end = at
        while end < n and text[end] in _SCHEME_CHARS:
            end += 1
        in_www = text[start : start + 4].lower() == "www." and q <= start + 4
        in_scheme = (
            end < n
            and text[end] == ":"
            and (text.startswith("//", end + 1) or (start > 0 and text[start - 1] == "<"))
        )
        if start < at and (in_www or in_scheme):
            q = start
        # Inside the domain of a "www." link ("www.exam|ple.com"): linkify needs it whole.
        head, floor = q, max(0, q - 260)  # a domain is at most 253 characters
        while head > floor and (text[head - 1].isalnum() or text[head - 1] in "-."):
            head -= 1
        if (head < q and text[head : head + 4].lower() == "www."
                and (head == 0 or text[head - 1] not in "/@:")):
            q = head
        # Right after "<" (an autolink must start with its scheme), or between "]" and "(".
        if q > 0 and text[q - 1] == "<":
            q -= 1
        if 0 < q < n and text[q - 1] == "]" and text[q] in "([":
            q -= 1
        if q == p:
            return p
        p = q
    return p
