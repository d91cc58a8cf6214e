"""How much one turn may hold, for every way a turn comes in (ingest, uploads and imports, the
live runner, the recording proxy): a cheap request must not cost a lot. And how often a live
call sends a paused turn back (the loop guard)."""

from __future__ import annotations

from django.conf import settings

from streams.errors import TurnTooLarge
from streams.run import TurnLimits

__all__ = ["TurnLimits", "TurnTooLarge", "check_turn", "max_continuations", "may_continue",
           "turn_limits"]


def turn_limits() -> TurnLimits:
    """``TURNSCOPE_MAX_EVENTS_PER_TURN`` and ``TURNSCOPE_MAX_CITATIONS_PER_TURN``."""
    return TurnLimits(
        events=int(getattr(settings, "TURNSCOPE_MAX_EVENTS_PER_TURN", 20_000)),
        citations=int(getattr(settings, "TURNSCOPE_MAX_CITATIONS_PER_TURN", 5_000)),
    )


def check_turn(events: int, citations: int, where: str = "the turn") -> None:
    """Refuse (``TurnTooLarge``) a turn that holds more than the limits allow."""
    turn_limits().check(events=events, citations=citations, where=where)


def max_continuations() -> int:
    """``TURNSCOPE_MAX_CONTINUATIONS`` (5 unless set; below 0 reads as 0): how many times one
    agent turn is sent back after the provider paused it (``pause_turn``)."""
    return max(0, int(getattr(settings, "TURNSCOPE_MAX_CONTINUATIONS", 5)))


def may_continue(continued: int) -> bool:
    """The loop guard: whether a paused turn, continued ``continued`` times so far, may be sent
    back once more (a provider that pauses every answer must not loop for ever)."""
    return continued < max_continuations()
