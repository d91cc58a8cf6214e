"""Keys split across stream chunks at every offset: a stream that carries them, and the checks
that nothing stored or exported keeps any piece of them (issue 11, item 1).

One Anthropic stream holds, for every secret shape and every offset inside it, a text block, a
thinking block and a tool call whose deltas split the secret there. What is stored must be
exactly what the same texts redacted unsplit give.
"""

from __future__ import annotations

import re

import orjson

from conversations.models import Conversation
from conversations.projections import export_document
from guards import redaction
from tests.api.test_secrets import HEADER_LINE, SECRETS, URL_SECRET, database_text

# Every key shape of tests.api.test_secrets, a key-bearing URL, a header line, and a bearer
# token whose alphabet's "/" comes right after a split.
SPLIT_SECRETS = [*SECRETS, f"https://generativelanguage.example/v1?{URL_SECRET}", HEADER_LINE,
                 "Bearer Q7xK3Bearer/Token0123456789abcdef+xyz/AB"]

# The failure this guards against: a redaction followed by the rest of the key.
_LEFTOVER = re.compile(r"\[REDACTED\][A-Za-z0-9_\-]")


def sentence(secret: str) -> str:
    return f"{secret}\nend." if secret == HEADER_LINE else f"my key {secret} end."


def split_cases() -> list[tuple[str, int]]:
    """(secret, offset) for every offset strictly inside every secret."""
    return [(s, i) for s in SPLIT_SECRETS for i in range(1, len(s))]


def _line(value: object) -> bytes:
    return orjson.dumps(value) + b"\n"


def split_stream(cases: list[tuple[str, int]] | None = None) -> bytes:
    """JSON lines of one Anthropic response, three blocks per case (text, thinking, tool)."""
    out = [_line({"type": "message_start", "message": {
        "id": "msg_split", "type": "message", "role": "assistant", "model": "claude-split-1",
        "content": [], "usage": {"input_tokens": 1, "output_tokens": 1}}})]
    index = 0
    for secret, offset in cases if cases is not None else split_cases():
        text = sentence(secret)
        cut = text.index(secret) + offset
        tool_json = orjson.dumps({"q": text}).decode()
        tool_cut = tool_json.index(secret) + offset
        blocks = [
            ({"type": "text", "text": ""}, "text_delta", "text", [text[:cut], text[cut:]]),
            ({"type": "thinking", "thinking": ""}, "thinking_delta", "thinking",
             [text[:cut], text[cut:]]),
            ({"type": "tool_use", "id": f"toolu_{index}", "name": "lookup", "input": {}},
             "input_json_delta", "partial_json", [tool_json[:tool_cut], tool_json[tool_cut:]]),
        ]
        for start, delta_type, field, pieces in blocks:
            out.append(_line({"type": "content_block_start", "index": index,
                              "content_block": start}))
            for piece in pieces:
                out.append(_line({"type": "content_block_delta", "index": index,
                                  "delta": {"type": delta_type, field: piece}}))
            if delta_type == "thinking_delta":
                out.append(_line({"type": "content_block_delta", "index": index,
                                  "delta": {"type": "signature_delta", "signature": "EqQBsig=="}}))
            out.append(_line({"type": "content_block_stop", "index": index}))
            index += 1
    out.append(_line({"type": "message_delta", "delta": {"stop_reason": "end_turn"},
                      "usage": {"output_tokens": 2}}))
    out.append(_line({"type": "message_stop"}))
    return b"".join(out)


def as_sse(jsonl: bytes) -> bytes:
    """The same events as server-sent events (what the API streams)."""
    out = []
    for line in jsonl.splitlines():
        event = orjson.loads(line)["type"]
        out.append(b"event: " + event.encode() + b"\ndata: " + line + b"\n\n")
    return b"".join(out)


def leaks(text: str, where: str) -> list[str]:
    """Pieces of any split secret in ``text``: a redaction followed by key characters, or any
    8 characters that end a secret (what a redaction of the first chunk leaves behind)."""
    found = [f"{where}: {m.group()!r}" for m in _LEFTOVER.finditer(text)][:5]
    for secret in SPLIT_SECRETS:
        for i in range(len(secret) - 7):
            tail = secret[i:]
            if tail in text:
                found.append(f"{where}: …{tail!r}")
                break
    return found


def assert_nothing_kept(conversation: Conversation, cases: list[tuple[str, int]]) -> None:
    """Every stored text, attribution, payload and recording, and every export: the split
    secrets are redacted exactly as unsplit, and no piece of one is left anywhere."""
    turn = conversation.turns.get(role="agent")
    events = list(turn.events.order_by("seq").select_related("payload"))
    by_kind: dict[str, list] = {}
    for event in events:
        by_kind.setdefault(event.kind, []).append(event)
    expected = [redaction.redact_text(sentence(s)) for s, _i in cases]
    assert [e.text for e in by_kind["message"]] == expected
    assert [e.text for e in by_kind["reasoning"]] == expected
    assert [e.typed_body.to_body()["call"]["arguments"] for e in by_kind["tool_call_request"]
            ] == [redaction.redact_value({"q": sentence(s)}) for s, _i in cases]
    found = leaks("\n".join(v for _t, _c, v in database_text()), "database")
    for fmt, projection in (("json", "native"), ("json", "portable"), ("markdown", "portable"),
                            ("html", "portable")):
        found += leaks(export_document(conversation, fmt, projection).decode(), fmt)
    assert not found, "\n".join(found[:20])
