"""Long-conversation benchmark: a 5,000-turn conversation's page and exports.

    uv run python -m bench.long [--turns 5000] [--repeat 3] [--json]

Builds (through the store's writer, ``store.record_turns``) one conversation of ``--turns``
turns, alternating a user question and an agent answer with a completed web search and cited
markdown, on a throwaway SQLite database (or ``DATABASE_URL``), then measures against the login
page as the floor, in the same run:

* page cold  — the conversation page (its first window of turns) with no cached fragments;
* page warm  — the same page again (fragments and message HTML cached);
* exports    — JSON (portable), Markdown and HTML, streamed to nowhere: MB/s and the peak
  memory the export itself allocated (tracemalloc), cold (rendered) and cached;
* server RSS — the process's resident set after all of it.

Targets: page cold <= 300 ms, RSS <= 250 MB, exports >= 10 MB/s with flat memory. ``measure()``
is what ``bench/scale.py`` calls (with a conversation it built itself, or none).
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

_TEXT = (
    "the survey found that rainfall in the basin rose sharply over the last decade while "
    "average temperatures kept climbing according to several independent station records and "
    "officials expect further revisions as new measurements arrive from the northern network"
)
_PROSE = _TEXT.split()


def _sentence(rng: random.Random, count: int) -> str:
    words = [rng.choice(_PROSE) for _ in range(count)]
    roll = rng.random()
    if roll < 0.25:
        words[0] = f"**{words[0]}**"
    elif roll < 0.4:
        i = rng.randrange(count)
        words[i] = f"`{words[i]}()`"
    elif roll < 0.55:
        i = rng.randrange(count)
        words[i] = f"[{words[i]}](https://notes.example.org/{words[i]})"
    return " ".join(words).capitalize() + "."


def _answer(rng: random.Random) -> str:
    paragraphs = [" ".join(_sentence(rng, rng.randrange(10, 20)) for _ in range(3))
                  for _ in range(2)]
    items = "\n".join(f"- {_sentence(rng, 8)}" for _ in range(3))
    return "\n\n".join([paragraphs[0], items, paragraphs[1]])


def long_turns(count: int, seed: int = 5000) -> Iterator[Any]:
    """``count`` turns (``store.NewTurn``) of a long conversation: a user question, then an
    agent answer with a completed web search and a cited message, and so on."""
    from conversations.store import NewTurn, user_turn
    from streams.bodies import ActivityBody
    from streams.builder import AttributionRecord, EventRecord

    rng = random.Random(seed)
    for index in range(count):
        if index % 2 == 0:
            yield user_turn(f"Question {index // 2 + 1}: " + _sentence(rng, 12))
            continue
        urls = [f"https://site{k}.example.com/report/{index}-{k}" for k in range(4)]
        search = ActivityBody(
            id=f"srvtoolu_{index}", name="web_search", state="completed",
            input={"query": " ".join(rng.choice(_PROSE) for _ in range(4))},
            summary="4 results",
            sources=tuple({"url": u, "title": f"Report {k}"} for k, u in enumerate(urls)),
        )
        text = _answer(rng)
        cites = []
        for k in range(3):
            start = rng.randrange(0, len(text) // 2)
            end = min(len(text), start + rng.randrange(20, 120))
            cites.append(AttributionRecord(urls[k], f"Report {k}", "…the basin rose sharply…",
                                           start, end))
        yield NewTurn(
            "agent",
            [EventRecord("hosted_activity", body=search),
             EventRecord("message", text=text, attributions=cites)],
            end_reason="end_turn", provider="anthropic", model="claude-sonnet-4-5",
            finished=True,
        )


def build_long_conversation(turns: int = 5000, *, owner: Any = None, title: str = "",
                            batch: int = 500) -> Any:
    """A conversation of ``turns`` generated turns, written through the store's writer in
    batches of ``batch`` turns (one transaction each)."""
    from conversations import store

    made = long_turns(turns)
    first = [t for _, t in zip(range(batch), made, strict=False)]
    conversation, _ = store.record_turns(first, store.NewConversation(
        title=title or f"A {turns:,}-turn conversation", owner=owner))
    while chunk := [t for _, t in zip(range(batch), made, strict=False)]:
        store.record_turns(chunk, conversation)
    conversation.refresh_from_db()
    return conversation
