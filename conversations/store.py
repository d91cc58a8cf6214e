"""Business actions on the event store. Views, commands and the live runner call these;
nothing else writes conversations, turns or events.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import orjson
from django.db import transaction
from django.utils import timezone

from conversations.builder import EventRecord
from conversations.models import (
    Attribution,
    Conversation,
    Event,
    ProviderPayload,
    Turn,
    dumps,
    url_domain,
)
from conversations.parts import Payload
from conversations.registries import EVENT_KINDS


def create_conversation(
    *, title: str = "", owner: Any = None, forked_from: Conversation | None = None,
    forked_at_turn: int | None = None,
) -> Conversation:
    return Conversation.objects.create(
        title=title[:300], owner=owner, forked_from=forked_from, forked_at_turn=forked_at_turn
    )


def start_turn(
    conversation: Conversation,
    role: str,
    *,
    status: str = Turn.Status.COMPLETE,
    agent_id: str = "",
    provider: str = "",
    model: str = "",
) -> Turn:
    with transaction.atomic():
        locked = Conversation.objects.select_for_update().get(pk=conversation.pk)
        index = locked.turns.count()
        turn = Turn(
            conversation=locked, index=index, role=role, status=status,
            agent_id=agent_id or (f"{provider}:{model}" if role == "agent" and model else ""),
            provider=provider, model=model,
        )
        turn.save()
        Conversation.objects.filter(pk=locked.pk).update(updated_at=timezone.now())
    return turn


def set_provenance(turn: Turn, provider: str, model: str) -> None:
    """Record the served model once. A later call with other values is refused."""
    if turn.provider or turn.model:
        if (turn.provider, turn.model) != (provider, model):
            from conversations.provenance import ProvenanceError

            raise ProvenanceError("provenance is recorded once and never changed")
        return
    turn.provider, turn.model = provider, model
    if not turn.agent_id:
        turn.agent_id = f"{provider}:{model}"
    turn.save(update_fields=["provider", "model", "agent_id"])


def finish_turn(
    turn: Turn, *, status: str, end_reason: str, responses: Sequence[dict[str, Any]] = ()
) -> None:
    turn.status = status
    turn.end_reason = end_reason
    turn.completed_at = timezone.now()
    fields = ["status", "end_reason", "completed_at"]
    if responses:
        turn.responses = dumps(list(responses))
        fields.append("responses")
    turn.save(update_fields=fields)


def payload_json(value: Any) -> str:
    """The JSON text a payload value is stored as (a Fragment is already JSON text)."""
    if isinstance(value, orjson.Fragment):
        contents = value.contents
        return contents.decode() if isinstance(contents, bytes) else contents
    return orjson.dumps(value).decode()


def append_events(turn: Turn, records: Iterable[EventRecord]) -> list[Event]:
    """Append events to ``turn`` with the next per-conversation seqs, atomically."""
    records = list(records)
    if not records:
        return []
    with transaction.atomic():
        conversation = Conversation.objects.select_for_update().get(pk=turn.conversation_id)
        first_seq = conversation.next_seq
        events: list[Event] = []
        attributions: list[Attribution] = []
        payloads: list[ProviderPayload] = []
        for offset, record in enumerate(records):
            payload = _payload_row(record.payload, payloads)
            event = Event(
                conversation_id=conversation.pk, turn=turn, seq=first_seq + offset,
                kind=record.kind, text=record.text, incomplete=record.incomplete,
                body=dumps(record.body), activity_id=record.activity_id, payload=payload,
            )
            events.append(event)
            for ordinal, a in enumerate(record.attributions):
                attributions.append(Attribution(
                    event=event, ordinal=ordinal, url=a.url, title=a.title,
                    excerpt=a.excerpt, domain=url_domain(a.url),
                    range_start=a.start, range_end=a.end,
                    incomplete=a.incomplete, replay=_payload_row(a.replay, payloads),
                ))
        for event in events:
            EVENT_KINDS.check(event.kind)  # bulk_create skips Event.save()
        ProviderPayload.objects.bulk_create(payloads)
        Event.objects.bulk_create(events)
        Attribution.objects.bulk_create(attributions)
        Conversation.objects.filter(pk=conversation.pk).update(
            next_seq=first_seq + len(records), updated_at=timezone.now()
        )
    return events


def _payload_row(
    payload: Payload | None, pending: list[ProviderPayload]
) -> ProviderPayload | None:
    if payload is None:
        return None
    row = ProviderPayload.build(
        payload.provider, payload.format, payload.version, payload_json(payload.value)
    )
    pending.append(row)
    return row


def append_user_turn(conversation: Conversation, text: str) -> Turn:
    turn = start_turn(conversation, Turn.Role.USER)
    append_events(turn, [EventRecord("message", text=text)])
    return turn


def turn_events(turn: Turn) -> list[Event]:
    return list(
        turn.events.order_by("seq").select_related("payload").prefetch_related(
            "attributions__replay"
        )
    )


