"""Live calls: Turnscope itself sends a conversation's next request to a provider and streams
the answer in through the live path. The business actions behind the composer, the API and the
turn buttons live here; views only check access and translate errors.

* ``start_turn`` — the user turn and the streaming agent turn are stored at once (so the caller
  can answer with the turn's id), then a task on the server's event loop sends the request
  (built from the stored turns by ``conversations.next_request``) through ``upstream.client`` and
  feeds the response, parsed as its bytes arrive, to the one ``TurnRunner``.
* ``pause_turn``: the paused turn is sent back (``request_for_continuation``) and the answer is
  recorded as a continuation of the same agent turn; after ``TURNSCOPE_MAX_CONTINUATIONS`` the
  loop guard stops and says so (the turn fails with ``continuation_limit``).
* ``stop`` — cancels the streaming turn: it ends interrupted with what streamed (in this
  process directly; in another one through a cache flag its task watches).
* A provider error (an HTTP 4xx/5xx, an ``error`` event in the stream, no answer at all) ends
  the turn failed with the provider's code and message.
* ``fork_at`` and ``rerun`` — a fork up to a turn; a re-run is a fork up to the turn before an
  agent turn, answered again live by the chosen provider and model.

Keys come from the environment (``live.call_routes``: ``KEY_VARIABLES``) when a request is sent:
never from the browser, never stored, never logged. A provider without a key is answered by
the built-in *recorded* provider when one is configured (``TURNSCOPE_RECORDED_UPSTREAM``: the
demo serves the bundled samples there), and is otherwise disabled with the reason.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import dataclasses
import logging
import os
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any

import httpx
from asgiref.sync import SyncToAsync, async_to_sync, sync_to_async
from django.core.cache import cache
from django.db import transaction

import providers
from conversations import forking, ingest, limits, next_request
from conversations.actions.create import fork_conversation
from conversations.actions.rename import rename_conversation
from conversations.models import Conversation, Event, Turn
from guards import redaction
from live import admission, call_capture, services, tasks, transient, turn_writes
from live import runner as live_runner

# Which providers a call can go to and their routes are ``live.call_routes``'s; named here too, as
# the composer's views, the demo and the tests have always asked this module.
from live.call_routes import KEY_VARIABLES as KEY_VARIABLES
from live.call_routes import PROVIDERS as PROVIDERS
from live.call_routes import Route as Route
from live.call_routes import composer as composer
from live.call_routes import last_served as last_served
from live.call_routes import provider_options as provider_options
from live.call_routes import recorded_base as recorded_base
from providers import registry
from providers.requests import ReplayError, TurnRequest, UpstreamRequest
from streams import parts
from streams.builder import EventBuilder
from upstream import client, errors

log = logging.getLogger("turnscope.live")

# The agent id of a turn the recorded provider answered (the page labels it "recorded").
RECORDED_AGENT = "turnscope-recorded"
MAX_PROMPT = 100_000
DEFAULT_MAX_TOKENS = 4096
STOP_POLL_SECONDS = 0.5
MAX_ERROR_BODY = 64 * 1024


class CallError(Exception):
    """A live call that cannot be made; ``status`` is the HTTP status a view answers with."""

    status = 400


class Busy(CallError):
    status = 409


class TooMany(CallError):
    """Over a live-call limit (``live.admission``)."""

    status = 429


class NotFound(CallError):
    status = 404


# -- routes ------------------------------------------------------------------------------------


def route(provider: str) -> Route:
    """The route to ``provider``; ``CallError`` when it is unknown or disabled."""
    option = next((o for o in provider_options() if o.provider == provider), None)
    if option is None:
        known = ", ".join(o.provider for o in provider_options())
        raise CallError(f"Unknown provider {provider!r} (one of {known}).")
    if not option.enabled:
        raise CallError(f"{option.label} is disabled: {option.reason}")
    return Route(provider, option.recorded)


# -- the turn as asked for ---------------------------------------------------------------------


@dataclass(frozen=True)
class Ask:
    """What a person asks for: the prompt ("" re-runs the turn after the stored user turn),
    who answers it and whether it may search the web."""

    provider: str
    model: str
    prompt: str = ""
    web_search: bool = True

    def turn_request(self, prompt: str | None = None) -> TurnRequest:
        asked = TurnRequest(provider=self.provider, model=self.model,
                            prompt=self.prompt if prompt is None else prompt,
                            web_search=self.web_search, max_tokens=DEFAULT_MAX_TOKENS)
        service = None if self.provider in PROVIDERS else services.find(self.provider)
        return asked if service is None else services.turn_request(service, asked)


def check_ask(ask: Ask) -> Route:
    """Refuse what cannot be sent (``CallError``), before anything is stored."""
    found = route(ask.provider)
    model = ask.model.strip()
    # Gemini's model is a URL path segment; other hosts' names may hold a "/" (groq/compound).
    refused = registry.get(found.wire).model_refused
    if not model or len(model) > 200 or any(c.isspace() or c in refused for c in model):
        raise CallError("A model name is required (no spaces, at most 200 characters).")
    if len(ask.prompt) > MAX_PROMPT or "\x00" in ask.prompt:
        raise CallError(f"A prompt is at most {MAX_PROMPT} characters.")
    return found


@dataclass
class LiveTurn:
    """A live turn that was started: the conversation, the streaming agent turn."""

    conversation: Conversation
    turn: Turn
    recorded: bool


# -- actions -----------------------------------------------------------------------------------


def _open(conversation: Conversation, ask: Ask, recorded: bool, exchange: str
          ) -> tuple[Conversation, list[tuple[Turn, list[Event]]], UpstreamRequest]:
    """Under the conversation's row lock: refuse while a turn streams, build the request from
    the stored turns, then store the user turn and open the agent turn bound to the captured
    ``exchange`` its first response will be (one transaction)."""
    with transaction.atomic():
        locked = Conversation.objects.select_for_update().get(pk=conversation.pk)
        if locked.turns.filter(status=Turn.Status.STREAMING).exists():
            raise Busy("A turn of this conversation is still streaming; stop it or wait.")
        if not ask.prompt:
            last = locked.turns.order_by("-index").first()
            if last is None or last.role != Turn.Role.USER:
                raise CallError("A prompt is required (the conversation does not end with one).")
        try:
            request = next_request.request_for_next_turn(locked, ask.turn_request())
        except (ReplayError, ValueError) as exc:
            raise CallError(f"The request cannot be built from this conversation: {exc}"
                            ) from None
        if not locked.title.strip() and ask.prompt.strip():
            # An untitled conversation is titled from its first prompt, as the proxy does.
            rename_conversation(locked, ingest.title_for(ask.prompt, [], EventBuilder()))
        opened = turn_writes.open_turns(locked, ask.prompt, None,
                                        agent_id=RECORDED_AGENT if recorded else None,
                                        exchange=exchange)
        # who was asked, for the page of a turn that fails before a response names its model
        agent = opened[-1][0]
        agent.asked = f"{ask.provider} · {ask.model}"[:300]
        Turn.objects.filter(pk=agent.pk).update(asked=agent.asked)
    return locked, opened, request


async def _admit(owner_id: Any) -> None:
    try:
        await sync_to_async(admission.admit)(owner_id)
    except admission.TooMany as exc:
        raise TooMany(str(exc)) from None


async def start_turn(conversation: Conversation, ask: Ask, *, admitted: bool = False
                     ) -> LiveTurn:
    """Store the prompt, open the agent turn and start streaming the provider's answer into
    it (a task on the running loop, the server's). ``CallError``: nothing was stored.
    ``TooMany`` past the owner's live-call limits (unless the caller ``admitted`` it)."""
    found = check_ask(ask)
    if not admitted:
        await _admit(conversation.owner_id)
    xid = call_capture.new_id()
    locked, opened, request = await sync_to_async(_open)(conversation, ask, found.recorded, xid)
    turn = opened[-1][0]
    call = _Call(locked, turn, ask, found, request,
                 call_capture.CallCapture(turn, locked.pk, locked.owner_id, xid))
    _spawn(call.drive(opened), turn)
    log.info("live call: %s %s into turn %s%s", ask.provider, ask.model, turn.pk,
             " (recorded provider)" if found.recorded else "")
    return LiveTurn(locked, turn, found.recorded)


def fork_at(conversation: Conversation, index: int, owner: Any, title: str | None = None
            ) -> Conversation:
    """A new conversation of ``owner``'s holding the turns 0..``index``."""
    try:
        return fork_conversation(conversation, index, owner=owner, title=title)
    except forking.ForkError as exc:
        raise CallError(str(exc)) from None


def _rerun_fork(conversation: Conversation, index: int, owner: Any, ask: Ask) -> Conversation:
    turn = conversation.turns.filter(index=index).first()
    if turn is None or turn.role != Turn.Role.AGENT:
        raise NotFound(f"Turn {index} is not an agent turn of this conversation.")
    before = conversation.turns.filter(index=index - 1).first() if index else None
    if before is None or before.role != Turn.Role.USER:
        raise CallError(f"Turn {index} answers no user turn: there is nothing to re-run.")
    who = f"{ask.provider} · {ask.model}"
    return fork_at(conversation, index - 1, owner,
                   title=f"{conversation.title or 'Conversation'} — re-run with {who}"[:300])


async def rerun(conversation: Conversation, index: int, owner: Any, ask: Ask) -> LiveTurn:
    """Agent turn ``index`` answered again by ``ask``'s provider and model, as a new branch:
    a fork up to the user turn before it, then a live turn there."""
    check_ask(Ask(ask.provider, ask.model))
    await _admit(owner.pk)  # before the fork: a refused re-run leaves nothing behind
    forked = await sync_to_async(_rerun_fork)(conversation, index, owner, ask)
    return await start_turn(forked, Ask(ask.provider, ask.model, "", ask.web_search),
                            admitted=True)


def streaming_turn(conversation: Conversation) -> Turn | None:
    return conversation.turns.filter(status=Turn.Status.STREAMING).order_by("-index").first()



async def stop(conversation: Conversation) -> Turn | None:
    """Stop the conversation's streaming turn (None when none streams). It ends interrupted
    with what streamed; ``wait`` for it when it runs in this process."""
    turn = await sync_to_async(streaming_turn)(conversation)
    if turn is None:
        return None
    # a live call's task, or whatever else streams it here (a live replay, the demo's)
    task = _tasks.get(str(turn.pk)) or tasks.driving(turn.pk)
    if task is not None:
        task.cancel()
    else:  # its task runs in another process: it watches this flag
        await sync_to_async(cache.set)(tasks.stop_key(turn.pk), True, 600)
    return turn


async def wait(turn: Turn | Any, timeout: float | None = None) -> None:
    """Until the live turn's task (in this process) is over."""
    task = _tasks.get(str(getattr(turn, "pk", turn)))
    if task is not None:
        await asyncio.wait([task], timeout=timeout)


def running() -> list[str]:
    """Ids of the live turns this process streams."""
    return [t for t, task in _tasks.items() if not task.done()]


# -- from a view's thread --------------------------------------------------------------------


def _server_loop() -> asyncio.AbstractEventLoop | None:
    """The event loop of the server this thread serves a request for (ASGI), if any."""
    loop = getattr(SyncToAsync.threadlocal, "main_event_loop", None)
    pid = getattr(SyncToAsync.threadlocal, "main_event_loop_pid", None)
    return loop if loop is not None and pid == os.getpid() and loop.is_running() else None


def in_thread(action: Any, *args: Any) -> Any:
    """Run an action (``start_turn``, ``rerun``, ``stop``) from a synchronous view. Under an
    ASGI server the turn streams on as a task of the server's loop; without one (WSGI, a test
    client) there is no loop to outlive the request, so the turn streams to its end first."""
    if _server_loop() is not None:
        return async_to_sync(action)(*args)

    async def whole() -> Any:
        result = await action(*args)
        if isinstance(result, LiveTurn):
            await wait(result.turn)
        return result

    return async_to_sync(whole)()


# -- the task ----------------------------------------------------------------------------------

_tasks: dict[str, asyncio.Task[Any]] = {}


def _spawn(coro: Any, turn: Turn) -> None:
    """A task in a context of its own: started from a view's thread (``async_to_sync``), a
    copied context would route its database work to that request's thread, gone by then."""
    task = contextvars.Context().run(tasks.spawn, coro, f"call-{turn.pk}")
    _tasks[str(turn.pk)] = task
    task.add_done_callback(lambda _: _tasks.pop(str(turn.pk), None))


class _Call:
    """One live agent turn: its requests, in order, and the runner they stream into."""

    def __init__(self, conversation: Conversation, turn: Turn, ask: Ask, route: Route,
                 request: UpstreamRequest, capture: call_capture.CallCapture) -> None:
        self.conversation = conversation
        self.capture = capture  # each response in the capture log before the runner reads it
        self.turn = turn
        self.ask = ask
        self.route = route
        self.request = request
        self.runner = live_runner.TurnRunner(conversation, speed=0)
        self.continuations = 0

    async def drive(self, opened: list[tuple[Turn, list[Event]]]) -> Turn:
        me = asyncio.current_task()
        watch = asyncio.ensure_future(self._watch_stop(me))
        try:
            turn = await self.runner.run(self._responses(), opened=opened)
            await self.capture.recorded()
            return turn
        except asyncio.CancelledError:
            # the runner recorded the interruption (or, when it could not, the log will)
            await asyncio.shield(self.capture.recorded())
            raise
        except transient.TRANSIENT as exc:
            # The database stayed away past the runner's retries: the turn is recorded from
            # the capture log (retried until the database is back), every byte received kept.
            log.error("live call into turn %s: the database is away (%s); recording it from the "
                      "capture log", self.turn.pk, type(exc).__name__)
            await self.capture.recorded()
            return self.turn
        except Exception as exc:
            log.error("live call into turn %s failed (%s)", self.turn.pk, type(exc).__name__,
                      exc_info=True)
            await live_runner.record_failure(
                self.turn, "live_call_failed",
                f"Turnscope could not complete this call ({type(exc).__name__}).")
            await self.capture.recorded()
            return self.turn
        finally:
            watch.cancel()
            with contextlib.suppress(Exception):
                await sync_to_async(cache.delete)(tasks.stop_key(self.turn.pk))

    async def _watch_stop(self, task: asyncio.Task[Any] | None) -> None:
        """A stop asked for in another process (``stop``'s cache flag) cancels this task."""
        key = tasks.stop_key(self.turn.pk)
        while True:
            await asyncio.sleep(STOP_POLL_SECONDS)
            if await sync_to_async(cache.get, thread_sensitive=False)(key):
                if task is not None:
                    task.cancel()
                return

    def _responses(self) -> Iterator[AsyncIterator[parts.Part]]:
        """The turn's responses, each decided on once the one before it has streamed."""
        yield self._parts(self._first)
        stream = self.runner.stream
        while not stream.done and stream.outcome.end_reason == "pause_turn":
            if not limits.may_continue(self.continuations):
                yield _failure(
                    "continuation_limit",
                    f"Turnscope stopped after {self.continuations} continuation"
                    f"{'s' if self.continuations != 1 else ''}: the provider paused the turn "
                    "again (the limit is TURNSCOPE_MAX_CONTINUATIONS).")
                return
            self.continuations += 1
            yield self._parts(self._continuation)

    async def _first(self) -> UpstreamRequest:
        return self.request

    async def _continuation(self) -> UpstreamRequest:
        await self.runner.settle()  # the paused response is stored before it is read back
        return await sync_to_async(next_request.request_for_continuation)(
            self.conversation, self.ask.turn_request(""), self.turn.index)

    async def _parts(self, make: Any) -> AsyncIterator[parts.Part]:
        """One response: the request sent, the answer parsed while its bytes arrive."""
        try:
            request = await make()
        except (ReplayError, ValueError) as exc:
            async for part in _failure("replay_failed", f"The paused turn cannot be sent back "
                                       f"as it was received: {exc}"):
                yield part
            return
        provider = self.route.wire
        target = self.route.url(request)
        context = request.wire_context(target)
        if self.route.service is not None:  # the turn is the service's (providers.served)
            context = dataclasses.replace(context, served_by=self.route.provider)
        content = request.content()
        captured = self.capture
        await captured.open(provider, request.path, target, content, context.api_version,
                            context.served_by)
        try:
            try:
                response = await client.send(request.method, target,
                                             headers=self.route.headers(request),
                                             content=content)
            except httpx.TimeoutException:
                failure = ("upstream_timeout", "The provider did not answer in time.")
                await captured.end("failed", failure)
                async for part in _failure(*failure):
                    yield part
                return
            except httpx.HTTPError as exc:
                failure = ("upstream_unreachable", "Turnscope could not reach the provider "
                           f"({type(exc).__name__}).")
                await captured.end("failed", failure)
                async for part in _failure(*failure):
                    yield part
                return
            try:
                await captured.respond(response.status_code)
                if response.status_code >= 300:
                    raw = await _read_some(response, MAX_ERROR_BODY)
                    await captured.chunk(raw)
                    await captured.end("complete")
                    code, message = errors.read(provider, response.status_code, raw)
                    yield parts.StreamError(code, f"HTTP {response.status_code}: {message}")
                    yield parts.ResponseEnd("error")
                    return
                parser = providers.stream_parser(provider, context)
                async for data in _redacted_lines(response, captured):
                    for part in parser.feed(data):
                        yield part
                for part in parser.close():
                    yield part
            finally:
                await asyncio.shield(response.aclose())
        finally:
            if captured.current is not None:  # stopped before the response was over
                await asyncio.shield(captured.end("gone"))


async def _failure(code: str, message: str) -> AsyncIterator[parts.Part]:
    yield parts.StreamError(code, message)
    yield parts.ResponseEnd("error")


async def _read_some(response: httpx.Response, limit: int) -> bytes:
    raw = bytearray()
    try:
        async for chunk in response.aiter_bytes():
            raw += chunk
            if len(raw) >= limit:
                break
    except httpx.HTTPError:
        pass  # what arrived is what the error says
    return bytes(raw[:limit])


async def _redacted_lines(response: httpx.Response, captured: call_capture.CallCapture
                          ) -> AsyncIterator[bytes]:
    """The body as it arrives, each piece in the capture log first, then a whole line at a
    time, redacted (a credential never spans lines). A connection that breaks off ends it: the
    parser sees a cut stream."""
    lines = redaction.WireLines()
    state = "complete"
    try:
        async for chunk in response.aiter_bytes():
            await captured.chunk(chunk)
            if data := lines.feed(chunk):
                yield data
    except httpx.HTTPError as exc:
        log.warning("live call: the provider stopped mid-response (%s)", type(exc).__name__)
        state = "cut"
    await captured.end(state)
    if rest := lines.close():
        yield rest
