"""Secrets redaction: credential-shaped strings never reach the database or the logs.

Everything that comes in (provider wire bytes, import documents, titles and prompts given to the
API) passes through here on the way in. Only *specific* credential shapes are matched (provider
API keys, bearer tokens, credential headers, key-bearing URL query parameters, JWTs): provider
payloads legitimately hold long opaque blobs (signatures, encrypted search results) and those
must round-trip unchanged, so there is no "long random run" rule, and every key prefix must start
at a token boundary (a key prefix inside a base64url blob is not a key).

Redaction replaces the secret with ``[REDACTED]``, which contains no character that needs escaping
in JSON, so redacting wire text keeps it valid JSON / SSE.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote_plus

import orjson
import re2

from streams.errors import check_depth

MARK = "[REDACTED]"

_HEADER_NAMES = (
    "authorization", "proxy-authorization", "x-api-key", "api-key", "x-goog-api-key",
    "openai-api-key", "anthropic-api-key", "x-auth-token", "cookie", "set-cookie",
)
_HEADERS = "|".join(re.escape(h) for h in _HEADER_NAMES)
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
    _Rule(rf'(?i)("(?:{_HEADERS})"\s*:\s*\[?\s*")(?:[^"\\]|\\.)*(?=")', _HEADER_HINTS,
          fold=True, keep=True),
    # … as an HTTP / YAML header line: "Authorization: …" up to the end of the line.
    _Rule(rf"(?im)^([ \t-]*(?:{_HEADERS})[ \t]*:[ \t]*(?:\r?\n[ \t]*-[ \t]*)?)(?=[^\s\[{{])"
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
    _Rule(rf"(?im)^([ \t-]*(?:{_HEADERS})[ \t]*:[ \t]*)\[REDACTED\][^\r\n]+", _HEADER_HINTS,
          fold=True, keep=True),
    # … and a bearer token's rest may start with "/" (its alphabet has it; a path after a
    # redacted path segment, which the rule above leaves, follows no "Bearer").
    _Rule(r"(?i)\b((?:bearer|token)[ \t]+)\[REDACTED\]"
          r"(?:[A-Za-z0-9\-_~+/=]|\.(?=[A-Za-z0-9_\-]))+",
          ("bearer ", "bearer\t", "token ", "token\t"), fold=True, keep=True),
)


class _Compiled:
    def __init__(self, rule: _Rule, as_bytes: bool) -> None:
        self.rule = rule
        encode = (lambda x: x.encode()) if as_bytes else (lambda x: x)
        self.regex = re.compile(encode(rule.pattern))
        self.triggers = tuple(encode(t) for t in rule.triggers)
        self.mark = encode(MARK)

    def applies(self, value: Any, folded: Callable[[], Any], seen: dict[Any, bool]) -> bool:
        if not self.triggers:
            return True
        if self.triggers not in seen:  # rules sharing triggers scan for them once
            haystack = folded() if self.rule.fold else value
            seen[self.triggers] = any(t in haystack for t in self.triggers)
        return seen[self.triggers]

    def start(self, match: re.Match) -> int:
        """Where the secret itself starts (after a kept prefix)."""
        return match.start(1) + len(match.group(1)) if self.rule.keep else match.start()

    def is_secret(self, match: re.Match) -> bool:
        if not self.rule.boundary or match.start() == 0:
            return True
        before = match.string[match.start() - 1]
        before = before if isinstance(before, int) else ord(before)
        return before not in _TOKEN_CHARS

    def sub(self, value: Any) -> tuple[Any, list[tuple[int, int]]]:
        """Replace every secret; also return the replaced spans (in ``value`` coordinates)."""
        spans: list[tuple[int, int]] = []
        pieces = []
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


_TEXT_RULES = [_Compiled(rule, as_bytes=False) for rule in _RULES]
_BYTES_RULES = [_Compiled(rule, as_bytes=True) for rule in _RULES]


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


def _apply(value: Any, rules: list[_Compiled]) -> tuple[Any, list[list[tuple[int, int]]]]:
    layers = []
    if not value or not may_hold_secret(value):
        return value, layers
    lowered: list[Any] = []  # value.lower(), made once and only if a case-folding rule asks

    def folded() -> Any:
        if not lowered:
            lowered.append(value.lower())
        return lowered[0]

    seen: dict[Any, bool] = {}
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
    return _apply(text, _TEXT_RULES)[0]


def redact_bytes(raw: bytes) -> bytes:
    """The same for raw wire bytes (SSE, JSON lines, a JSON body), before anything parses them."""
    if isinstance(raw, str):
        return redact_text(raw)
    return _apply(raw, _BYTES_RULES)[0]


class WireLines:
    """Wire bytes as they arrive, redacted a whole line at a time (a credential never spans
    lines, so this redacts what a redaction of the whole body would): ``feed`` returns the
    complete lines so far, redacted; ``close`` the rest."""

    def __init__(self) -> None:
        # The start of a line not yet ended, in pieces: only a new piece is searched for a line
        # end, and the pieces are joined once, when it comes (a 100 MB line arriving in 16 kB
        # reads was otherwise copied and searched whole at each read).
        self._pending: list[bytes] = []
        self.pending = 0  # bytes held

    def feed(self, chunk: bytes) -> bytes:
        cut = max(chunk.rfind(b"\n"), chunk.rfind(b"\r")) + 1
        if not cut:
            if chunk:
                self._pending.append(chunk)
                self.pending += len(chunk)
            return b""
        data = b"".join([*self._pending, chunk[:cut]])
        rest = chunk[cut:]
        self._pending, self.pending = ([rest], len(rest)) if rest else ([], 0)
        return redact_bytes(data)

    def close(self) -> bytes:
        rest = b"".join(self._pending)
        self._pending, self.pending = [], 0
        return redact_bytes(rest) if rest else b""


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


# -- wire recordings (kept for exact replay) ---------------------------------------------------


def _secret_spans(text: str) -> list[tuple[int, int]]:
    """Where ``text`` holds secrets, in its own coordinates (every rule run on the original
    text, spans merged), for texts that are pieces of one another (stream deltas)."""
    if not may_hold_secret(text):
        return []
    spans = sorted(
        (rule.start(m), m.end())
        for rule in _TEXT_RULES for m in rule.regex.finditer(text) if rule.is_secret(m)
    )
    merged: list[tuple[int, int]] = []
    for start, end in spans:
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        elif end > start:
            merged.append((start, end))
    return merged


def _leaves(value: Any, path: tuple[Any, ...], out: list[tuple[tuple[Any, ...], Any, Any]],
            parent: Any = None, key: Any = None) -> None:
    if isinstance(value, str):
        out.append((path, parent, key))
    elif isinstance(value, dict):
        for k, v in value.items():
            _leaves(v, (*path, k), out, value, k)
    elif isinstance(value, list):
        for i, v in enumerate(value):
            _leaves(v, (*path, i), out, value, i)


def _frame_json(line: bytes) -> tuple[bytes, bytes, bytes] | None:
    """``(prefix, json, line end)`` of a wire line that carries one JSON event (an SSE
    ``data:`` line or a JSON line), else None."""
    body = line.rstrip(b"\r\n")
    end = line[len(body):]
    if body.startswith(b"data:"):
        prefix = b"data: " if body.startswith(b"data: ") else b"data:"
    elif body.lstrip()[:1] in (b"{", b"["):
        prefix = body[:len(body) - len(body.lstrip())]
    else:
        return None
    return prefix, body[len(prefix):], end


# What names the block an event continues (Anthropic's index, OpenAI's item and part): strings
# at the same place in events of one block are pieces of one text.
_BLOCK_KEYS = ("index", "output_index", "content_index", "item_id")


# Digests of wire bytes found to hold no credential: a recording replayed again (the live demo's
# samples, a re-run) is not parsed and scanned again. Bounded; emptied when full.
_CLEAN_WIRE: dict[bytes, None] = {}
_CLEAN_WIRE_MAX = 4096


def redact_wire(raw: bytes) -> bytes:
    """Recorded wire bytes (SSE, JSON lines, a JSON document) with every credential redacted,
    including one split across stream events: the strings at the same place in successive
    events (a block's text deltas, a tool's input deltas) are read joined, and each piece of a
    secret is cut out of the event that carries it (the first piece becomes ``[REDACTED]``).
    Only the events that change are re-encoded; the result stays valid SSE / JSON."""
    if isinstance(raw, str):
        return redact_wire(raw.encode()).decode()
    digest = hashlib.blake2b(raw, digest_size=16).digest()
    if digest in _CLEAN_WIRE:
        return raw
    redacted = _redact_wire(raw)
    if redacted == raw:
        if len(_CLEAN_WIRE) >= _CLEAN_WIRE_MAX:
            _CLEAN_WIRE.clear()
        _CLEAN_WIRE[digest] = None
    return redacted


def _redact_wire(raw: bytes) -> bytes:
    lines = raw.splitlines(keepends=True)
    frames: list[tuple[int, bytes, bytes, Any]] = []  # (line index, prefix, end, data)
    whole = None
    stripped = raw.strip()
    if stripped[:1] == b"[":
        with contextlib.suppress(orjson.JSONDecodeError):
            whole = orjson.loads(stripped)  # a saved stream as one JSON array
    if isinstance(whole, list):
        frames = [(-1, b"", b"", item) for item in whole]
    else:
        for n, line in enumerate(lines):
            parsed = _frame_json(line)
            if parsed is None:
                continue
            with contextlib.suppress(orjson.JSONDecodeError):
                frames.append((n, parsed[0], parsed[2], orjson.loads(parsed[1])))
    groups: dict[tuple[Any, ...], list[tuple[int, Any, Any]]] = {}
    for i, (_n, _p, _e, data) in enumerate(frames):
        found: list[tuple[tuple[Any, ...], Any, Any]] = []
        _leaves(data, (), found)
        block = tuple(data.get(k) for k in _BLOCK_KEYS) if isinstance(data, dict) else ()
        for path, parent, key in found:
            groups.setdefault((block, path), []).append((i, parent, key))
    changed: set[int] = set()
    for pieces in groups.values():
        if len(pieces) < 2:
            continue  # a secret within one string is redacted with the bytes below
        texts = [parent[key] for _i, parent, key in pieces]
        spans = _secret_spans("".join(texts))
        if not spans:
            continue
        offset = 0
        for (i, parent, key), text in zip(pieces, texts, strict=True):
            start, end = offset, offset + len(text)
            offset = end
            out, last = [], 0
            for s, e in spans:
                if e <= start or s >= end:
                    continue
                a, b = max(s, start) - start, min(e, end) - start
                out += [text[last:a], MARK if s >= start else ""]
                last = b
            if out:
                parent[key] = "".join(out) + text[last:]
                changed.add(i)
    if not changed:
        return redact_bytes(raw)
    if whole is not None:
        return redact_bytes(orjson.dumps(whole))
    for i in changed:
        n, prefix, end, data = frames[i]
        lines[n] = prefix + orjson.dumps(data) + end
    return redact_bytes(b"".join(lines))


# -- redaction with an offset map (texts that attribution ranges address) ----------------------


def redact_with_map(text: str) -> tuple[str, Callable[[int, bool], int]]:
    """Redact ``text`` and return a function mapping a code-point offset in the original text to
    one in the redacted text. An offset inside a redacted secret snaps outward (a range start to
    the marker's start, a range end to the marker's end), so a range never collapses."""
    redacted, layers = _apply(text, _TEXT_RULES)
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


# -- records and documents ---------------------------------------------------------------------


def _any_secret(records: list[Any]) -> bool:
    """Whether any record may hold a credential: two scans over all of them at once (plain texts
    joined by newlines, structured values as one JSON text) instead of a dozen rules per string.
    A false positive only costs the careful walk."""
    texts: list[str] = []
    values: list[Any] = []
    for record in records:
        texts.append(record.text)
        values += (record.body.to_body(), record.payload.value if record.payload else None)
        for a in record.attributions:
            texts += (a.url, a.title, a.excerpt)
            values.append(a.replay.value if a.replay else None)
    joined = "\n".join(texts)
    if redact_text(joined) != joined:
        return True
    return redact_value(values) is not values


def redact_records(records: Iterable[Any]) -> list[Any]:
    """Redact assembled ``EventRecord``s in place (texts, bodies, attributions, payload values),
    keeping every attribution range pointed at the same characters of the redacted text."""
    records = list(records)
    if not _any_secret(records):
        return records
    out = []
    for record in records:
        text, remap = redact_with_map(record.text)
        if text is not record.text:
            record.text = text
            for a in record.attributions:
                if a.start is not None and a.end is not None:
                    a.start, a.end = remap(a.start, False), remap(a.end, True)
        body = record.body.to_body()
        clean = redact_value(body)
        if clean is not body:
            record.body = type(record.body).from_body(clean)
        for a in record.attributions:
            a.url, a.title, a.excerpt = redact_text(a.url), redact_text(a.title), redact_text(
                a.excerpt)
            a.replay = _redact_payload(a.replay)
        record.payload = _redact_payload(record.payload)
        out.append(record)
    return out


def _redact_payload(payload: Any) -> Any:
    if payload is None:
        return None
    value = redact_value(payload.value)
    if value is payload.value:
        return payload
    return type(payload)(payload.provider, payload.format, payload.version, value)


def redact_document(doc: Any) -> Any:
    """An export document (either projection) with credentials redacted; message ranges are
    remapped onto the redacted text. Returns ``doc`` itself when nothing was found."""
    if not isinstance(doc, dict) or not isinstance(doc.get("turns"), list):
        return redact_value(doc)
    turns = doc["turns"]
    new_turns = []
    for turn in turns:
        if not isinstance(turn, dict) or not isinstance(turn.get("events"), list):
            new_turns.append(redact_value(turn))
            continue
        events = [_redact_event(e) for e in turn["events"]]
        rest = redact_value({k: v for k, v in turn.items() if k != "events"})
        new_turns.append({**rest, "events": events})
    rest = redact_value({k: v for k, v in doc.items() if k != "turns"})
    out = {**rest, "turns": new_turns}
    return doc if out == doc else out


def _redact_event(event: Any) -> Any:
    if not isinstance(event, dict) or event.get("kind") != "message" or not isinstance(
        event.get("text"), str
    ):
        return redact_value(event)
    text, remap = redact_with_map(event["text"])
    attributions = event.get("attributions")
    if text is not event["text"] and isinstance(attributions, list):
        remapped = []
        for a in attributions:
            span = a.get("range") if isinstance(a, dict) else None
            if isinstance(span, dict) and isinstance(span.get("start"), int) and isinstance(
                span.get("end"), int
            ):
                a = {**a, "range": {**span, "start": remap(span["start"], False),
                                    "end": remap(span["end"], True)}}
            remapped.append(a)
        attributions = remapped
    rest = redact_value({k: v for k, v in event.items() if k not in {"text", "attributions"}})
    out = {**rest, "text": text}
    if "attributions" in event:
        out["attributions"] = redact_value(attributions)
    return out


# -- log lines ----------------------------------------------------------------------------------

# Tokens in a URL's path: the recording proxy's path-form API token (``/proxy/t/<token>/…``)
# and a shared link's (``/s/<token>/…``, ``/api/v1/shares/<token>``). ``/s/`` is matched
# anywhere: a stray ``/s/`` in some other URL loses its next segment to the mask, which costs
# a log reader less than a share's token would cost its owner.
_PATH_TOKEN = re.compile(r"(/proxy/t/|/s/|/api/v1/shares/)[^/\s?#\"']+")
_PATH_TOKEN_HINTS = ("/proxy/t/", "/s/", "/api/v1/shares/")
# A URL's query string in a log line (a request line, an access log entry).
_QUERY = re.compile(r"\?[^\s\"'#<>]+")


def _redact_query(match: re.Match[str]) -> str:
    """Each parameter read as a client sent it (percent-decoded: ``Bearer+…``, ``%3A``): a
    value that holds a credential once decoded is logged as ``[REDACTED]``."""
    params = []
    for param in match.group()[1:].split("&"):
        name, eq, value = param.partition("=")
        decoded = unquote_plus(value)
        if eq and (redact_text(decoded) != decoded or redact_text(f"?{name}=x") != f"?{name}=x"):
            value = MARK
        params.append(f"{name}{eq}{value}")
    return "?" + "&".join(params)


def redact_log_line(text: str) -> str:
    """A log line with every credential redacted: the rules above, the query parameters of any
    URL in it as decoded, and the tokens in paths (the proxy's, a share's) masked. Every log
    line and daphne's access log go through this one function."""
    if any(hint in text for hint in _PATH_TOKEN_HINTS):
        text = _PATH_TOKEN.sub(lambda m: m.group(1) + MARK, text)
    if "?" in text:
        text = _QUERY.sub(_redact_query, text)
    return redact_text(text)


class RedactingFilter(logging.Filter):
    """A logging filter that redacts the formatted message (attach it to handlers)."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        cleaned = redact_log_line(message)
        if cleaned != message:
            record.msg, record.args = cleaned, None
        return True


# -- text shown while it streams ---------------------------------------------------------------

# (multi-line: searched from the start of the current line, which ``^`` must match)
_HEADER_LINE = re.compile(rf'(?im)^[ \t-]*(?:{_HEADERS})[ \t]*:|"(?:{_HEADERS})"\s*:')
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
