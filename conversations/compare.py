"""Compare: an agent turn and its re-runs, side by side, with their sources.

A re-run of agent turn ``i`` is a fork of its conversation at the user turn before it
(``forked_at_turn == i - 1``) whose turn ``i`` is an agent turn: another model answering the
same prompt. The family of a turn is the original and every re-run of it (seen from a re-run,
its source's turn is the original). Sources are compared by URL: cited by every answer, by
only some, and consulted (a hosted search returned them) but cited by none.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from conversations.models import Attribution, Conversation, Event, Turn
from streams.bodies import ActivityBody


@dataclass
class Answer:
    conversation: Conversation
    turn: Turn

    @property
    def label(self) -> str:
        if self.turn.provider:
            return f"{self.turn.provider} · {self.turn.model}"
        return self.turn.agent_id or "unknown model"


@dataclass
class Source:
    url: str
    title: str = ""
    cited_by: list[int] = field(default_factory=list)  # answer positions (0-based)
    consulted_by: list[int] = field(default_factory=list)


@dataclass
class Comparison:
    index: int
    answers: list[Answer]
    cited_by_all: list[Source]
    cited_by_some: list[Source]
    consulted_only: list[Source]


def _is_rerun(conversation: Conversation, index: int) -> bool:
    return (conversation.forked_from_id is not None and index > 0
            and conversation.forked_at_turn == index - 1)


def reruns(conversation: Conversation, index: int, user: Any = None) -> list[Conversation]:
    """The re-runs of agent turn ``index`` of ``conversation`` (oldest first; those ``user``
    may see, when given)."""
    forks = Conversation.objects.filter(forked_from=conversation, forked_at_turn=index - 1,
                                        turns__index=index, turns__role=Turn.Role.AGENT)
    if user is not None:
        forks = forks.visible_to(user)
    return list(forks.order_by("created_at").distinct())


def family(conversation: Conversation, index: int, user: Any) -> list[Answer]:
    """The original answer of agent turn ``index`` and every re-run of it ``user`` may see."""
    origin = conversation
    if _is_rerun(conversation, index):
        source = Conversation.objects.visible_to(user).filter(pk=conversation.forked_from_id)
        found = source.first()
        if found is not None and found.turns.filter(index=index, role="agent").exists():
            origin = found
    conversations = [origin, *reruns(origin, index, user)]
    turns = {t.conversation_id: t for t in Turn.objects.filter(
        conversation__in=conversations, index=index, role=Turn.Role.AGENT)}
    return [Answer(c, turns[c.pk]) for c in conversations if c.pk in turns]


def compare(conversation: Conversation, index: int, user: Any) -> Comparison:
    answers = family(conversation, index, user)
    sources: dict[str, Source] = {}

    def source(url: str, title: str) -> Source:
        key = url.strip()
        found = sources.get(key)
        if found is None:
            found = sources[key] = Source(key, title)
        elif title and not found.title:
            found.title = title
        return found

    for n, answer in enumerate(answers):
        for url, title in (Attribution.objects.filter(event__turn=answer.turn)
                           .order_by("event__seq", "ordinal").values_list("url", "title")):
            if url and n not in (s := source(url, title)).cited_by:
                s.cited_by.append(n)
        for event in Event.objects.filter(turn=answer.turn, kind=ActivityBody.kind):
            body = event.typed_body
            for item in getattr(body, "sources", None) or ():
                url = item.get("url") if isinstance(item, dict) else None
                if isinstance(url, str) and url:
                    title = item.get("title") if isinstance(item.get("title"), str) else ""
                    s = source(url, title)
                    if n not in s.consulted_by:
                        s.consulted_by.append(n)
    everyone = set(range(len(answers)))
    cited = [s for s in sources.values() if s.cited_by]
    return Comparison(
        index=index, answers=answers,
        cited_by_all=[s for s in cited if set(s.cited_by) == everyone and len(answers) > 1],
        cited_by_some=[s for s in cited if set(s.cited_by) != everyone or len(answers) == 1],
        consulted_only=[s for s in sources.values() if not s.cited_by],
    )
