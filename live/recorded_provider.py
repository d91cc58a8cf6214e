"""The built-in "recorded" provider: the bundled samples served over HTTP in the providers' real
wire formats (``upstream.recorded.RecordedUpstream``), so a live call works with no key at all.

``manage.py demo`` mounts it at ``/recorded`` in its own server and points
``TURNSCOPE_RECORDED_UPSTREAM`` there; live calls to a provider without a key go to it (the page
labels those turns "recorded"). What it answers, whatever the prompt:

* Anthropic ``/v1/messages``: the tides answer (a web search, cited), then the honeybee answer
  that pauses (``pause_turn``), in turn; a request that sends a paused message back (its last
  message is the assistant's) gets that answer's continuation;
* OpenAI ``/v1/responses``: the sourdough answer (a web search, url citations);
* Gemini ``:streamGenerateContent``: the lighthouse answer (grounded in Google Search).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from live import bundled
from upstream.recorded import (
    RecordedUpstream,
    Reply,
    Request,
    by_provider,
    error_reply,
    provider_of,
    reply,
)

PREFIX = "/recorded"
PACE = 0.03  # seconds between events: a stream a person can watch arrive


def _replies(slug: str, pace: float) -> list[Reply]:
    sample = bundled.sample(slug)
    return [reply(sample.provider, r.raw.encode(), pace=pace) for r in sample.responses]


def responder(pace: float = PACE) -> Callable[[Request], Reply]:
    """Which sample answers a request (see the module docstring)."""
    tides = _replies("anthropic-tides", pace)
    paused, continued = _replies("anthropic-pause-turn", pace)
    catalog = {
        "anthropic": [tides[0], paused],
        "openai": _replies("openai-sourdough", pace),
        "google": _replies("gemini-lighthouses", pace),
    }
    rotate = by_provider(catalog)

    def respond(request: Request) -> Reply:
        provider = provider_of(request.path)
        if provider is None or provider not in catalog:
            return error_reply("", 404, "not_found", f"the recorded provider has no {request.path}")
        try:
            body: Any = request.json
        except ValueError:
            return error_reply(provider, 400, "invalid_request_error", "the body is not JSON")
        if not isinstance(body, dict):
            return error_reply(provider, 400, "invalid_request_error",
                               "the body is not a JSON object")
        messages = body.get("messages")
        if (provider == "anthropic" and isinstance(messages, list) and messages
                and isinstance(messages[-1], dict) and messages[-1].get("role") == "assistant"):
            return continued  # a paused turn sent back
        return rotate(request)

    return respond


KEPT = 1_000  # requests, bodies and served contents the recorded provider remembers


def app(pace: float = PACE, prefix: str = PREFIX) -> RecordedUpstream:
    """The recorded provider as an ASGI app, mounted at ``prefix``."""
    # verify_replay: like the provider, it refuses (400) a paused message or an earlier answer
    # sent back other than it served it (one of the last KEPT it served); it runs as long as
    # the demo does, so it remembers a window, not everything
    return RecordedUpstream(respond=responder(pace), prefix=prefix, verify_replay=True,
                            keep=KEPT)
