"""The services a live call can be sent to besides the three providers' own APIs: Azure OpenAI
and the named OpenAI-compatible upstreams of ``upstream.hosts`` (xAI, Groq, DeepSeek, ...).

Each speaks OpenAI's wire formats, so its request is built by OpenAI's request side
(``TurnRequest.host`` names the service, so only its own earlier answers go back natively) and
its answer read by OpenAI's adapter (``WireContext.served_by``: the turn is the service's):

* Azure OpenAI: ``AZURE_OPENAI_API_KEY`` (the Azure SDK's variable), sent as ``api-key``, to
  the resource's endpoint (``TURNSCOPE_UPSTREAM_AZURE`` or ``AZURE_OPENAI_ENDPOINT``) through its
  v1 API, ``/openai/v1/responses``; the model is the deployment's name.
* A named upstream ``<name>``: ``<NAME>_API_KEY`` (``XAI_API_KEY``, ``GROQ_API_KEY``,
  ``DEEPSEEK_API_KEY``; ``-`` becomes ``_``), sent as ``Authorization: Bearer``, through Chat
  Completions (``/v1/chat/completions`` under its base URL), the API every compatible host
  speaks.

Their names for a person and the models offered first are ``providers.served``'s, beside the
hosts that name them.

Vertex AI is not offered to live calls: it takes a Google access token, which expires within
the hour, rather than a key the server's environment can hold.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace

from providers import served
from providers.requests import TurnRequest, UpstreamRequest
from upstream import hosts

WIRE = "openai"
AZURE = "azure"  # the platform's name under ``upstream.hosts``
AZURE_KEY = "AZURE_OPENAI_API_KEY"


@dataclass(frozen=True)
class Service:
    name: str  # what the composer and the API call it, and the turn's provider
    label: str
    key_variable: str
    models: tuple[str, ...]
    api: str  # the OpenAI API it is asked through: "responses" or "chat"


def services() -> list[Service]:
    """The services configured now, Azure first, then the named upstreams in setting order."""
    out = []
    if hosts.find(AZURE) is not None:
        out.append(Service(AZURE, served.LABELS[AZURE], AZURE_KEY, (), "responses"))
    for name in hosts.named():
        variable = name.upper().replace("-", "_") + "_API_KEY"
        out.append(Service(name, served.LABELS.get(name, name), variable,
                           served.MODELS.get(name, ()), "chat"))
    return out


def find(name: str) -> Service | None:
    return next((s for s in services() if s.name == name), None)


def key(service: Service) -> str:
    return os.environ.get(service.key_variable, "").strip()


def auth_header(service: Service, value: str) -> tuple[str, str]:
    return ("api-key", value) if service.name == AZURE else ("authorization", f"Bearer {value}")


def turn_request(service: Service, asked: TurnRequest) -> TurnRequest:
    """``asked`` (made for ``service.name``) as OpenAI's request side builds it."""
    return replace(asked, provider=WIRE, api=service.api, host=service.name)


def upstream_request(service: Service, request: UpstreamRequest) -> UpstreamRequest:
    """The request as the service takes it: Azure's v1 API lives under ``/openai``."""
    if service.name == AZURE:
        return replace(request, path="/openai" + request.path)
    return request
