"""A recorded provider: an ASGI app that answers provider API requests with recorded responses,
in the real wire formats (HTTP status and headers, SSE framing, Gemini's JSON-array stream form,
gzip on request), at a configurable pace, and keeps every request it was sent for checking.

The recording proxy's tests and benchmark run it on a real socket in front of the official SDKs;
live calls (the ``demo``'s built-in "recorded" provider) serve the bundled samples through it.

    app = RecordedUpstream([reply("anthropic", raw_sse), reply("anthropic", continuation)])
    # run it with any ASGI server (tests: uvicorn on port 0; or mount it in the app's daphne);
    # point TURNSCOPE_UPSTREAM_ANTHROPIC at it. Each request gets the next queued reply.
    app.requests[0].json["messages"]     # what it was sent
    app.sent[0]                          # the exact bytes it answered with

Replies come from recordings with ``reply(provider, raw)``: raw SSE is served as it was recorded
(event by event, separators kept), one JSON event per line (the vercel-ai ``chunks.txt``
recordings) is framed as the provider frames it (``event: <type>`` + ``data:`` for Anthropic and
OpenAI Responses, ``data:`` alone for Chat Completions and Gemini), and a JSON body is served as
``application/json``. A Gemini stream asked for without ``alt=sse`` is served as the JSON array
Gemini sends then.

``check`` sees every request before it is answered and may answer it instead;
``respond`` replaces the FIFO (e.g. ``by_provider`` to serve a catalog forever).
``verify_replay=True`` makes it check what it is sent as the provider does: a request that sends
back a response it served (the paused message after ``pause_turn``, an earlier answer) changed,
cut or reordered is answered 400 in the provider's error shape (``upstream.served``); one the
client hung up on may come back only as its provider accepts a cut answer.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import zlib
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Any
from urllib.parse import parse_qs

import orjson

from providers import registry
from upstream import errors
from upstream.served import Served, refusal, served_content

SSE = "text/event-stream"
JSON = "application/json"


@dataclass(frozen=True)
class Reply:
    """One response as the recorded upstream sends it: ``chunks`` are the body in the pieces it
    is written in (one SSE event each, for a stream)."""

    chunks: tuple[bytes, ...]
    status: int = 200
    content_type: str = SSE
    headers: tuple[tuple[str, str], ...] = ()
    payloads: tuple[bytes, ...] = ()  # each event's data (for Gemini's JSON-array form)
    gzip: bool = False
    pace: float | None = None  # seconds between chunks (None: the app's pace)
    first_byte: float = 0.0  # seconds before the response starts
    cut_after: int | None = None  # drop the connection after this many chunks
    # Send nothing after this many chunks until the client hangs up (a provider that stalls
    # mid-answer: a test stops it there, whatever the machine's speed).
    hold_after: int | None = None

    @property
    def body(self) -> bytes:
        """The (uncompressed) body."""
        return b"".join(self.chunks)

    def json_array(self) -> Reply:
        """This stream as Gemini sends ``streamGenerateContent`` without ``alt=sse``."""
        if not self.payloads:
            return self
        pieces = [b"[" + self.payloads[0]]
        pieces += [b",\r\n" + p for p in self.payloads[1:]]
        pieces.append(b"]")
        return replace(self, chunks=tuple(pieces), content_type=JSON)


@dataclass
class Request:
    """A request the recorded upstream received."""

    method: str
    path: str
    query: str
    headers: list[tuple[str, str]]
    body: bytes
    disconnected: bool = False  # the client went away before the reply was sent whole

    def header(self, name: str) -> str | None:
        name = name.lower()
        return next((v for k, v in self.headers if k == name), None)

    @property
    def json(self) -> Any:
        return orjson.loads(self.body) if self.body else None

    @property
    def params(self) -> dict[str, list[str]]:
        return parse_qs(self.query)


_EVENT_END = re.compile(rb"(?<=\r\n\r\n)|(?<=\n\n)|(?<=\r\r)(?!\n)")
_DATA = re.compile(rb"^data: ?(.*?)\r?$", re.MULTILINE)


def reply(provider: str, raw: bytes, **options: Any) -> Reply:
    """A ``Reply`` serving the recording ``raw`` (SSE, JSON lines or a JSON body) in
    ``provider``'s wire format; ``options`` are ``Reply`` fields (status, gzip, pace...)."""
    text = raw.lstrip()
    if text[:1] in (b"{", b"["):
        lines = [line for line in raw.splitlines() if line.strip()]
        try:
            orjson.loads(raw)
        except orjson.JSONDecodeError:
            return _json_lines(provider, lines, options)
        if text[:1] == b"[":  # a saved JSON-array stream: serve it as SSE events
            items = [orjson.dumps(item) for item in orjson.loads(raw)]
            return _json_lines(provider, items, options)
        return Reply(chunks=(raw,), content_type=JSON, **options)
    chunks = tuple(c for c in _EVENT_END.split(raw) if c)
    payloads = tuple(m.group(1) for c in chunks for m in _DATA.finditer(c)
                     if m.group(1).strip() not in (b"", b"[DONE]"))
    return Reply(chunks=chunks, payloads=payloads, **options)


def _json_lines(provider: str, lines: list[bytes], options: dict[str, Any]) -> Reply:
    chunks = []
    found = registry.find(provider)
    names_events = found is not None and found.stand_in.names_events
    for line in lines:
        kind = None
        if names_events:
            with contextlib.suppress(orjson.JSONDecodeError):
                data = orjson.loads(line)
                kind = data.get("type") if isinstance(data, dict) else None
        if isinstance(kind, str):  # e.g. Anthropic and OpenAI Responses name every event
            chunks.append(b"event: " + kind.encode() + b"\ndata: " + line + b"\n\n")
        else:  # Chat Completions chunks and Gemini responses: data lines only
            chunks.append(b"data: " + line + b"\n\n")
    return Reply(chunks=tuple(chunks), payloads=tuple(lines), **options)


def error_reply(provider: str, status: int, code: str, message: str, **options: Any) -> Reply:
    """A provider-shaped error response (what a provider answers a bad key or an overload)."""
    return Reply(chunks=(errors.body(provider, status, code, message),), status=status,
                 content_type=JSON, **options)


def provider_of(path: str) -> str | None:
    """Which provider's API ``path`` belongs to (the endpoints its SDK calls)."""
    return next((p.name for p in registry.providers() if p.stand_in.serves_path(path)), None)


def by_provider(catalog: dict[str, list[Reply]]) -> Callable[[Request], Reply]:
    """A ``respond`` that serves ``catalog[provider]`` round and round, the provider read from
    the request's path (for a recorded provider that never runs out)."""
    turns = {name: 0 for name in catalog}

    def respond(request: Request) -> Reply:
        name = provider_of(request.path) or ""
        replies = catalog.get(name)
        if not replies:
            return error_reply(name, 404, "not_found", f"no recording for {request.path}")
        n = turns[name]
        turns[name] = n + 1
        return replies[n % len(replies)]

    return respond


@dataclass
class RecordedUpstream:
    """The ASGI app. ``pace``: seconds between chunks; ``split``: write each chunk in pieces of
    at most this many bytes (a parser must not depend on where reads end); ``prefix``: a path
    prefix to strip (when mounted under one); ``keep``: how many of the latest requests, bodies
    and served contents it remembers (None: all, as tests read them; an app that serves for
    days, the demo's recorded provider, keeps a window)."""

    replies: Iterable[Reply] = ()
    respond: Callable[[Request], Reply] | None = None
    check: Callable[[Request], Reply | None] | None = None
    pace: float = 0.0
    split: int | None = None
    prefix: str = ""
    requests: list[Request] = field(default_factory=list)
    sent: list[bytes] = field(default_factory=list)
    verify_replay: bool = False
    # The content of each response served (what a client may send back), in order; those the
    # client did not get whole are marked ``cut``.
    served: list[Served] = field(default_factory=list)
    keep: int | None = None

    def __post_init__(self) -> None:
        self._queue: deque[Reply] = deque(self.replies)
        if self.keep is not None:
            # The same append/iterate/index interface, with the oldest dropped past ``keep``.
            self.requests = deque(self.requests, maxlen=self.keep)  # type: ignore[assignment]
            self.sent = deque(self.sent, maxlen=self.keep)  # type: ignore[assignment]
            self.served = deque(self.served, maxlen=self.keep)  # type: ignore[assignment]

    def add(self, *replies: Reply) -> None:
        """Queue replies: each request is answered with the next one."""
        self._queue.extend(replies)

    @property
    def pending(self) -> int:
        return len(self._queue)

    def _next(self, request: Request) -> Reply:
        if self.respond is not None:
            return self.respond(request)
        if not self._queue:
            provider = provider_of(request.path) or ""
            return error_reply(provider, 500, "no_reply", "the recorded upstream has no reply "
                               f"queued for {request.method} {request.path}")
        return self._queue.popleft()

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        if scope["type"] != "http":
            return
        body = bytearray()
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        path = scope["path"]
        if self.prefix and path.startswith(self.prefix):
            path = path[len(self.prefix):] or "/"
        request = Request(
            method=scope["method"], path=path,
            query=scope.get("query_string", b"").decode("latin-1"),
            headers=[(k.decode("latin-1").lower(), v.decode("latin-1"))
                     for k, v in scope.get("headers", [])],
            body=bytes(body),
        )
        self.requests.append(request)
        chosen = self._refused(request) or (self.check(request) if self.check else None) or (
            self._next(request))
        kept = self._keep(request, chosen)
        serving = registry.find(provider_of(path) or "")
        if serving is not None and serving.stand_in.json_array(path, request.params):
            chosen = chosen.json_array() if chosen.content_type == SSE else chosen
        watcher = asyncio.ensure_future(_disconnect(receive, request))
        whole = False
        try:
            whole = await self._send(chosen, send, request)
        finally:
            watcher.cancel()
            if kept is not None and not whole:
                self._cut(kept)

    def _refused(self, request: Request) -> Reply | None:
        """A 400 for a request that sends back what was served changed (``verify_replay``)."""
        provider = provider_of(request.path)
        if not self.verify_replay or provider is None:
            return None
        try:
            body = request.json
        except orjson.JSONDecodeError:
            return error_reply(provider, 400, "invalid_request_error", "the body is not JSON")
        reason = refusal(provider, body, self.served)
        if reason is None:
            return None
        return error_reply(provider, 400, "invalid_request_error", reason)

    def _keep(self, request: Request, chosen: Reply) -> Served | None:
        """What the reply serves, kept before it is sent (a client that has it whole can send
        it straight back); marked cut (``_cut``) when the client does not get it whole."""
        provider = provider_of(request.path)
        if not self.verify_replay or provider is None or chosen.status != 200:
            return None
        content = served_content(provider, chosen.body)
        if content is not None:
            self.served.append(content)
        return content

    def _cut(self, content: Served) -> None:
        """The client hung up (or the reply cut itself off) before the last byte: it holds a
        part of ``content``, which may come back as its provider accepts a cut answer."""
        for n in range(len(self.served) - 1, -1, -1):
            if self.served[n] is content:
                self.served[n] = replace(content, cut=True)
                return

    async def _send(self, chosen: Reply, send: Any, request: Request) -> bool:
        """Send the reply; whether its last byte went out."""
        if chosen.first_byte:
            await asyncio.sleep(chosen.first_byte)
        headers = [(b"content-type", chosen.content_type.encode())]
        headers += [(k.encode(), v.encode()) for k, v in chosen.headers]
        compress = zlib.compressobj(wbits=31) if chosen.gzip else None  # 31: gzip framing
        if compress is not None:
            headers.append((b"content-encoding", b"gzip"))
        if chosen.content_type != SSE and chosen.cut_after is None and compress is None:
            headers.append((b"content-length", str(len(chosen.body)).encode()))
        await send({"type": "http.response.start", "status": chosen.status, "headers": headers})
        wire = bytearray()
        pace = self.pace if chosen.pace is None else chosen.pace
        # Everything it will send, worked out first (a gzip stream's pieces are deterministic):
        # the whole body is kept in ``sent`` before its last byte is written, so a client (in
        # another thread) that has the whole body always finds it there.
        datas = [compress.compress(chunk) + compress.flush(zlib.Z_SYNC_FLUSH)
                 if compress is not None else chunk for chunk in chosen.chunks]
        tail = compress.flush() if compress is not None else b""
        whole = b"".join(datas) + tail
        kept = False
        try:
            for n, data in enumerate(datas):
                if chosen.cut_after is not None and n >= chosen.cut_after:
                    raise ConnectionAbortedError("the recorded upstream cuts this response here")
                if chosen.hold_after is not None and n >= chosen.hold_after:
                    while not request.disconnected:
                        await asyncio.sleep(0.01)
                if request.disconnected:
                    return False
                if n and pace:
                    await asyncio.sleep(pace)
                step = self.split or len(data) or 1
                for start in range(0, len(data), step):
                    piece = data[start:start + step]
                    wire += piece
                    if not kept and chosen.cut_after is None and len(wire) == len(whole):
                        self.sent.append(whole)
                        kept = True
                    await send({"type": "http.response.body", "body": piece, "more_body": True})
            if not kept:
                self.sent.append(whole)
                kept = True
            await send({"type": "http.response.body", "body": tail, "more_body": False})
            return True
        finally:
            if not kept:
                self.sent.append(bytes(wire))


async def _disconnect(receive: Any, request: Request) -> None:
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            request.disconnected = True
            return
