"""What a recorded upstream served, and whether a request sends it back unchanged.

A provider that gets its own earlier output back (the paused message after ``pause_turn``, the
previous answer before the next question) checks it: a thinking block whose signature does not
verify, a search result without its ``encrypted_content`` or a Gemini part without its
``thoughtSignature`` is refused. ``RecordedUpstream(verify_replay=True)`` does the same with
``refusal``: it keeps the content of every response it served and answers 400, in the
provider's error shape, a request that sends any of it back changed, cut or reordered.

The served content is rebuilt here from the wire the way a provider's SDK accumulates it,
independently of the adapters' stream parsers (which the request side relies on), so a lossy
parser or request builder is caught rather than agreed with:

* Anthropic: ``message.content`` (a body, or what ``message_start`` holds), then each streamed
  block from its ``content_block_start`` with its deltas applied (text, thinking, signature,
  citations, tool input JSON). A text block with no text and no citations is no content. A
  stream cut before ``message_stop`` gave the client no whole message: nothing is checked.
* OpenAI Responses: each ``response.output_item.done`` item (a body: ``output``); the item the
  final ``response.completed`` holds for the same id is accepted too. Chat Completions: the
  assistant message (its content and tool calls; annotations are output only), the deltas put
  together.
* Gemini: the parts of every chunk's first candidate (a stream with no ``finishReason`` was
  cut: nothing is checked). Consecutive text parts of one kind (thought or not) are one run: a
  client may send them merged or as received, so runs are compared by their text and the
  signatures they carry; an empty run carries nothing. A function call whose arguments stream
  (``willContinue``, ``partialArgs``) is the whole call its pieces make.

A served response counts as sent back when the request holds one of its blocks (by id, tool use
id, signature, data or text) or its text inside an assistant message; it must then be there
whole, in order and contiguous, every field as served (null and absent fields are the same).

A response the client hung up on before its last byte (``Served.cut``: Stop, a dropped
connection) was never held whole, so it may come back as what each provider's documentation
accepts after a cut answer, and in no other form:

* Anthropic ("Streaming messages" > "Error recovery", platform.claude.com: "Tool use and
  extended thinking blocks cannot be partially recovered. You can resume streaming from the
  most recent text block"): its first blocks whole and unchanged, then at most the text that
  streamed of the text block it was cut in. A server tool use whose result never came is left
  out ("Server tools": the result block follows the ``server_tool_use`` in the same assistant
  turn); a thinking block cut before its signature is not a whole block.
* OpenAI Responses: its first output items as done, then at most the text that streamed of
  the message it was cut in; a reasoning item whose following item never came is left out
  (the API refuses "Item 'rs_…' of type 'reasoning' was provided without its required
  following item"; the reasoning guide: reasoning items of earlier turns are dropped anyway).
* Gemini ("Thought signatures", ai.google.dev: a signature goes back exactly where it came;
  only function calls are validated strictly): its first runs as served, then at most a
  prefix of the run it was cut in, with the signatures that had arrived.

Whatever was served, Anthropic's pairing rule holds for every request ("Each `tool_use` block
must have a corresponding `tool_result` block in the next message"; a ``server_tool_use``'s
result in the same message): only the last message may hold a server tool use left open (a
``pause_turn`` continuation).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import orjson

from providers.wire import DONE, MalformedInput, read


@dataclass(frozen=True)
class Served:
    """One response's content as the client holds it: ``blocks`` in order (Anthropic content
    blocks, Responses output items, Gemini parts), and accepted variants by item id."""

    provider: str
    blocks: tuple[dict[str, Any], ...]
    variants: tuple[tuple[str, dict[str, Any]], ...] = ()
    api: str = ""  # "chat" for Chat Completions (a Responses client never sends it back)
    cut: bool = False  # the client hung up before the last byte: it holds a part of it


def served_content(provider: str, body: bytes) -> Served | None:
    """The content of one served response body (None when it holds none: an error)."""
    try:
        return _served(provider, [data for _, data, _ in read(body).rows if data is not DONE])
    except (MalformedInput, KeyError, TypeError, AttributeError, orjson.JSONDecodeError):
        return None  # not a response this rebuild can read: nothing to check it against


def _served(provider: str, rows: list[Any]) -> Served | None:
    if provider == "anthropic":
        blocks = _anthropic(rows)
        return Served(provider, tuple(blocks)) if blocks is not None else None
    if provider == "openai":
        if any(isinstance(r, dict) and str(r.get("object", "")).startswith("chat.completion")
               for r in rows):
            return _chat(rows)
        return _openai(rows)
    if provider == "google":
        finished = any(_finish_reason(row) for row in rows)
        parts = _gemini_calls([part for row in rows for part in _gemini_parts(row)])
        return Served(provider, tuple(parts)) if parts and finished else None
    return None


# -- rebuilding what was served --------------------------------------------------------------


def _anthropic(rows: list[Any]) -> list[dict[str, Any]] | None:
    blocks: dict[int, dict[str, Any]] = {}
    json_input: dict[int, str] = {}
    whole: list[dict[str, Any]] = []
    seen = False
    for row in rows:
        if not isinstance(row, dict):
            continue
        kind = row.get("type")
        if kind == "message":
            seen = True
            whole = [b for b in row.get("content") or () if isinstance(b, dict)]
        elif kind == "message_stop":
            seen = True
        elif kind == "message_start":
            message = row.get("message") or {}
            whole = [b for b in message.get("content") or () if isinstance(b, dict)]
        elif kind == "content_block_start":
            blocks[row["index"]] = dict(row["content_block"])
        elif kind == "content_block_delta":
            block, delta = blocks[row["index"]], row.get("delta") or {}
            dtype = delta.get("type")
            if dtype == "text_delta":
                block["text"] = block.get("text", "") + delta.get("text", "")
            elif dtype == "thinking_delta":
                block["thinking"] = block.get("thinking", "") + delta.get("thinking", "")
            elif dtype == "signature_delta":
                block["signature"] = block.get("signature", "") + delta.get("signature", "")
            elif dtype == "citations_delta":
                block["citations"] = [*(block.get("citations") or ()), delta.get("citation")]
            elif dtype == "input_json_delta":
                json_input[row["index"]] = (json_input.get(row["index"], "")
                                            + delta.get("partial_json", ""))
    if not seen:
        return None
    for index, raw in json_input.items():
        if raw.strip():
            blocks[index]["input"] = orjson.loads(raw)
    content = [*whole, *(blocks[i] for i in sorted(blocks))]
    return [b for b in content
            if not (b.get("type") == "text" and not b.get("text") and not b.get("citations"))]


def _openai(rows: list[Any]) -> Served | None:
    done: list[dict[str, Any]] = []
    final: list[dict[str, Any]] = []
    for row in rows:
        if not isinstance(row, dict):
            continue
        kind = row.get("type")
        if kind == "response.output_item.done" and isinstance(row.get("item"), dict):
            done.append(row["item"])
        elif kind in ("response.completed", "response.incomplete"):
            final = [i for i in (row.get("response") or {}).get("output") or ()
                     if isinstance(i, dict)]
        elif row.get("object") == "response":  # a body
            final = [i for i in row.get("output") or () if isinstance(i, dict)]
    blocks = done or final
    if not blocks:
        return None
    variants = tuple((str(item.get("id")), item) for item in final if done and item.get("id"))
    return Served("openai", tuple(blocks), variants)


def _finish_reason(row: Any) -> bool:
    candidates = row.get("candidates") if isinstance(row, dict) else None
    first = candidates[0] if isinstance(candidates, list) and candidates else None
    return isinstance(first, dict) and bool(first.get("finishReason"))


def _gemini_calls(parts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Streamed function-call arguments put together: the call with its ``args``."""
    out: list[dict[str, Any]] = []
    open_call: dict[str, Any] | None = None
    for part in parts:
        call = part.get("functionCall")
        if not isinstance(call, dict):
            out.append(part)
            continue
        if open_call is None and call.get("willContinue") and "args" not in call:
            open_call = {k: v for k, v in part.items() if k != "functionCall"}
            open_call["functionCall"] = {k: v for k, v in call.items() if k != "willContinue"}
            open_call["functionCall"]["args"] = {}
            out.append(open_call)
            continue
        if open_call is not None:
            args = open_call["functionCall"]["args"]
            for piece in call.get("partialArgs") or ():
                _put(args, str(piece.get("jsonPath", "")), piece)
            if not call.get("willContinue"):
                open_call = None
            continue
        out.append(part)
    return out


def _put(args: dict[str, Any], path: str, piece: dict[str, Any]) -> None:
    keys = path.removeprefix("$.").split(".") if path.startswith("$.") else [path]
    target = args
    for key in keys[:-1]:
        target = target.setdefault(key, {})
    last = keys[-1]
    if "stringValue" in piece:
        target[last] = str(target.get(last, "")) + piece["stringValue"]
    else:
        for name in ("numberValue", "boolValue", "nullValue"):
            if name in piece:
                target[last] = None if name == "nullValue" else piece[name]


def _chat(rows: list[Any]) -> Served | None:
    content: list[str] = []
    calls: dict[int, dict[str, Any]] = {}
    for row in rows:
        choices = row.get("choices") if isinstance(row, dict) else None
        first = choices[0] if isinstance(choices, list) and choices else None
        if not isinstance(first, dict):
            continue
        message = first.get("message") or first.get("delta") or {}
        if isinstance(message.get("content"), str):
            content.append(message["content"])
        for n, call in enumerate(message.get("tool_calls") or ()):
            index = call.get("index", n)
            known = calls.setdefault(index, {"type": "function", "function": {
                "name": "", "arguments": ""}})
            if call.get("id"):
                known["id"] = call["id"]
            function = call.get("function") or {}
            known["function"]["name"] += function.get("name") or ""
            known["function"]["arguments"] += function.get("arguments") or ""
    message = {"role": "assistant"}
    if "".join(content):
        message["content"] = "".join(content)
    if calls:
        message["tool_calls"] = [calls[i] for i in sorted(calls)]
    if len(message) == 1:
        return None
    return Served("openai", (message,), api="chat")


def _gemini_parts(row: Any) -> Iterator[dict[str, Any]]:
    if not isinstance(row, dict):
        return
    candidates = row.get("candidates")
    if not isinstance(candidates, list) or not candidates:
        return
    content = candidates[0].get("content") if isinstance(candidates[0], dict) else None
    for part in (content or {}).get("parts") or ():
        if isinstance(part, dict):
            yield part


# -- comparing -------------------------------------------------------------------------------


def _clean(value: Any) -> Any:
    """Null and absent are the same; key order does not matter (compared as sorted JSON)."""
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_clean(v) for v in value]
    return value


def _gemini_runs(parts: Iterable[dict[str, Any]]) -> list[Any]:
    """Gemini parts with consecutive text parts of one kind merged into one run: (thought,
    text, the signatures in it); other parts as they are."""
    runs: list[Any] = []
    for part in parts:
        if isinstance(part.get("text"), str) and set(part) <= {"text", "thought",
                                                                "thoughtSignature"}:
            thought = bool(part.get("thought"))
            signature = part.get("thoughtSignature")
            last = runs[-1] if runs else None
            if isinstance(last, dict) and last.get("run") == thought:
                last["text"] += part["text"]
                if signature:
                    last["signatures"].append(signature)
                continue
            runs.append({"run": thought, "text": part["text"],
                         "signatures": [signature] if signature else []})
        else:
            runs.append(_clean(part))
    return [r for r in runs if not (isinstance(r, dict) and r.get("run") is not None
                                    and not r["text"] and not r["signatures"])]


def _keys(provider: str, block: dict[str, Any]) -> set[str]:
    """What identifies a served block when it comes back."""
    keys = set()
    for name in ("id", "tool_use_id", "signature", "data", "thoughtSignature",
                 "encrypted_content"):
        value = block.get(name)
        if isinstance(value, str) and value:
            keys.add(f"{name}:{value}")
    for nested in ("functionCall", "toolCall", "toolResponse", "functionResponse"):
        inner = block.get(nested)
        if isinstance(inner, dict) and isinstance(inner.get("id"), str):
            keys.add(f"{nested}:{inner['id']}")
    for call in block.get("tool_calls") or ():  # Chat Completions
        if isinstance(call, dict) and isinstance(call.get("id"), str):
            keys.add(f"tool_call:{call['id']}")
    return keys


def _text(provider: str, block: dict[str, Any]) -> str:
    if provider == "openai":
        content = block.get("content")
        if isinstance(content, str):  # an easy input message: text alone
            return content
        return "".join(c.get("text", "") for c in content or ()
                       if isinstance(c, dict) and c.get("type") in ("output_text", "input_text"))
    if provider == "google":
        return "" if block.get("thought") else str(block.get("text") or "")
    return str(block.get("text") or "") if block.get("type") == "text" else ""


def _sent_back(provider: str, body: Any) -> list[list[dict[str, Any]]]:
    """The request's model-side messages, each as its blocks (items, parts)."""
    if not isinstance(body, dict):
        return []
    if provider == "anthropic":
        return [[b for b in m.get("content") or () if isinstance(b, dict)]
                for m in body.get("messages") or ()
                if isinstance(m, dict) and m.get("role") == "assistant"
                and isinstance(m.get("content"), list)]
    if provider == "google":
        return [[p for p in c.get("parts") or () if isinstance(p, dict)]
                for c in body.get("contents") or ()
                if isinstance(c, dict) and c.get("role") == "model"]
    if isinstance(body.get("messages"), list):  # Chat Completions: each assistant message
        return [[{k: v for k, v in m.items() if k in ("role", "content", "tool_calls")}
                 for m in body["messages"]
                 if isinstance(m, dict) and m.get("role") == "assistant"]]
    items = body.get("input")
    if not isinstance(items, list):
        return []
    return [[i for i in items if isinstance(i, dict) and i.get("role") != "user"]]


_QUOTED = 16  # characters of an assistant message found in a served text: that text, sent back


def _contains(haystack: list[bytes], needle: list[bytes]) -> bool:
    n = len(needle)
    return any(haystack[i:i + n] == needle for i in range(len(haystack) - n + 1))


def refusal(provider: str, body: Any, served: Iterable[Served]) -> str | None:
    """Why the request ``body`` must be refused: a rule of the provider's it breaks, or the
    first served response it sends back changed; None when it sends every one it refers to
    back in a form the provider accepts."""
    try:
        return _unpaired(provider, body) or _refusal(provider, body, served)
    except (TypeError, AttributeError, ValueError):
        return "the request's messages are not in the provider's shape"


_CLIENT_TOOL_USE = "tool_use"
_SERVER_TOOL_USES = ("server_tool_use", "mcp_tool_use")


def _unpaired(provider: str, body: Any) -> str | None:
    """The pairing rules every request must keep, whatever was served: Anthropic's tool uses
    and their results, OpenAI's reasoning items and what follows them, and (``store`` false)
    reasoning that cannot be found without its ``encrypted_content``."""
    if not isinstance(body, dict):
        return None
    if provider == "anthropic" and isinstance(body.get("messages"), list):
        return _anthropic_unpaired(body["messages"])
    if provider == "openai" and isinstance(body.get("input"), list):
        return _openai_unpaired(body["input"], body.get("store"))
    return None


def _anthropic_unpaired(messages: list[Any]) -> str | None:
    # "Each `tool_use` block must have a corresponding `tool_result` block in the next
    # message" (the API's words); a server tool's result follows it in the same assistant
    # message, unless that message is the last (a pause_turn continuation) or also calls a
    # client tool, whose result makes the API run it ("Server tools", platform.claude.com).
    for n, message in enumerate(messages):
        if not isinstance(message, dict) or message.get("role") != "assistant":
            continue
        blocks = [b for b in message.get("content") or () if isinstance(b, dict)]
        if n == len(messages) - 1:
            continue
        after = messages[n + 1] if isinstance(messages[n + 1], dict) else {}
        answered = {b.get("tool_use_id") for b in after.get("content") or ()
                    if isinstance(b, dict) and b.get("type") == "tool_result"}
        here = {b.get("tool_use_id") for b in blocks if b.get("tool_use_id")}
        calls_client = any(b.get("type") == _CLIENT_TOOL_USE for b in blocks)
        for block in blocks:
            kind, ident = block.get("type"), block.get("id")
            if kind == _CLIENT_TOOL_USE and ident not in answered:
                return (f"messages.{n}: `tool_use` ids were found without `tool_result` "
                        f"blocks immediately after: {ident}")
            if kind in _SERVER_TOOL_USES and ident not in here and not calls_client:
                return (f"messages.{n}: the `{kind}` {ident} has no result in its message "
                        "(only the last message may leave a server tool use open)")
    return None


def _openai_unpaired(items: list[Any], store: Any) -> str | None:
    for n, item in enumerate(items):
        if not isinstance(item, dict) or item.get("type") != "reasoning":
            continue
        following = items[n + 1] if n + 1 < len(items) else None
        if not isinstance(following, dict) or following.get("role") in ("user", "system",
                                                                          "developer"):
            return (f"Item '{item.get('id')}' of type 'reasoning' was provided without its "
                    "required following item.")
        if store is False and not item.get("encrypted_content"):
            return (f"Item with id '{item.get('id')}' not found. Items are not persisted when "
                    "`store` is set to false.")
    return None


@dataclass(frozen=True)
class _Unit:
    """One block (item, Gemini run) as compared: its canonical form, what identifies it, its
    text, and the block itself."""

    canonical: bytes
    keys: frozenset[str]
    text: str
    block: dict[str, Any]


def _units(provider: str, blocks: Iterable[dict[str, Any]]) -> list[_Unit]:
    if provider == "google":
        out = []
        for run in _gemini_runs(blocks):
            if isinstance(run, dict) and "run" in run:
                keys = frozenset(f"thoughtSignature:{s}" for s in run["signatures"])
                text = "" if run["run"] else run["text"]
            else:
                keys, text = frozenset(_keys(provider, run)), _text(provider, run)
            out.append(_Unit(_dumps(run), keys, text, run))
        return out
    return [_Unit(_dumps(_clean(b)), frozenset(_keys(provider, b)), _text(provider, b), b)
            for b in blocks]


def _dumps(value: Any) -> bytes:
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)


def _canonical(provider: str, blocks: Iterable[dict[str, Any]]) -> list[bytes]:
    return [u.canonical for u in _units(provider, blocks)]


def _recoverable(provider: str, units: list[_Unit], whole: int) -> list[_Unit]:
    """What of a cut response's first ``whole`` blocks may go back: Anthropic's tool uses
    whose result never came are left out (a client one is the pairing rule's to judge);
    OpenAI's reasoning item whose following item never came is left out."""
    prefix = units[:whole]
    if provider == "anthropic":
        answered = {u.block.get("tool_use_id") for u in prefix}
        return [u for u in prefix if u.block.get("type") not in (
            _CLIENT_TOOL_USE, *_SERVER_TOOL_USES) or u.block.get("id") in answered]
    if provider == "openai":
        while prefix and prefix[-1].block.get("type") == "reasoning":
            prefix = prefix[:-1]
    return prefix


def _cut_piece(provider: str, piece: _Unit, served: _Unit) -> bool:
    """Whether ``piece`` is what streamed of the served block a response was cut in."""
    if not piece.text and provider != "google":
        return False
    if provider == "anthropic":
        block, whole = piece.block, served.block
        cited = block.get("citations") or []
        return (block.get("type") == whole.get("type") == "text"
                and set(block) <= {"type", "text", "citations", "cache_control"}
                and str(whole.get("text", "")).startswith(piece.text)
                and _clean(cited) == _clean((whole.get("citations") or [])[:len(cited)]))
    if provider == "openai":
        block, whole = piece.block, served.block
        return (whole.get("type") == "message" and block.get("role") == "assistant"
                and block.get("type") in (None, "message")
                and _text(provider, whole).startswith(piece.text))
    run, whole = piece.block, served.block
    return (isinstance(run, dict) and isinstance(whole, dict) and "run" in run
            and run.get("run") == whole.get("run") and bool(run["text"] or run["signatures"])
            and whole["text"].startswith(run["text"])
            and whole["signatures"][:len(run["signatures"])] == run["signatures"])


def _cut_form(provider: str, response: Served, message: list[dict[str, Any]], body: Any
              ) -> bool:
    """Whether ``message`` holds the cut ``response`` as its provider accepts it: the part of
    the message that is the response's is its first blocks as ``_recoverable`` keeps them,
    then at most a cut piece of the next one."""
    units = _units(provider, message)
    served = _units(provider, _returnable(provider, response.blocks, body))
    keys = frozenset().union(*(u.keys for u in served))
    said = [u.text.strip() for u in served if u.text.strip()]

    def mine(unit: _Unit) -> bool:
        text = unit.text.strip()
        return bool(unit.keys & keys) or (bool(text) and any(
            text == s or (len(text) >= _QUOTED and text in s)
            or (len(s) >= _QUOTED and s in text) for s in said))

    if provider == "anthropic":  # a client tool use is the pairing rule's to judge
        units = [u for u in units if u.block.get("type") != _CLIENT_TOOL_USE]
    held = [n for n, u in enumerate(units) if mine(u)]
    if not held:
        return True
    span = [u.canonical for u in units[held[0]:held[-1] + 1]]
    for whole in range(len(served) + 1):
        expected = [u.canonical for u in _recoverable(provider, served, whole)
                    if not (provider == "anthropic"
                            and u.block.get("type") == _CLIENT_TOOL_USE)]
        if span == expected:
            return True
        if (whole < len(served) and span[:-1] == expected
                and _cut_piece(provider, units[held[-1]], served[whole])):
            return True
    return False


def _refusal(provider: str, body: Any, served: Iterable[Served]) -> str | None:
    messages = _sent_back(provider, body)
    if not messages:
        return None
    keys: set[str] = set()
    texts: list[str] = []
    for message in messages:
        for block in message:
            keys |= _keys(provider, block)
        texts.append("\n".join(_text(provider, b) for b in message))
    canonical = [_canonical(provider, message) for message in messages]
    api = "chat" if provider == "openai" and isinstance(body.get("messages"), list) else ""
    for number, response in enumerate(served):
        if response.provider != provider or response.api != api:
            continue
        mine = set().union(*(_keys(provider, b) for b in response.blocks))
        said = [t.strip() for t in (_text(provider, b) for b in response.blocks) if t.strip()]
        # Sent back: one of its blocks by id, or its text in an assistant message, or an
        # assistant message's text (cut or edited) inside it.
        if not (mine & keys or any(s in t or (len(t.strip()) >= _QUOTED and t.strip() in s)
                                   for s in said for t in texts)):
            continue
        returnable = _returnable(provider, response.blocks, body)
        if any(_contains(c, _canonical(provider, whole)) for c in canonical
               for whole in _whole_forms(provider, returnable)):
            continue
        if response.variants and any(_contains(c, _canonical(provider, _returnable(
                provider, _with_variants(response), body))) for c in canonical):
            continue
        if response.cut:
            variants = [response, *([Served(provider, tuple(_with_variants(response)))]
                                    if response.variants else [])]
            if all(any(_cut_form(provider, v, m, body) for v in variants) for m in messages):
                continue
            return (f"the request sends back served response {number + 1}, which was cut, "
                    "in a form its provider does not accept after a cut: its first blocks "
                    "whole and unchanged, then at most the text that streamed of the one it "
                    "was cut in")
        return (f"the request sends back served response {number + 1} changed: its "
                f"{len(response.blocks)} blocks must come back whole, in order and unchanged")
    return None


def _whole_forms(provider: str, blocks: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """The forms a response the client holds whole may come back in: as served, and for
    Anthropic also without the tool uses nothing answers (a paused answer followed by a user
    message, not continued; a client tool call the next message does not answer): the
    pairing rule says which of the two fits."""
    if provider != "anthropic":
        return [blocks]
    # a client tool use is answered in the next message, if at all (the pairing rule judges)
    answered = {b.get("tool_use_id") for b in blocks}
    closed = [b for b in blocks if b.get("type") != _CLIENT_TOOL_USE and (
        b.get("type") not in _SERVER_TOOL_USES or b.get("id") in answered)]
    return [blocks, closed] if len(closed) != len(blocks) else [blocks]


def _returnable(provider: str, blocks: Iterable[dict[str, Any]], body: Any
                ) -> list[dict[str, Any]]:
    """What of a served response can come back at all: with ``store`` false, an OpenAI
    reasoning item without its ``encrypted_content`` cannot (nothing upstream holds it; the
    reasoning guide: earlier turns' reasoning is dropped anyway)."""
    if provider == "openai" and isinstance(body, dict) and body.get("store") is False:
        return [b for b in blocks
                if b.get("type") != "reasoning" or b.get("encrypted_content")]
    return list(blocks)


def _with_variants(response: Served) -> list[dict[str, Any]]:
    variants = dict(response.variants)
    return [variants.get(str(b.get("id")), b) for b in response.blocks]
