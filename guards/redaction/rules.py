"""The credential rules and the value-level redaction (texts, bytes, JSON-like values, a text with
an offset map); see the package's docstring for what is matched and why."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, AnyStr, Generic, overload

import orjson
import re2

from streams.errors import check_depth

MARK = "[REDACTED]"

_HEADER_NAMES = (
    "authorization", "proxy-authorization", "x-api-key", "api-key", "x-goog-api-key",
    "openai-api-key", "anthropic-api-key", "x-auth-token", "cookie", "set-cookie",
)
# The credential header names as one regex alternation (``live`` finds header lines with it).
HEADERS = "|".join(re.escape(h) for h in _HEADER_NAMES)
_HEADER_HINTS = ("authorization", "api-key", "auth-token", "cookie")  # each name holds one
_TOKEN_CHARS = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")


@dataclass(frozen=True)
class _Rule:
    """One credential shape. ``triggers``: literals (lowercase when ``fold``) without which the
    rule cannot match, checked with ``in`` (a fast substring search) before the regex runs.
    ``keep``: group 1 (a header name, "Bearer ", "?key=") stays. ``boundary``: the match must
    not continue a token (a key prefix inside a base64url blob is not a key); such a rule's
    match starts with one of its triggers."""

    pattern: str
    triggers: tuple[str, ...]
    fold: bool = False
    keep: bool = False
    boundary: bool = False


_RULES = (
    # A credential header as a JSON member: "authorization": "…" or ["…"] (VCR, HAR files).
    _Rule(rf'(?i)("(?:{HEADERS})"\s*:\s*\[?\s*")(?:[^"\\]|\\.)*(?=")', _HEADER_HINTS,
          fold=True, keep=True),
    # … as an HTTP / YAML header line: "Authorization: …" up to the end of the line.
    _Rule(rf"(?im)^([ \t-]*(?:{HEADERS})[ \t]*:[ \t]*(?:\r?\n[ \t]*-[ \t]*)?)(?=[^\s\[{{])"
          r"[^\r\n]+", _HEADER_HINTS,
          fold=True, keep=True),
    # Bearer / Token credentials (at least 16 characters and one digit: not prose).
    _Rule(r"(?i)\b((?:bearer|token)[ \t]+)(?=[A-Za-z0-9\-._~+/]*[0-9])[A-Za-z0-9\-._~+/]{16,}=*",
          ("bearer ", "bearer\t", "token ", "token\t"), fold=True, keep=True),
    # Provider and platform key shapes.
    _Rule(r"sk-ant-[A-Za-z0-9_\-]{8,}", ("sk-ant-",), boundary=True),
    _Rule(r"sk-(?:proj-|svcacct-|admin-|or-v1-)?[A-Za-z0-9_\-]{20,}", ("sk-",), boundary=True),
    _Rule(r"[srp]k_(?:live|test)_[A-Za-z0-9]{16,}",
          tuple(f"{a}k_{b}_" for a in "srp" for b in ("live", "test")), boundary=True),
    _Rule(r"AIza[A-Za-z0-9_\-]{35}(?![A-Za-z0-9_\-])", ("AIza",), boundary=True),
    _Rule(r"gh[pousr]_[A-Za-z0-9]{30,}", ("ghp_", "gho_", "ghu_", "ghs_", "ghr_"), boundary=True),
    _Rule(r"github_pat_[A-Za-z0-9_]{30,}", ("github_pat_",), boundary=True),
    _Rule(r"xox[abprs]-[A-Za-z0-9\-]{10,}", ("xox",), boundary=True),
    _Rule(r"ya29\.[A-Za-z0-9_\-.]{20,}", ("ya29.",), boundary=True),
    _Rule(r"A[KS]IA[0-9A-Z]{16}(?![A-Za-z0-9_\-])", ("AKIA", "ASIA"), boundary=True),
    _Rule(r"hf_[A-Za-z0-9]{30,}", ("hf_",), boundary=True),
    _Rule(r"gsk_[A-Za-z0-9]{30,}", ("gsk_",), boundary=True),  # Groq
    _Rule(r"xai-[A-Za-z0-9]{30,}", ("xai-",), boundary=True),  # xAI
    _Rule(r"pplx-[A-Za-z0-9]{30,}", ("pplx-",), boundary=True),  # Perplexity
    # A JWT (three base64url segments, the first two JSON objects).
    _Rule(r"eyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}", ("eyJ",),
          boundary=True),
    # Key-bearing URL query parameters (Gemini's ?key=AIza…, OAuth access_token=…).
    _Rule(r"(?i)([?&](?:key|api_key|apikey|api-key|access_token|token|client_secret|sig)=)"
          r"[^&#\s\"'\\<>]+", ("key=", "token=", "secret=", "sig="), fold=True, keep=True),
    # The rest of a secret whose start was redacted elsewhere (a key split across stream
    # chunks: the first chunk's part matched on its own, the rest arrived in the next one).
    # A redaction swallows the key-shaped characters that follow it (a sentence's full stop
    # stays, and so does a path after a redacted path segment: "/t/[REDACTED]/google"), and a
    # header line whose value was cut after its start loses the rest of the line.
    _Rule(r"\[REDACTED\](?=[A-Za-z0-9_\-~+=%])(?:[A-Za-z0-9_\-~+/=%]|\.(?=[A-Za-z0-9_\-]))+",
          (MARK,)),
    _Rule(rf"(?im)^([ \t-]*(?:{HEADERS})[ \t]*:[ \t]*)\[REDACTED\][^\r\n]+", _HEADER_HINTS,
          fold=True, keep=True),
    # … and a bearer token's rest may start with "/" (its alphabet has it; a path after a
    # redacted path segment, which the rule above leaves, follows no "Bearer").
    _Rule(r"(?i)\b((?:bearer|token)[ \t]+)\[REDACTED\]"
          r"(?:[A-Za-z0-9\-_~+/=]|\.(?=[A-Za-z0-9_\-]))+",
          ("bearer ", "bearer\t", "token ", "token\t"), fold=True, keep=True),
)


class _Compiled(Generic[AnyStr]):
    """A rule compiled for text (``str``) or wire bytes: its pattern, triggers and marker in
    that type."""

    def __init__(self, rule: _Rule, pattern: AnyStr, triggers: tuple[AnyStr, ...],
                 mark: AnyStr) -> None:
        self.rule = rule
        self.regex: re.Pattern[AnyStr] = re.compile(pattern)
        self.triggers: tuple[AnyStr, ...] = triggers
        self.mark: AnyStr = mark

    def applies(self, value: AnyStr, folded: Callable[[], AnyStr],
                seen: dict[tuple[AnyStr, ...], bool]) -> bool:
        if not self.triggers:
            return True
        if self.triggers not in seen:  # rules sharing triggers scan for them once
            haystack = folded() if self.rule.fold else value
            seen[self.triggers] = any(t in haystack for t in self.triggers)
        return seen[self.triggers]

    def start(self, match: re.Match[AnyStr]) -> int:
        """Where the secret itself starts (after a kept prefix)."""
        return match.start(1) + len(match.group(1)) if self.rule.keep else match.start()

    def is_secret(self, match: re.Match[AnyStr]) -> bool:
        if not self.rule.boundary or match.start() == 0:
            return True
        before: int | str = match.string[match.start() - 1]  # bytes index to an int
        return (before if isinstance(before, int) else ord(before)) not in _TOKEN_CHARS

    def sub(self, value: AnyStr) -> tuple[AnyStr, list[tuple[int, int]]]:
        """Replace every secret; also return the replaced spans (in ``value`` coordinates)."""
        spans: list[tuple[int, int]] = []
        pieces: list[AnyStr] = []
        last = 0
        for match in self.regex.finditer(value):
            if not self.is_secret(match):
                continue
            start = self.start(match)
            pieces += [value[last:start], self.mark]
            spans.append((start, match.end()))
            last = match.end()
        if not spans:
            return value, spans
        pieces.append(value[last:])
        return value[:0].join(pieces), spans


TEXT_RULES = [_Compiled(rule, rule.pattern, rule.triggers, MARK) for rule in _RULES]
BYTES_RULES = [
    _Compiled(rule, rule.pattern.encode(), tuple(t.encode() for t in rule.triggers), MARK.encode())
    for rule in _RULES
]


def _trigger_pattern() -> str:
    """Every rule's triggers as one alternation (the case-folding rules' case-insensitively).
    No text without a match can hold a credential. A trigger that starts a boundary rule's
    pattern must itself start a token (as the rule checks): a key prefix inside a base64 blob
    does not send the whole text down the careful path."""
    exact: set[str] = set()
    at_token_start: set[str] = set()
    folded: set[str] = set()
    for rule in _RULES:
        for trigger in rule.triggers:
            if rule.fold:
                folded.add(re.escape(trigger))
            elif rule.boundary:
                at_token_start.add(re.escape(trigger))
            else:
                exact.add(re.escape(trigger))
    return "|".join([
        *sorted(exact),
        "(?:^|[^A-Za-z0-9_\\-])(?:" + "|".join(sorted(at_token_start)) + ")",
        "(?i:" + "|".join(sorted(folded)) + ")",
    ])


# RE2 scans for all the triggers in one linear pass (an automaton), several times faster than
# a substring search per trigger or Python's backtracking alternation; every value that comes
# in goes through it, and almost none holds a credential.
_TRIGGERS = re2.compile(_trigger_pattern())
_TRIGGERS_BYTES = re2.compile(_trigger_pattern().encode())


def may_hold_secret(value: str | bytes) -> bool:
    """Whether ``value`` has any credential rule's trigger: False means it holds none."""
    return (_TRIGGERS_BYTES if isinstance(value, bytes) else _TRIGGERS).search(value) is not None


def _apply(value: AnyStr, rules: Sequence[_Compiled[AnyStr]]
           ) -> tuple[AnyStr, list[list[tuple[int, int]]]]:
    layers: list[list[tuple[int, int]]] = []
    if not value or not may_hold_secret(value):
        return value, layers
    lowered: list[AnyStr] = []  # value.lower(), made once and only if a case-folding rule asks

    def folded() -> AnyStr:
        if not lowered:
            lowered.append(value.lower())
        return lowered[0]

    seen: dict[tuple[AnyStr, ...], bool] = {}
    for rule in rules:
        if rule.applies(value, folded, seen):
            value, spans = rule.sub(value)
            if spans:
                layers.append(spans)
                lowered.clear()
                seen.clear()
    return value, layers


def redact_text(text: str) -> str:
    """``text`` with every credential-shaped substring replaced by ``[REDACTED]``."""
    return _apply(text, TEXT_RULES)[0]


@overload
def redact_bytes(raw: bytes) -> bytes: ...
@overload
def redact_bytes(raw: str) -> str: ...
def redact_bytes(raw: bytes | str) -> bytes | str:
    """The same for raw wire bytes (SSE, JSON lines, a JSON body), before anything parses them
    (a text given instead is redacted as text)."""
    if isinstance(raw, str):
        return redact_text(raw)
    return _apply(raw, BYTES_RULES)[0]


def looks_secret(text: str) -> bool:
    return redact_text(text) != text


def redact_value(value: Any) -> Any:
    """A JSON-like value with every credential redacted. Returns ``value`` itself when nothing
    was found, so a caller can tell by identity.

    A container is scanned as ONE serialized JSON text (far cheaper than a scan per string, and
    it also sees a credential header as a ``"authorization": "…"`` member); only when something
    was found is the redacted text decoded back. Redaction keeps JSON text valid: the marker
    needs no escaping and no rule matches across a quote."""
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, orjson.Fragment):
        return redact_fragment(value)
    if not isinstance(value, dict | list | tuple):
        return value
    try:
        blob = orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS)
    except TypeError:  # not JSON-like (or nested deeper than orjson encodes): walk it
        check_depth(value)  # the walk recurses: refuse input that would exhaust it
        out: dict[Any, Any] | list[Any] | tuple[Any, ...]
        if isinstance(value, dict):
            out = {redact_value(k): redact_value(v) for k, v in value.items()}
        else:
            out = type(value)(redact_value(v) for v in value)
        return value if out == value else out
    redacted = redact_bytes(blob)
    return value if redacted == blob else orjson.loads(redacted)


def redact_fragment(fragment: orjson.Fragment) -> orjson.Fragment:
    """A JSON text kept verbatim (a stored payload): redacted in its decoded form, re-encoded only
    when something was found, so clean payloads keep their exact bytes."""
    raw = orjson.dumps(fragment)  # a Fragment serializes to its own bytes
    redacted = redact_bytes(raw)
    if b"\\u" in redacted:  # an escaped key (\u0073k-…) is only visible once decoded
        decoded = orjson.loads(redacted)
        cleaned = redact_value(decoded)
        if cleaned is not decoded:
            return orjson.Fragment(orjson.dumps(cleaned))
    return fragment if redacted == raw else orjson.Fragment(redacted)


# -- redaction with an offset map (texts that attribution ranges address) ----------------------


def redact_with_map(text: str) -> tuple[str, Callable[[int, bool], int]]:
    """Redact ``text`` and return a function mapping a code-point offset in the original text to
    one in the redacted text. An offset inside a redacted secret snaps outward (a range start to
    the marker's start, a range end to the marker's end), so a range never collapses."""
    redacted, layers = _apply(text, TEXT_RULES)
    if not layers:
        return text, _identity

    def remap(offset: int, is_end: bool) -> int:
        for spans in layers:
            offset = _through(spans, offset, is_end)
        return offset

    return redacted, remap


def _identity(offset: int, is_end: bool) -> int:
    return offset


def _through(spans: list[tuple[int, int]], offset: int, is_end: bool) -> int:
    """Map ``offset`` across one rule's replacements (each span becomes ``MARK``)."""
    shift = 0
    for start, end in spans:
        if offset <= start:
            break
        if offset < end:  # strictly inside the secret: snap outward
            return start + shift + (len(MARK) if is_end else 0)
        shift += len(MARK) - (end - start)
    return offset + shift
