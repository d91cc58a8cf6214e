"""Recording one proxied exchange, off the client's path.

The forwarder hands the recorder what it forwards and never waits for it: ``response`` (status
and headers), ``feed`` (each chunk, as it went to the client), ``end``. Those calls only queue;
everything else — reading the request, deciding the conversation, decompressing, parsing while
the bytes arrive, the one stream runner, storing, publishing — happens in the recorder's own
task, which yields before each piece of work to the requests still waiting for their first
byte (``proxy.priority``): forwarding goes first. A failure there (bad wire data, the database
busy, a bug) is logged and the turn is marked; the client's stream goes on regardless.

What is kept: the request body (redacted) and the response's wire bytes (decoded from gzip,
redacted) as a ``live.Recording`` of the agent turn, so a proxied turn replays wire-exact; the
``WireContext`` comes from the real request (``anthropic-version``, the body's tool versions, the
URL). Usage counters are logged as diagnostics.
"""

from __future__ import annotations

import asyncio
import logging
import zlib
from collections.abc import AsyncIterator
from typing import Any

import orjson
from asgiref.sync import sync_to_async
from django.db import transaction

import providers
from conversations import redaction
from conversations.models import Conversation, Turn
from live import runner as live_runner
from live.models import Recording
from live.sources import WireResponse
from proxy import messages, priority, threads
from proxy.endpoints import Endpoint
from streams import parts
from upstream import errors

log = logging.getLogger("turnscope.proxy")

# A response the recorder cannot keep up with (the database stalled) is not held in memory past
# this: recording stops, the turn is marked, the client is not affected.
MAX_BUFFERED = 64 * 1024 * 1024
# Nor is a decoded response past this (a few hundred kB of gzip can decode to gigabytes): it is
# decoded a step at a time, the loop free between steps, and recording stops at the cap.
MAX_DECODED = 64 * 1024 * 1024
DECODE_STEP = 1024 * 1024
# A line longer than this is redacted off the event loop (the app's own stream never waits).
LONG_LINE = 1024 * 1024

_TOO_LARGE = ("Turnscope stopped recording this response: it is too large (over "
              f"{MAX_BUFFERED} bytes, or {MAX_DECODED} decoded); the app received it whole.")

_db = sync_to_async  # thread-sensitive: the database thread the live runner writes from
_off_loop = sync_to_async(lambda fn, *a: fn(*a), thread_sensitive=False)


class RecordingFailed(RuntimeError):
    pass


class Recorder:
    def __init__(
        self,
        *,
        user: Any,
        endpoint: Endpoint,
        body: bytes,
        url: str,
        api_version: str | None,
        conversation: Conversation | None,
    ) -> None:
        self.user = user
        self.endpoint = endpoint
        self.provider = endpoint.provider
        self.body = body
        self.url = redaction.redact_text(url)  # Gemini's ?key= never gets past here
        self.api_version = api_version
        self.conversation = conversation
        self.status = 0
        self.encoding = ""
        self.failure: tuple[str, str] | None = None  # no response at all: (code, message)
        self.runner: live_runner.TurnRunner | None = None
        self.raw: list[bytes] = []  # the response as recorded (decoded, redacted)
        self._chunks: asyncio.Queue[bytes | None] = asyncio.Queue()
        self._started = asyncio.Event()
        self._first = asyncio.Event()  # the first byte went to the client (or none will)
        self._buffered = 0
        self._overflow = False
        self._ended = False
        self._decoder: Any = None  # one decoder and line splitter for all of the response
        self._lines = redaction.WireLines()
        self._decoded = 0
        self._yield = priority.Yielder()  # the forwarding's first bytes go first

    # -- the forwarder's side: never waits, never raises ----------------------------------------

    @property
    def started(self) -> bool:
        """Whether the response (or the failure to get one) is known."""
        return self._started.is_set()

    def response(self, status: int, headers: list[tuple[bytes, bytes]]) -> None:
        self.status = status
        for name, value in headers:
            if name.lower() == b"content-encoding":
                self.encoding = value.decode("latin-1").strip().lower()
        self._started.set()

    def feed(self, chunk: bytes) -> None:
        if self._ended or self._overflow:
            return
        self._first.set()
        self._buffered += len(chunk)
        if self._buffered > MAX_BUFFERED:
            self._overflow = self._ended = True
            self._chunks.put_nowait(None)
            return
        self._chunks.put_nowait(chunk)

    def end(self) -> None:
        """The response is over (whole, or cut: the parts tell which)."""
        self._first.set()
        if not self._ended:
            self._ended = True
            self._chunks.put_nowait(None)

    def failed(self, status: int, code: str, message: str) -> None:
        """No response: the upstream was unreachable or timed out (``status`` 502 / 504)."""
        self.status = status
        self.failure = (code, message)
        self._started.set()
        self.end()

    # -- the recorder's task --------------------------------------------------------------------

    async def run(self) -> Turn | None:
        try:
            return await self._run()
        except Exception as exc:
            log.error("proxy: could not record a %s exchange (%s)", self.provider,
                      type(exc).__name__, exc_info=True)
            turn = self.runner.turn if self.runner is not None else None
            if turn is not None:
                why = (f"Turnscope stopped recording this response: {exc}" if isinstance(
                    exc, RecordingFailed) else "Turnscope could not record this response "
                    f"({type(exc).__name__})")
                await live_runner.record_failure(
                    turn, "recording_failed", why + "; the app received it unchanged.")
            return turn
        finally:
            self._ended = True  # nothing more is queued for a recorder that stopped

    async def _run(self) -> Turn | None:
        # Nothing of the recording's work competes with the request and its first byte: the
        # client's time to first byte is the provider's.
        await self._first.wait()
        await self._yield()
        try:
            request = orjson.loads(self.body) if self.body else None
        except orjson.JSONDecodeError:
            request = None
        request = redaction.redact_value(request) if request is not None else None
        exchange = await _off_loop(messages.read, self.provider, self.endpoint.name, request,
                                   self.api_version, self.url)
        fallback = " · ".join(x for x in (self.provider, exchange.model) if x)
        await self._yield()
        placement = await _db(threads.place)(self.user, exchange, self.conversation,
                                             fallback_title=fallback)
        self.request = request if isinstance(request, dict) else None
        await self._started.wait()
        if self.failure is not None:
            source = self._failure_parts(*self.failure)
        elif self.status >= 300:
            source = self._error_parts()
        else:
            source = self._parts()
        run = self.runner = live_runner.TurnRunner(placement.conversation, speed=0)
        turn = await run.run([source], prompt=placement.prompt, resume=placement.resume,
                             before=placement.before)
        await self._drain()
        if self._overflow:
            raise RecordingFailed(_TOO_LARGE)
        await self._yield()
        response = await _off_loop(self._wire_response)  # a scan of the whole response
        await _db(_keep)(turn, placement.conversation, self.provider, response,
                         placement.resume is not None)
        log.info("proxy: recorded %s %s into turn %s (%s, %s); usage %s", self.provider,
                 self.endpoint.path, turn.pk, turn.status, turn.end_reason or "-",
                 dict(run.builder.usage) or "none")
        return turn

    def _wire_response(self) -> WireResponse:
        # Redacted a line at a time as it streamed; now whole, so that a key split across
        # stream events leaves none of its pieces in the kept recording either.
        raw = redaction.redact_wire(b"".join(self.raw)).decode("utf-8", "replace")
        return WireResponse(name=f"{self.provider} {self.endpoint.path}", raw=raw,
                            api_version=self.api_version, endpoint=self.url,
                            request=self.request, served_by=self.endpoint.served_by)

    def _context(self) -> providers.WireContext:
        return providers.WireContext(api_version=self.api_version, request=self.request,
                                     endpoint=self.url, served_by=self.endpoint.served_by)

    def _open_decoder(self) -> None:
        if self._decoder is None and self.encoding in ("gzip", "x-gzip", "deflate"):
            self._decoder = zlib.decompressobj(zlib.MAX_WBITS | 32)  # gzip or zlib header
        elif self._decoder is None and self.encoding not in ("", "identity"):
            raise RecordingFailed(f"cannot read a {self.encoding!r}-encoded response")

    async def _recorded(self, chunk: bytes) -> AsyncIterator[bytes]:
        """``chunk`` as recorded: decoded a step at a time (what a step left undecoded, when the
        reading stopped there, comes first), cut into whole lines, redacted, kept in ``raw``.
        Past ``MAX_DECODED``, recording stops (``_overflow``)."""
        decoder = self._decoder
        if decoder is None:
            pieces: Any = (chunk,)
        else:
            pieces = self._steps(decoder, decoder.unconsumed_tail + chunk)
        for piece in pieces:
            self._decoded += len(piece)
            if self._decoded > MAX_DECODED:
                self._overflow = True
                return
            if data := await self._line(piece):
                self.raw.append(data)
                yield data
            await asyncio.sleep(0)  # a step at a time: the app's own stream goes on between

    @staticmethod
    def _steps(decoder: Any, data: bytes) -> Any:
        piece = decoder.decompress(data, DECODE_STEP)
        while True:
            yield piece
            if not decoder.unconsumed_tail:
                return
            piece = decoder.decompress(decoder.unconsumed_tail, DECODE_STEP)

    async def _line(self, piece: bytes) -> bytes:
        if self._lines.pending + len(piece) > LONG_LINE:
            return await _off_loop(self._lines.feed, piece)  # type: ignore[no-any-return]
        return self._lines.feed(piece)

    async def _rest(self) -> AsyncIterator[bytes]:
        """What the decoder and the line splitter still hold, once the response is over."""
        if self._overflow:
            return
        tail = self._decoder.flush() if self._decoder is not None else b""
        for data in (await self._line(tail) if tail else b"", self._lines.close()):
            if data:
                self.raw.append(data)
                yield data

    async def _chunk_stream(self) -> AsyncIterator[bytes]:
        """The response body as recorded: decoded (gzip / deflate) and redacted a whole line at
        a time (a credential never spans lines, so this redacts what a redaction of the whole
        body would), kept in ``raw``."""
        self._open_decoder()
        while not self._overflow:
            chunk = await self._chunks.get()
            if chunk is None:
                break
            await self._yield()
            async for data in self._recorded(chunk):
                yield data
        async for data in self._rest():
            yield data

    async def _parts(self) -> AsyncIterator[parts.Part]:
        """Parts parsed while the bytes arrive (``providers.stream_parser``)."""
        parser = providers.stream_parser(self.provider, self._context())
        async for data in self._chunk_stream():
            for part in parser.feed(data):
                yield part
        if self._overflow:  # the turn says why it stops here
            yield parts.StreamError("response_too_large", _TOO_LARGE)
            yield parts.ResponseEnd("error")
            return
        for part in parser.close():
            yield part

    async def _error_parts(self) -> AsyncIterator[parts.Part]:
        """An HTTP error response: the provider's code and message, the turn failed."""
        async for _ in self._chunk_stream():
            pass
        code, message = errors.read(self.provider, self.status, b"".join(self.raw))
        yield parts.StreamError(code, message)
        yield parts.ResponseEnd("error")

    async def _failure_parts(self, code: str, message: str) -> AsyncIterator[parts.Part]:
        yield parts.StreamError(code, message)
        yield parts.ResponseEnd("error")

    async def _drain(self) -> None:
        """What the parser did not read (it stopped at unreadable data, or the turn was cut at
        its cap) is still recorded, through the same decoder and line splitter."""
        if self.failure is not None:
            return
        self._open_decoder()
        while (not self._chunks.empty() or not self._ended) and not self._overflow:
            chunk = await self._chunks.get()
            if chunk is None:
                break
            await self._yield()
            async for _ in self._recorded(chunk):
                pass
        async for _ in self._rest():
            pass


def _keep(turn: Turn, conversation: Conversation, provider: str, response: WireResponse,
          continued: bool) -> None:
    """Keep the response behind the turn (after the ones it continues), and index the
    conversation's history for the next request."""
    with transaction.atomic():
        existing = Recording.objects.select_for_update().filter(turn=turn).first()
        if existing is None:
            Recording.objects.create(turn=turn, provider=provider,
                                     responses=orjson.dumps([response.as_dict()]).decode())
        else:
            kept = existing.response_list if continued else []
            existing.responses = orjson.dumps([*kept, response.as_dict()]).decode()
            existing.save(update_fields=["responses"])
        threads.remember(conversation)
