"""Recording one proxied exchange live, off the client's path, from the capture log.

The forwarder puts each chunk in the capture log before the app gets it (``proxy.capture``) and
never waits for this: everything here — reading the request, deciding the conversation,
decompressing, parsing while the bytes arrive, the one stream runner, storing, publishing —
happens in the recorder's own task, which yields before each piece of work to the requests still
waiting for their first byte (``proxy.priority``): forwarding goes first. The chunks come in
memory while the recording keeps up (a small window), and from the log when it does not.

If the live recording breaks off (the database went away, a bug), nothing is lost: the exchange
is still in the log, and it is recorded from there once it has ended (``proxy.catchup``:
transient database errors are retried with backoff), into the same turn. If the server stops,
the turn is left streaming for the next start to complete from the log.

What is kept: the request body (redacted) and the response's wire bytes (decoded from gzip,
redacted) as a ``live.Recording`` of the agent turn, so a proxied turn replays wire-exact; the
``WireContext`` comes from the real request (``anthropic-version``, the body's tool versions, the
URL). Usage counters are logged as diagnostics.
"""

from __future__ import annotations

import asyncio
import logging
import zlib
from collections.abc import AsyncIterator, Iterable, Iterator
from typing import TYPE_CHECKING, Any

import orjson
from asgiref.sync import sync_to_async

import providers
from conversations import store
from conversations.models import Conversation, Turn
from guards import redaction
from live import capture as capture_log
from live import runner as live_runner
from live.models import RecordedExchange, Recording
from live.sources import WireResponse
from proxy import messages, priority, threads
from streams import parts
from upstream import errors

if TYPE_CHECKING:
    from proxy.capture import Feed, Hub, Known

log = logging.getLogger("turnscope.proxy")

# A response past this (raw, or decoded: a few hundred kB of gzip can decode to gigabytes) is not
# recorded past it: it is decoded a step at a time, the loop free between steps, and recording
# stops at the cap, the turn saying why. The app is not affected.
MAX_BUFFERED = 64 * 1024 * 1024
MAX_DECODED = 64 * 1024 * 1024
DECODE_STEP = 1024 * 1024
# A line longer than this is redacted off the event loop (the app's own stream never waits).
LONG_LINE = 1024 * 1024

_TOO_LARGE = ("Turnscope stopped recording this response: it is too large (over "
              f"{MAX_BUFFERED} bytes, or {MAX_DECODED} decoded); the app received it whole.")

_db = sync_to_async  # thread-sensitive: the database thread the live runner writes from
_off_loop = sync_to_async(lambda fn, *a: fn(*a), thread_sensitive=False)


class RecordingFailed(RuntimeError):
    """The exchange's bytes cannot be read (an encoding Turnscope cannot decode, bytes missing
    from the log, a response too large): the turn is failed-to-record, with this reason."""


class Decoder:
    """The response body as recorded: decoded (gzip / deflate) a step at a time, up to
    ``MAX_DECODED`` (then ``overflow``), and cut into whole lines, each redacted (a credential
    never spans lines, so this redacts what a redaction of the whole body would). One decoder
    and line splitter for all of a response."""

    def __init__(self, encoding: str) -> None:
        self._zlib: Any = None
        if encoding in ("gzip", "x-gzip", "deflate"):
            self._zlib = zlib.decompressobj(zlib.MAX_WBITS | 32)  # gzip or zlib header
        elif encoding not in ("", "identity"):
            raise RecordingFailed(f"cannot read a {encoding!r}-encoded response")
        self._lines = redaction.WireLines()
        self.decoded = 0
        self.overflow = False

    @property
    def pending(self) -> int:
        return self._lines.pending

    def pieces(self, chunk: bytes) -> Iterator[bytes]:
        """``chunk`` decoded, a step (``DECODE_STEP``) at a time; stops at the cap."""
        if self.overflow:
            return
        if self._zlib is None:
            steps: Iterable[bytes] = (chunk,)
        else:
            steps = self._steps(self._zlib.unconsumed_tail + chunk)
        for piece in steps:
            self.decoded += len(piece)
            if self.decoded > MAX_DECODED:
                self.overflow = True
                return
            yield piece

    def _steps(self, data: bytes) -> Iterator[bytes]:
        try:
            piece = self._zlib.decompress(data, DECODE_STEP)
            while True:
                yield piece
                if not self._zlib.unconsumed_tail:
                    return
                piece = self._zlib.decompress(self._zlib.unconsumed_tail, DECODE_STEP)
        except zlib.error as exc:
            raise RecordingFailed(f"the response's compressed bytes are damaged ({exc})"
                                  ) from exc

    def lines(self, piece: bytes) -> bytes:
        return self._lines.feed(piece)

    def flush(self) -> bytes:
        if self._zlib is None or self.overflow:
            return b""
        try:
            return self._zlib.flush()  # type: ignore[no-any-return]
        except zlib.error:
            return b""

    def close_lines(self) -> bytes:
        return self._lines.close()

    def feed(self, chunk: bytes) -> bytes:
        """All of ``chunk`` at once (recording from the log, in a thread)."""
        return b"".join(self.lines(piece) for piece in self.pieces(chunk))

    def close(self) -> list[bytes]:
        if self.overflow:
            return []
        return [d for d in (self.lines(self.flush()), self.close_lines()) if d]


def request_of(body: bytes) -> Any:
    try:
        request = orjson.loads(body) if body else None
    except orjson.JSONDecodeError:
        request = None
    return redaction.redact_value(request) if request is not None else None


class Recorder:
    def __init__(self, hub: Hub, xid: str, feed: Feed, known: Known | None,
                 opened: asyncio.Future[None] | None) -> None:
        self.hub = hub
        self.xid = xid
        self.feed = feed
        self.known = known
        self.opened = opened
        self.provider = ""
        self.path = ""
        self.url = ""
        self.api_version: str | None = None
        self.served_by: str | None = None
        self.request: dict[str, Any] | None = None
        self.runner: live_runner.TurnRunner | None = None
        self.raw: list[bytes] = []  # the response as recorded (decoded, redacted)
        self._decoder: Decoder | None = None
        self._next = 0  # the next chunk to read
        self._yield = priority.Yielder()  # the forwarding's first bytes go first

    # -- the recorder's task --------------------------------------------------------------------

    async def run(self) -> Turn | None:
        from proxy import catchup

        try:
            return await self._run()
        except asyncio.CancelledError:
            raise  # the server stops: the turn is left for the log's recording at next start
        except Exception as exc:
            log.warning("proxy: the live recording of exchange %s broke off (%s); it is "
                        "recorded from the capture log", self.xid, type(exc).__name__,
                        exc_info=not isinstance(exc, RecordingFailed))
            reason = str(exc) if isinstance(exc, RecordingFailed) else None
            return await catchup.record_when_ended(self.hub, self.xid, reason=reason)
        finally:
            self.feed.attached = False
            self.feed.memory.clear()
            self.feed.held = 0

    async def _load(self) -> tuple[Any, bytes, Any, str, str]:
        """(user, request body, conversation or None, endpoint name, fallback provider)"""
        if self.known is not None:
            k = self.known
            self.provider, self.path = k.endpoint.provider, k.endpoint.path
            self.url = redaction.redact_text(k.url)  # Gemini's ?key= never gets past here
            self.api_version = k.api_version
            self.served_by = k.endpoint.served_by
            return k.user, k.body, k.conversation, k.endpoint.name, self.provider
        if self.opened is not None:
            await self.opened
        found = await _off_loop(self.hub.log.get, self.xid)
        if found is None:
            raise RecordingFailed("the exchange is not in the capture log")
        meta = found.meta
        self.provider, self.path = meta["provider"], meta["path"]
        self.url, self.api_version = meta["url"], meta.get("api_version")
        self.served_by = meta.get("served_by")
        user, conversation = await _db(_owner_and_conversation)(meta)
        return user, found.request, conversation, meta["endpoint"], self.provider

    async def _run(self) -> Turn | None:
        # Nothing of the recording's work competes with the request and its first byte: the
        # client's time to first byte is the provider's.
        await self.feed.started.wait()
        if self.feed.failure is None:
            await self._arrived(0)
        await self._yield()
        user, body, conversation, endpoint, _ = await self._load()
        request = request_of(body)
        exchange = await _off_loop(messages.read, self.provider, endpoint, request,
                                   self.api_version, self.url)
        fallback = " · ".join(x for x in (self.provider, exchange.model) if x)
        await self._yield()
        placement = await _db(threads.place)(user, exchange, conversation,
                                             fallback_title=fallback)
        self.request = request if isinstance(request, dict) else None
        if self.feed.failure is not None:
            source = _failure_parts(*self.feed.failure)
        elif self.feed.status >= 300:
            source = self._error_parts()
        else:
            source = self._parts()
        run = self.runner = live_runner.TurnRunner(placement.conversation, speed=0,
                                                   exchange=self.xid, leave_on_cancel=True)
        turn = await run.run([source], prompt=placement.prompt, resume=placement.resume,
                             before=placement.before)
        await self._drain()
        await self._yield()
        response = await _off_loop(self._wire_response)  # a scan of the whole response
        await _db(keep)(turn, placement.conversation, self.provider, response,
                        placement.resume is not None, self.xid)
        await _off_loop(capture_log.mark_recorded, self.xid, turn.pk)
        log.info("proxy: recorded %s %s into turn %s (%s, %s); usage %s", self.provider,
                 self.path, turn.pk, turn.status, turn.end_reason or "-",
                 dict(run.builder.usage) or "none")
        return turn

    async def _arrived(self, n: int) -> bool:
        """Wait until chunk ``n`` was forwarded (True) or the response ended before it."""
        feed = self.feed
        while True:
            if feed.total is not None and n >= feed.total:
                return False
            if feed.offered > n:
                return True
            feed.wake.clear()
            await feed.wake.wait()

    async def _raw(self) -> AsyncIterator[bytes]:
        """The response's chunks as forwarded: from memory while the window holds them, else
        from the log (committed before the app got them)."""
        while await self._arrived(self._next):
            chunk = self.feed.take(self._next)
            if chunk is not None:
                self._next += 1
                yield chunk
                continue
            for chunk in await _off_loop(self.hub.log.chunks, self.xid, self._next):
                self._next += 1
                yield chunk

    def _open_decoder(self) -> Decoder:
        if self._decoder is None:
            self._decoder = Decoder(self.feed.encoding)
        return self._decoder

    async def _recorded(self, chunk: bytes) -> AsyncIterator[bytes]:
        """``chunk`` as recorded (``Decoder``), kept in ``raw``; a step at a time, the app's
        own stream going on between steps."""
        decoder = self._open_decoder()
        for piece in decoder.pieces(chunk):
            if data := await self._line(piece):
                self.raw.append(data)
                yield data
            await asyncio.sleep(0)

    async def _line(self, piece: bytes) -> bytes:
        decoder = self._open_decoder()
        if decoder.pending + len(piece) > LONG_LINE:
            return await _off_loop(decoder.lines, piece)  # type: ignore[no-any-return]
        return decoder.lines(piece)

    async def _rest(self) -> AsyncIterator[bytes]:
        """What the decoder and the line splitter still hold, once the response is over."""
        decoder = self._open_decoder()
        if decoder.overflow:
            return
        tail = decoder.flush()
        for data in (await self._line(tail) if tail else b"", decoder.close_lines()):
            if data:
                self.raw.append(data)
                yield data

    async def _chunk_stream(self) -> AsyncIterator[bytes]:
        decoder = self._open_decoder()
        async for chunk in self._raw():
            if decoder.overflow:
                break
            await self._yield()
            async for data in self._recorded(chunk):
                yield data
        async for data in self._rest():
            yield data

    def _wire_response(self) -> WireResponse:
        # Redacted a line at a time as it streamed; now whole, so that a key split across
        # stream events leaves none of its pieces in the kept recording either.
        raw = redaction.redact_wire(b"".join(self.raw)).decode("utf-8", "replace")
        return WireResponse(name=f"{self.provider} {self.path}", raw=raw,
                            api_version=self.api_version, endpoint=self.url,
                            request=self.request, served_by=self.served_by)

    def _context(self) -> providers.WireContext:
        return providers.WireContext(api_version=self.api_version, request=self.request,
                                     endpoint=self.url, served_by=self.served_by)

    async def _parts(self) -> AsyncIterator[parts.Part]:
        """Parts parsed while the bytes arrive (``providers.stream_parser``)."""
        parser = providers.stream_parser(self.provider, self._context())
        async for data in self._chunk_stream():
            for part in parser.feed(data):
                yield part
        if self._open_decoder().overflow:  # the turn says why it stops here
            yield parts.StreamError("response_too_large", _TOO_LARGE)
            yield parts.ResponseEnd("error")
            return
        for part in parser.close():
            yield part

    async def _error_parts(self) -> AsyncIterator[parts.Part]:
        """An HTTP error response: the provider's code and message, the turn failed."""
        async for _ in self._chunk_stream():
            pass
        code, message = errors.read(self.provider, self.feed.status, b"".join(self.raw))
        yield parts.StreamError(code, message)
        yield parts.ResponseEnd("error")

    async def _drain(self) -> None:
        """What the parser did not read (it stopped at unreadable data, or the turn was cut at
        its cap) is still recorded, through the same decoder and line splitter."""
        if self.feed.failure is not None or self._open_decoder().overflow:
            return
        async for chunk in self._raw():
            await self._yield()
            async for _ in self._recorded(chunk):
                pass
            if self._open_decoder().overflow:
                break
        async for _ in self._rest():
            pass


async def _failure_parts(code: str, message: str) -> AsyncIterator[parts.Part]:
    yield parts.StreamError(code, message)
    yield parts.ResponseEnd("error")


def _owner_and_conversation(meta: dict[str, Any]) -> tuple[Any, Conversation | None]:
    from django.contrib.auth import get_user_model

    user = get_user_model().objects.filter(pk=meta["user"]).first()
    if user is None:
        raise RecordingFailed("the user whose token sent this request no longer exists")
    conversation = None
    if meta.get("conversation"):
        conversation = threads.owned(user, meta["conversation"])
    return user, conversation


def keep(turn: Turn, conversation: Conversation, provider: str, response: WireResponse | None,
         continued: bool, xid: str, fresh: bool = False,
         history: messages.History | None = None
         ) -> None:
    """Keep the response behind the turn (after the ones it continues), index the
    conversation's history (``history`` when the caller knows it) for the next request, and
    mark the exchange recorded: one transaction. ``fresh``: the turn was opened in the
    caller's transaction (it has no recording yet)."""
    with store.atomic():
        if response is not None:
            existing = (None if fresh else
                        Recording.objects.select_for_update().filter(turn=turn).first())
            if existing is None:
                Recording.objects.create(turn=turn, provider=provider,
                                         responses=orjson.dumps([response.as_dict()]).decode())
            else:
                kept = existing.response_list if continued else []
                existing.responses = orjson.dumps([*kept, response.as_dict()]).decode()
                existing.save(update_fields=["responses"])
        threads.remember(conversation, history)
        RecordedExchange.objects.filter(pk=xid).update(done=True)
