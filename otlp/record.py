"""Storing the LLM calls of a trace export: each span one agent turn, through the business
action every recorded turn goes through (``conversations.ingest.ingest_turn``: the one stream
runner, then the store).

* A span whose raw provider response rides along (``Call.raw``) is read by that provider's
  adapter, exactly as ``ingest`` reads a recording; its request body gives the prompt and the
  earlier messages (``proxy.messages``, as the proxy reads a request). A raw response the
  adapter cannot read falls back to the skeleton, and the turn says why.
* Any other is the skeleton the attributes describe (``otlp.spans.skeleton``), and its turn
  keeps ``citations: not_sent`` in its bookkeeping: the page says the instrumentation sent none.

Both keep the span's trace and span ids in the turn's response bookkeeping.

Threading: a span carrying a session (``session.id``, ``gen_ai.conversation.id``) continues
the conversation of that session (a new session starts one); otherwise a span of a trace
already received continues that trace's conversation; otherwise the history matching of the
proxy (``proxy.threads``). A span received again (an exporter retrying) is not stored twice.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django.db import IntegrityError, transaction

import providers
from conversations import ingest, provenance, store
from conversations.actions.create import announce_created
from conversations.actions.ingest import announce_turns_after, last_index
from conversations.models import Conversation, Turn
from guards import redaction
from otlp import spans
from otlp.models import ReceivedSpan
from proxy import messages, threads
from streams.bodies import ToolResultBody
from streams.builder import EventBuilder, EventRecord
from streams.parts import Part

log = logging.getLogger("turnscope.otlp")


@dataclass
class Outcome:
    """What became of one LLM span: its turn (new, or the one a first delivery made)."""

    call: spans.Call
    turn: Turn | None = None
    duplicate: bool = False
    error: str = ""  # why it was refused (nothing of it was stored)


def calls(received: Iterable[Any]) -> list[spans.Call]:
    """The LLM calls among ``received`` spans (``otlp.wire.Span``), attributes redacted as
    the proxy redacts what it keeps, in the order they started (a trace's calls in turn)."""
    out = []
    for span in sorted(received, key=lambda s: s.start_ns):
        span.attributes = redaction.redact_value(span.attributes)
        for event in span.events:
            event.attributes = redaction.redact_value(event.attributes)
        call = spans.read(span)
        if call is not None:
            out.append(call)
    return out


def record(user: Any, call: spans.Call) -> Outcome:
    """Store ``call`` as an agent turn of ``user``'s (once: a span already received is
    answered with its turn). ``ValueError`` for a span that cannot be stored (its turn is
    over the limits, its provenance is malformed): nothing of it is kept."""
    found = _received(user, call)
    if found is not None:
        return Outcome(call, found.turn, duplicate=True)
    try:
        with transaction.atomic():
            turn = _store(user, call)
    except IntegrityError:  # the same span, delivered twice at once: the other one won
        found = _received(user, call)
        if found is None:
            raise
        return Outcome(call, found.turn, duplicate=True)
    return Outcome(call, turn)


def _received(user: Any, call: spans.Call) -> ReceivedSpan | None:
    return (ReceivedSpan.objects.filter(owner=user, trace_id=call.trace_id, span_id=call.span_id)
            .select_related("turn").first())


def _store(user: Any, call: spans.Call) -> Turn:
    _check_provenance(call)
    exchange = _exchange(call)
    conversation = _threaded(user, call)
    if conversation is None and call.session:  # a new session: a new conversation
        conversation = store.create_conversation(title=_title(call, exchange), owner=user)
        announce_created(conversation)
    placement = threads.place(user, exchange, conversation, fallback_title=_title(call, exchange))
    before = last_index(placement.conversation)
    prompt = placement.prompt or placement.before
    bookkeeping = call.bookkeeping
    responses: list[tuple[str, Iterable[Part]]]
    if call.raw is not None:
        context = providers.WireContext(request=_redacted(call.request), endpoint=call.url)
        responses = [(call.name, ingest.wire_parts(call.provider, ingest.ResponseFile(
            call.name, call.raw, context)))]
        try:
            with transaction.atomic():
                summary = ingest.ingest_turn(responses, conversation=placement.conversation,
                                             prompt=prompt, bookkeeping=bookkeeping)
        except ValueError as exc:  # the adapter could not read it: the attributes still can
            log.warning("otlp: the raw response of %s could not be read (%s)", call.name, exc)
            call.raw = None
            bookkeeping = {**call.bookkeeping, "raw_unreadable": str(exc)[:300]}
        else:
            announce_turns_after(placement.conversation, before)
            return _keep(user, call, summary.turn)
    summary = ingest.ingest_turn([(call.name, spans.skeleton(call))],
                                 conversation=placement.conversation, prompt=prompt,
                                 bookkeeping=bookkeeping)
    announce_turns_after(placement.conversation, before)
    return _keep(user, call, summary.turn)


def _keep(user: Any, call: spans.Call, turn: Turn) -> Turn:
    ReceivedSpan.objects.create(owner=user, trace_id=call.trace_id, span_id=call.span_id,
                                session=call.session[:255], conversation=turn.conversation,
                                turn=turn)
    threads.remember(turn.conversation)  # the proxy's history matching finds it too
    log.info("otlp: recorded %s (%s) into turn %s", call.name, call.instrumentation, turn.pk)
    return turn


def _check_provenance(call: spans.Call) -> None:
    """A provider or model the turn cannot keep is left out of the skeleton (the response's,
    for a raw one, is the adapter's to read): never a reason to lose the call."""
    try:
        provenance.validate(Turn.Role.AGENT, call.provider, call.model)
    except provenance.ProvenanceError:
        if call.raw is None:
            call.provider, call.model = "", ""


def _threaded(user: Any, call: spans.Call) -> Conversation | None:
    received = ReceivedSpan.objects.filter(owner=user).select_related("conversation")
    if call.session:
        found = (received.filter(session=call.session[:255]).order_by("-received_at").first())
    else:
        found = received.filter(trace_id=call.trace_id).order_by("-received_at").first()
    return found.conversation if found is not None else None


def _redacted(request: dict[str, Any] | None) -> dict[str, Any] | None:
    value = redaction.redact_value(request) if request is not None else None
    return value if isinstance(value, dict) else None


def _exchange(call: spans.Call) -> messages.Exchange:
    """What the request held: the earlier messages and the prompt (the newest user message,
    or the tool results it sends back)."""
    if call.raw is not None and call.request is not None:
        return messages.read(call.provider, call.endpoint, _redacted(call.request),
                             url=call.url or "")
    exchange = messages.Exchange(model=call.model)
    exchange.history = messages.normalize(
        (role, messages.clean(text)) for role, text in spans.history(call.inputs))
    trailing = []
    for message in reversed(call.inputs):
        if message.role != "tool":
            break
        trailing.insert(0, message)
    if trailing:
        exchange.shape = "tool_result"
        for message in trailing:
            for call_id, name, output in spans.tool_results(message):
                text = output if isinstance(output, str) else (
                    "" if output is None else str(output))
                exchange.tool_results.append(EventRecord("tool_call_response", body=ToolResultBody(
                    messages.clean(call_id)[:200], messages.clean(name)[:200],
                    messages.clean(text)[:messages.RESULT_PREVIEW])))
    else:
        newest = next((m for m in reversed(call.inputs) if m.role == "user"), None)
        if newest is not None:
            exchange.prompt_text = messages.clean(newest.text)
    return exchange


def _title(call: spans.Call, exchange: messages.Exchange) -> str:
    if exchange.prompt_text:
        return ingest.title_for(exchange.prompt_text, [], EventBuilder())
    return " · ".join(x for x in (call.provider, call.model) if x) or "Untitled"
