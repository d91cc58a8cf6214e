"""Which conversation, and which turn, a proxied request is recorded into.

* ``X-Turnscope-Conversation: <id>``: that conversation (its owner only; checked before anything
  is forwarded).
* OpenAI ``previous_response_id``: the conversation of the turn that response was recorded in.
* Otherwise the request's history (its messages before the newest user message) is looked up
  among the owner's proxied conversations (``Thread``: the key of each one's stored turns after
  its last exchange); no match starts a new conversation, titled from the prompt.

A request that continues the last agent turn (Anthropic sends a ``pause_turn`` message back, or
the newest message only answers the tool calls a turn ended with) resumes that turn, exactly as
``ingest`` takes continuation files: the tool results are its events, then the response.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from conversations import ingest, store
from conversations.actions.create import announce_created
from conversations.models import Conversation, Event, Turn
from proxy.messages import Exchange, History, history_key, normalize
from proxy.models import Thread
from streams.builder import EventBuilder, EventRecord

# How the resumed turn must have ended for each continuation shape.
_CONTINUES = {"pause_turn": "pause_turn", "tool_result": "tool_use"}
_RESPONSE_ID = re.compile(r"^[A-Za-z0-9_\-]{1,200}$")


@dataclass
class Placement:
    conversation: Conversation
    resume: Turn | None = None  # the agent turn this request continues
    prompt: list[EventRecord] = field(default_factory=list)  # the new user turn's events
    before: list[EventRecord] = field(default_factory=list)  # events ahead of the response
    created: bool = False  # the conversation is new: it holds only what this exchange adds


def owned(user: Any, conversation_id: str) -> Conversation | None:
    """The conversation ``conversation_id`` if ``user`` owns it (staff included: appending is
    for the owner), else None: another's conversation does not exist for this user."""
    try:
        key = uuid.UUID(conversation_id)
    except (ValueError, AttributeError):
        return None
    return Conversation.objects.filter(pk=key, owner=user).first()


def place(user: Any, exchange: Exchange, conversation: Conversation | None, *,
          fallback_title: str = "") -> Placement:
    """Where this exchange goes (a new conversation is created here when none fits)."""
    if conversation is None and exchange.previous_response_id:
        conversation = _by_response(user, exchange.previous_response_id)
    if exchange.shape != "prompt":
        candidate = conversation or _by_history(user, exchange.history)
        if candidate is not None:
            last = candidate.turns.order_by("-index").first()
            if (last is not None and last.role == Turn.Role.AGENT
                    and last.status == Turn.Status.COMPLETE
                    and last.end_reason == _CONTINUES[exchange.shape]):
                before = exchange.tool_results if exchange.shape == "tool_result" else []
                return Placement(candidate, resume=last, before=list(before))
            conversation = candidate
    elif conversation is None and exchange.before_prompt:
        conversation = _by_history(user, exchange.before_prompt)
    created = conversation is None
    if conversation is None:
        title = (ingest.title_for(exchange.prompt_text, [], EventBuilder())
                 if exchange.prompt_text else "")
        conversation = store.create_conversation(
            title=title or fallback_title or "Untitled", owner=user)
        announce_created(conversation)
    return Placement(conversation, prompt=exchange.prompt, created=created)


def _by_history(user: Any, history: History) -> Conversation | None:
    if not history:
        return None
    thread = (Thread.objects.filter(owner=user, key=history_key(history))
              .select_related("conversation").order_by("-updated_at").first())
    return thread.conversation if thread is not None else None


def _by_response(user: Any, response_id: str) -> Conversation | None:
    if not _RESPONSE_ID.match(response_id):
        return None
    turn = (Turn.objects.filter(conversation__owner=user, role=Turn.Role.AGENT,
                                responses__contains=f'"response_id":"{response_id}"')
            .select_related("conversation").order_by("-created_at").first())
    return turn.conversation if turn is not None else None


def stored_history(conversation: Conversation) -> History:
    """The conversation's turns as a request would send them back (``proxy.messages``)."""
    texts: dict[Any, list[str]] = {}
    for turn_id, text in (Event.objects.filter(conversation=conversation, kind="message")
                          .order_by("seq").values_list("turn_id", "text")):
        texts.setdefault(turn_id, []).append(text)
    roles = conversation.turns.order_by("index").values_list("id", "role")
    return _history((role, texts.get(turn_id, [])) for turn_id, role in roles)


def written_history(turns: Iterable[tuple[str, Iterable[Event]]]) -> History:
    """``stored_history`` of a conversation that holds only ``turns`` (role, events in seq
    order), from the events as written: nothing read back."""
    return _history((role, [e.text for e in events if e.kind == "message"])
                    for role, events in turns)


def _history(turns: Iterable[tuple[str, list[str]]]) -> History:
    return normalize(("agent" if role == Turn.Role.AGENT else "user", "".join(texts))
                     for role, texts in turns if role in (Turn.Role.USER, Turn.Role.AGENT))


def remember(conversation: Conversation, history: History | None = None) -> None:
    """Index the conversation's history (``history``, else as stored now), for the next
    request to find."""
    from django.utils import timezone

    if history is None:
        history = stored_history(conversation)
    # One upsert (not update_or_create's locking read, savepoint and write): this runs for
    # every recorded exchange.
    Thread.objects.bulk_create(
        [Thread(conversation=conversation, owner_id=conversation.owner_id,
                key=history_key(history), updated_at=timezone.now())],
        update_conflicts=True, unique_fields=["conversation"],
        update_fields=["owner", "key", "updated_at"],
    )
