"""VCR cassettes: the YAML (or JSON) files vcrpy and pytest-recording write.

``interactions: [{request: {method, uri, body, headers}, response: {status, headers, body:
{string}}}]``. Each interaction with a provider API is one response, read by that provider's
adapter exactly as ``manage.py ingest`` reads a recording: the request body is the adapter's
``WireContext.request`` (it names hosted tool versions), the ``anthropic-version`` header its
API version, the URL (without its query, which may hold a key) its endpoint. The request's last
user message is the prompt of the user turn before it.

Consecutive interactions thread into one conversation when each request repeats the previous
one's user messages and adds one; a request whose last message holds no new user text (tool
results, or the paused assistant message sent back after ``pause_turn``) continues the previous
agent turn, as its next response. An OpenAI Responses request whose ``previous_response_id``
names the previous response continues its conversation too. Other interactions (another host,
a token fetch) are skipped and said so.

Some recorders (pydantic-ai's) store bodies as ``parsed_body`` (the JSON itself) instead of
``body.string``; both are read. A compressed body (``content-encoding: gzip``) is decompressed.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import orjson
import yaml

from importers.base import (
    ImportedConversation,
    ImportedTurn,
    Item,
    Problem,
    WireResponse,
    text_of,
    user_turn,
)
from importers.recording import provider_of
from providers import WireContext

FORMAT = "vcr"
_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_RESPONSE_ID = re.compile(rb'"id"\s*:\s*"(resp_[A-Za-z0-9_-]+)"')
MAX_DECOMPRESSED = 64 * 1024 * 1024  # decoded bytes of one body

HOSTS = (
    ("anthropic", ("api.anthropic.com", ".anthropic.com")),
    ("openai", ("api.openai.com", ".openai.azure.com", "openrouter.ai", "api.x.ai",
                "api.groq.com", "api.deepseek.com", "api.perplexity.ai", "api.mistral.ai",
                "api.together.xyz", "api.together.ai")),
    ("google", ("generativelanguage.googleapis.com", "aiplatform.googleapis.com")),
)


def looks_like(head: bytes) -> bool:
    return bool(re.search(rb"(?m)^interactions:\s*$", head)) or (
        head.lstrip()[:1] == b"{" and b'"interactions"' in head and b'"request"' in head)


class _Unreadable(Exception):
    def __init__(self, problem: Problem) -> None:
        super().__init__(str(problem))
        self.problem = problem


@dataclass
class _Thread:
    provider: str
    conversation: ImportedConversation
    history: list[str]
    response_ids: set[str] = field(default_factory=set)


def read(raw: bytes, source: str) -> Iterator[Item]:
    """The conversations of one cassette."""
    try:
        interactions = _interactions(raw, source)
    except _Unreadable as exc:
        yield exc.problem
        return
    threads: list[_Thread] = []
    skipped: list[str] = []
    for index, (interaction, line) in enumerate(interactions):
        where = f"interaction {index}"
        try:
            call = _call(interaction, source, where)
        except ValueError as exc:
            yield Problem(source, f"{where}: {exc}", line)
            continue
        if call is None:
            skipped.append(str(index))
            continue
        provider, raw_response, context = call
        request = context.request or {}
        texts, continues = _user_texts(provider, request)
        name = f"{source} {where}"
        response = WireResponse(name, provider, raw_response, context)
        # The thread this call may go on: the last one, if it is with the same provider.
        same = threads[-1] if threads and threads[-1].provider == provider else None
        previous_id = request.get("previous_response_id") if provider == "openai" else None
        linked = (same is not None and isinstance(previous_id, str)
                  and previous_id in same.response_ids)
        if same is not None and continues and (linked or texts == same.history):
            # Tool results or a paused message sent back: the same agent turn goes on.
            thread = same
            agent = thread.conversation.turns[-1]
            agent.responses = [*agent.responses, response]
        elif same is not None and (linked or (same.history and len(texts) > len(same.history)
                                              and texts[:len(same.history)] == same.history)):
            thread = same
            thread.conversation.turns += _turns(name, texts, response)
            # With previous_response_id the request holds only what is new.
            thread.history = thread.history + texts if linked else texts
        else:
            conversation = ImportedConversation(
                source=source, format=FORMAT, key=f"{source}#{index}", title="",
                turns=_turns(name, texts, response), line=line,
            )
            thread = _Thread(provider, conversation, texts)
            threads.append(thread)
        thread.response_ids.update(m.decode() for m in _RESPONSE_ID.findall(raw_response[:4096]))
    if skipped and threads:
        threads[0].conversation.notes.append(
            f"skipped interaction{'s' if len(skipped) > 1 else ''} {', '.join(skipped)} "
            "(not a provider API call)")
    if not threads:
        yield Problem(source, "no interaction with a provider API in this cassette", 1)
    for thread in threads:
        yield thread.conversation


def _turns(name: str, texts: list[str], response: WireResponse) -> list[ImportedTurn]:
    turns = [user_turn(name, texts[-1])] if texts and texts[-1] else []
    return [*turns, ImportedTurn("agent", [response])]


def _interactions(raw: bytes, source: str) -> list[tuple[dict[str, Any], int | None]]:
    """The interactions with the line each starts on."""
    stripped = raw.lstrip()
    if stripped[:1] == b"{":  # vcrpy's JSON serializer
        try:
            doc = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            raise _Unreadable(Problem(source, f"not JSON ({exc.msg})", exc.lineno)) from None
        items = doc.get("interactions") if isinstance(doc, dict) else None
        if not isinstance(items, list):
            raise _Unreadable(Problem(source, "not a cassette: no interactions list", 1))
        return [(i, 1) for i in items if isinstance(i, dict)]
    try:
        loader = _Loader(raw)
        try:
            node = loader.get_single_node()
            doc = loader.construct_document(node) if node is not None else None
        finally:
            loader.dispose()
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        raise _Unreadable(Problem(source, f"not YAML ({exc.problem or exc.context})",
                                  mark.line + 1 if mark else None)) from None
    except yaml.YAMLError as exc:
        raise _Unreadable(Problem(source, f"not YAML ({exc})")) from None
    if not isinstance(doc, dict) or not isinstance(doc.get("interactions"), list):
        raise _Unreadable(Problem(source, "not a cassette: no interactions list", 1))
    lines = []
    for key, value in node.value:
        if getattr(key, "value", None) == "interactions" and isinstance(value,
                                                                        yaml.SequenceNode):
            lines = [item.start_mark.line + 1 for item in value.value]
    items = doc["interactions"]
    return [(item, lines[i] if i < len(lines) else None) for i, item in enumerate(items)
            if isinstance(item, dict)]


def _header(headers: Any, name: str) -> str:
    if not isinstance(headers, dict):
        return ""
    for key, value in headers.items():
        if isinstance(key, str) and key.lower() == name:
            if isinstance(value, list):
                value = value[0] if value else ""
            return value if isinstance(value, str) else ""
    return ""


def _body(message: dict[str, Any]) -> bytes | None:
    """A request or response body as bytes (decompressed), or None when it has none."""
    if "parsed_body" in message and message["parsed_body"] is not None:
        return orjson.dumps(message["parsed_body"])
    body = message.get("body")
    if isinstance(body, dict):
        body = body.get("string")
    if body is None or body == "":
        return None
    raw = body.encode() if isinstance(body, str) else bytes(body)
    encoding = _header(message.get("headers"), "content-encoding").lower()
    if encoding in ("gzip", "deflate") and raw[:1] not in (b"{", b"[", b"e", b"d", b":"):
        # Decoded at most MAX_DECOMPRESSED bytes and no further: a few kB of gzip can decode
        # to gigabytes, and a cassette is a file anyone can upload.
        decoder = zlib.decompressobj(zlib.MAX_WBITS | 32)  # a gzip or a zlib header
        try:
            decoded = decoder.decompress(raw, MAX_DECOMPRESSED + 1)
        except zlib.error as exc:
            raise ValueError(f"the {encoding} body does not decompress ({exc})") from None
        if len(decoded) > MAX_DECOMPRESSED or decoder.unconsumed_tail:
            raise ValueError(f"the {encoding} body is too large once decompressed (more than "
                             f"{MAX_DECOMPRESSED} bytes)")
        if not decoder.eof:
            raise ValueError(f"the {encoding} body does not decompress (it is cut short)")
        raw = decoded
    elif encoding not in ("", "identity", "gzip", "deflate") and raw[:1] not in (b"{", b"["):
        raise ValueError(f"a {encoding}-compressed body cannot be read (record it with "
                         "decode_compressed_response=True)")
    return raw


def _call(interaction: dict[str, Any], source: str, where: str
          ) -> tuple[str, bytes, WireContext] | None:
    request = interaction.get("request")
    response = interaction.get("response")
    if not isinstance(request, dict) or not isinstance(response, dict):
        raise ValueError("an interaction needs a request and a response")
    uri = text_of(request.get("uri"))
    parts = urlsplit(uri)
    host = (parts.hostname or "").lower()
    provider = next((p for p, hosts in HOSTS
                     if any(host == h or (h.startswith(".") and host.endswith(h))
                            for h in hosts)), None)
    if provider == "google" and "/publishers/anthropic/" in parts.path:
        provider = "anthropic"  # Claude on Vertex AI speaks Anthropic's Messages format
    raw = _body(response)
    if raw is None:
        return None
    if provider is None:
        provider = provider_of(raw)
        if provider is None:
            return None
    request_raw = _body(request)
    try:
        request_body = orjson.loads(request_raw) if request_raw else None
    except orjson.JSONDecodeError:
        request_body = None
    context = WireContext(
        api_version=_header(request.get("headers"), "anthropic-version") or None,
        request=request_body if isinstance(request_body, dict) else None,
        endpoint=f"{parts.scheme}://{parts.netloc}{parts.path}" if parts.netloc else None,
    )
    return provider, raw, context


def _text(content: Any, text_types: tuple[str, ...]) -> str:
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    pieces = []
    for block in content:
        if isinstance(block, str):
            pieces.append(block)
        elif isinstance(block, dict) and isinstance(block.get("text"), str) and (
            block.get("type") in text_types or "type" not in block
        ):
            pieces.append(block["text"])
    return "\n\n".join(p for p in pieces if p)


def _user_texts(provider: str, request: dict[str, Any]) -> tuple[list[str], bool]:
    """The texts of the request's user messages, in order, and whether its last message brings
    no new user text (so the request continues the previous agent turn)."""
    messages: list[tuple[str, str]] = []  # (role, text)
    if provider == "google":
        for content in request.get("contents") or ():
            if isinstance(content, dict):
                messages.append((str(content.get("role", "user")),
                                 _text(content.get("parts"), ("text",))))
    elif provider == "openai" and "input" in request:
        items = request["input"]
        if isinstance(items, str):
            messages.append(("user", items))
        for item in items if isinstance(items, list) else ():
            if not isinstance(item, dict):
                continue
            role = item.get("role") or ("tool" if "output" in item else item.get("type", ""))
            messages.append((str(role), _text(item.get("content"), ("input_text", "text"))))
    else:  # Anthropic Messages and Chat Completions
        for message in request.get("messages") or ():
            if isinstance(message, dict):
                messages.append((str(message.get("role", "")),
                                 _text(message.get("content"), ("text", "input_text"))))
    texts = [text for role, text in messages if role == "user" and text]
    last_role, last_text = messages[-1] if messages else ("user", "")
    continues = not (last_role == "user" and last_text)
    return texts, continues
