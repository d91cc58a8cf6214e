"""Which proxied requests are recorded.

| provider  | an SDK's base URL    | recorded                                                |
|-----------|----------------------|---------------------------------------------------------|
| anthropic | ``/proxy/anthropic`` | ``POST /v1/messages``                                   |
| openai    | ``/proxy/openai/v1`` | ``POST /v1/responses``, ``POST /v1/chat/completions``   |
| google    | ``/proxy/google``    | ``POST /{v1,v1beta}/models/{model}:generateContent``    |
|           |                      | and ``:streamGenerateContent`` (``alt=sse``, JSON array) |

And the other services of ``upstream.hosts``, read by the adapter of the wire they speak:

* ``azure`` (``/proxy/azure``, an ``AzureOpenAI`` client's ``azure_endpoint``): ``POST
  /openai/deployments/{d}/chat/completions`` and ``…/responses``, ``/openai/responses``, and
  the v1 API's ``/openai/v1/responses`` and ``/openai/v1/chat/completions`` (OpenAI's wire);
* ``vertex`` (``/proxy/vertex``, plus ``/v1`` for ``AnthropicVertex``): ``POST
  /{v1,v1beta1}/projects/{p}/locations/{l}/publishers/google/models/{m}:generateContent`` and
  ``:streamGenerateContent`` (Gemini's wire), ``…/publishers/anthropic/models/{m}:rawPredict``
  and ``:streamRawPredict`` (Anthropic's);
* a named upstream (``/proxy/{name}``): ``POST …/chat/completions`` and ``POST …/responses``.

A provider's own endpoints are its own to name (``Provider.proxied_endpoint``); the platforms
and named upstreams are routed here. Every other path under a prefix (count_tokens, models,
files...) is forwarded unchanged and not recorded.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from providers import registry

_AZURE_CHAT = re.compile(r"^/openai/(?:deployments/[^/]+|v1)/chat/completions$")
_AZURE_RESPONSES = re.compile(r"^/openai/(?:deployments/[^/]+/|v1/)?responses$")
_VERTEX = re.compile(
    r"^/(?:v1|v1beta1)/projects/[^/]+/locations/[^/]+/publishers/(google|anthropic)/models/"
    r"[^/:]+:(generateContent|streamGenerateContent|rawPredict|streamRawPredict)$")
_VERTEX_METHODS = {"google": ("generateContent", "streamGenerateContent"),
                   "anthropic": ("rawPredict", "streamRawPredict")}
_COMPATIBLE_CHAT = re.compile(r"^(?:/[^/]+)*/chat/completions$")
_COMPATIBLE_RESPONSES = re.compile(r"^(?:/[^/]+)*/responses$")


@dataclass(frozen=True)
class Endpoint:
    provider: str  # the adapter that reads it
    name: str  # "messages", "responses", "chat", "generate"
    path: str
    served_by: str | None = None  # the service, when it is not the provider's own API


def recorded(provider: str, method: str, path: str) -> Endpoint | None:
    """The recorded endpoint ``method path`` (the path below the prefix of ``provider``, a
    provider or an ``upstream.hosts`` service) is, or None for a request only forwarded."""
    if method != "POST":
        return None
    found = registry.find(provider)
    if found is None:
        return _elsewhere(provider, path)
    name = found.proxied_endpoint(path)  # a provider's own API: its own endpoints
    return Endpoint(provider, name, path) if name is not None else None


def _elsewhere(name: str, path: str) -> Endpoint | None:
    """A recorded endpoint of Azure OpenAI, Vertex AI or a named OpenAI-compatible upstream."""
    if name == "azure":
        if _AZURE_CHAT.match(path):
            return Endpoint("openai", "chat", path, "azure")
        if _AZURE_RESPONSES.match(path):
            return Endpoint("openai", "responses", path, "azure")
        return None
    if name == "vertex":
        match = _VERTEX.match(path)
        if match is None or match.group(2) not in _VERTEX_METHODS[match.group(1)]:
            return None
        if match.group(1) == "anthropic":
            return Endpoint("anthropic", "messages", path, "vertex")
        return Endpoint("google", "generate", path, "vertex")
    if _COMPATIBLE_CHAT.match(path):
        return Endpoint("openai", "chat", path, name)
    if _COMPATIBLE_RESPONSES.match(path):
        return Endpoint("openai", "responses", path, name)
    return None
