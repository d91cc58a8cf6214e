"""Template context for the live calls: the composer's provider choices (a callable, so they
are read from the environment only when a template shows the composer)."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest

from live import calls


def live_calls(request: HttpRequest) -> dict[str, Any]:
    """On a conversation's page the composer starts on the provider and model of its last
    answer (an OpenAI conversation, its forks and re-runs continue with OpenAI)."""
    match = getattr(request, "resolver_match", None)
    conversation_id = match.kwargs.get("conversation_id") if match is not None else None
    if not conversation_id:
        return {"live_composer": calls.composer}
    return {"live_composer": lambda: calls.composer(prefer=calls.last_served(conversation_id))}


def capture_backlog(request: HttpRequest) -> dict[str, Any]:
    """``capture_waiting`` on a conversation's page: the responses proxied into it that the
    capture log holds and recording has not caught up with yet (a callable: read only where a
    template shows it)."""
    match = getattr(request, "resolver_match", None)
    conversation_id = (match.kwargs.get("conversation_id") if match is not None else None)
    if not conversation_id:
        return {}
    return {"capture_waiting": lambda: waiting_for(str(conversation_id))}


def waiting_for(conversation_id: str, older_than: float = 3.0) -> dict[str, Any] | None:
    """The exchanges bound for ``conversation_id`` not recorded ``older_than`` seconds after
    they began (a live recording that keeps up is not "waiting"): their count and how far
    behind the oldest is, or None."""
    import time

    from live import capture
    from live.models import RecordedExchange

    recording = {str(x) for x in RecordedExchange.objects.filter(
        done=False, turn__conversation_id=conversation_id).values_list("pk", flat=True)}
    try:
        pending = capture.get_log().pending(limit=10_000)
    except Exception:  # the page shows without it
        return None
    now = time.time()
    mine = [x for x in pending if now - x.opened >= older_than
            and (x.id in recording or x.meta.get("conversation") == conversation_id)]
    if not mine:
        return None
    return {"count": len(mine), "seconds": round(now - min(x.opened for x in mine))}
