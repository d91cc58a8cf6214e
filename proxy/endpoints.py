"""Which proxied requests are recorded.

| provider  | an SDK's base URL    | recorded                                                |
|-----------|----------------------|---------------------------------------------------------|
| anthropic | ``/proxy/anthropic`` | ``POST /v1/messages``                                   |
| openai    | ``/proxy/openai/v1`` | ``POST /v1/responses``, ``POST /v1/chat/completions``   |
| google    | ``/proxy/google``    | ``POST /{v1,v1beta}/models/{model}:generateContent``    |
|           |                      | and ``:streamGenerateContent`` (``alt=sse``, JSON array) |

Every other path under a prefix (count_tokens, models, files...) is forwarded unchanged and not
recorded.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

PROVIDERS = ("anthropic", "openai", "google")

_GOOGLE = re.compile(
    r"^/(v1|v1beta|v1alpha)/models/([^/:]+):(generateContent|streamGenerateContent)$")


@dataclass(frozen=True)
class Endpoint:
    provider: str
    name: str  # "messages", "responses", "chat", "generate"
    path: str


def recorded(provider: str, method: str, path: str) -> Endpoint | None:
    """The recorded endpoint ``method path`` (the path below the provider's prefix) is, or
    None for a request that is only forwarded."""
    if method != "POST":
        return None
    if provider == "anthropic" and path == "/v1/messages":
        return Endpoint(provider, "messages", path)
    if provider == "openai" and path == "/v1/responses":
        return Endpoint(provider, "responses", path)
    if provider == "openai" and path == "/v1/chat/completions":
        return Endpoint(provider, "chat", path)
    if provider == "google" and _GOOGLE.match(path):
        return Endpoint(provider, "generate", path)
    return None
